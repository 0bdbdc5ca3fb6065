"""course_teacher: the teacher's and the maintainer's side of the attention course.

- ``exercises``: each exercise's reference implementation, its known mistakes as functions, and its
  cases (public, and hidden ones drawn from the teacher's seed);
- ``publish``: writes the public cases' data into the student's package
  (course_utils/exercises/public/), and answer keys (the data a grader grades against);
- ``grade``: the grader (``python -m course_teacher.grade``, ``make grade``), which grades against
  an answer key; with the student package, the one part of this package a platform's autograder
  ships (``platforms``);
- ``platforms``: the autograders for Gradescope and Classroom 50;
- the authoring and lecture tools: ``build`` (one source per lesson, four notebooks), ``glossary``
  (the glossary's one source, and the pages and links the build makes of it), ``bilingual_code``, ``diagrams``, ``slides``, ``release`` (the student bundle), ``links`` (Binder
  and JupyterHub links), ``guide``.

It is installed with the course repository (``pip install -e .``), never with the student zip, and
never mounted in the grading sandbox.
"""

import sys

# nbformat validates notebooks with jsonschema, which loads rfc3987-syntax when it is installed (jupyter-events
# asks for it) to check the "iri" string format; that module compiles 38 Lark grammars at import, about a second
# of CPU in every process that reads a notebook: each grader run (twice, with its fork server), every teacher's
# command, each test process. No schema the course validates uses that format: marked absent, jsonschema leaves
# the format out. (A Jupyter server, whose events may check it, never imports this package.)
sys.modules.setdefault("rfc3987_syntax", None)
