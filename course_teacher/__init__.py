"""course_teacher: the teacher's side of the attention course.

- ``exercises``: each exercise's reference implementation, its known mistakes as functions, and its
  cases (public, and hidden ones drawn from the teacher's seed);
- ``publish``: writes the public cases' data into the student's package (course_utils/exercises/public/);
- ``grade``: the grader (``python -m course_teacher.grade``, ``make grade``).

It is installed with the course repository (``pip install -e .``), never with the student zip, and
never mounted in the grading sandbox.
"""
