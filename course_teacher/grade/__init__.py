"""The teacher's grader: submitted notebooks in, a gradebook out.

    python -m course_utils.grade SUBMISSIONS [--out grades] [--min-score 3 | 75%] [--jobs 2]
    make grade SUBMISSIONS=path [MIN_SCORE=...]

SUBMISSIONS is one notebook or a folder of them, nested as you like. The student's id is the
first folder under SUBMISSIONS (``submissions/alice/00_tensor_shapes.ipynb`` and
``submissions/alice/week1/00_tensor_shapes.ipynb`` are alice's); a notebook directly in
SUBMISSIONS, or given alone, is named by its file name without ``.ipynb`` (``bob.ipynb``: bob);
``--student`` sets the id outright. Hidden folders (``.ipynb_checkpoints``) and the output folder
are skipped.

What it writes, under ``--out`` (default ``grades/``), each file whole or not at all (a
temporary file, then ``os.replace``):

- ``grades.csv``: a row per submission and exercise: student, lesson, exercise, status (passed,
  failed, not attempted, crashed), mistake (the named mistake or kind of failure: ``NO_SCALE``,
  ``FORBIDDEN``, ``TIME_LIMIT``, ``RENAMED``, ...), points, max_points, submission (its path under
  SUBMISSIONS), review (what a teacher may want to read, see below);
- for each submission, ``<its path without .ipynb>/result.json`` in Classroom 50's format
  (``classroom50/result/v1``: score, max-score, a test per exercise) and ``feedback.md``: the
  verdicts and hints a check prints in the notebook, in the notebook's language, and what
  became of the notebook's other cells.

Every run grades everything again and writes the same files for the same submissions (no dates,
no timings in them); files left by an earlier run for notebooks no longer there are removed. An
exercise is worth its ``points`` attribute, 1 when it has none: full points when it passes, else 0.
The exit code is 0 when every submission reached ``--min-score`` (default 0), 1 when one did not,
2 when there was nothing to grade.

How one submission is graded (grader.py)
----------------------------------------
Each notebook gets its own fresh kernel (runner.py): a new process that has run no other
notebook's code, forked from a template process that has only imported torch, matplotlib and the
course's package (forkserver.py; it saves each kernel those seconds of imports), or, where that
cannot be, started from nothing by a launch wrapper (launch.py). Either sets a memory limit
(RLIMIT_AS) before the kernel starts. The kernel also gets a time limit per cell, per call of the
learner's function and per notebook, a temporary working folder and an environment without the
grader's secrets. The grader reads the notebook as text (submission.py) and, for each of the
lesson's exercises in notebook order, runs the code cells up to and including its exercise cell,
then has the kernel call the learner's function:

- which cells run: ``--cells all`` (default) runs every code cell but the check cells, as the
  learner's notebook would; ``--cells own`` runs only the cells that import or call ``setup``,
  the exercise cells, and the cells the learner wrote or changed (any code cell whose text is not
  one of the course's own cells): much faster, and enough when the exercises use no variable of
  the lesson's other cells (true of the course's exercises). Check cells, the ones calling
  ``check("NN.name", ...)``, never run: a learner may have edited them.
- a cell that fails, runs past ``--cell-timeout`` (interrupted, then killed) or kills the kernel
  is recorded in the feedback and skipped; after a death the grader starts a fresh kernel and
  runs the cells that had run well again (at most 3 fresh kernels per notebook).
- the function is found by its exercise cell (cell metadata ``exercise``), under the name the
  course's own render gives it (its check cell: ``check("00.padding_mask", padding_mask)``). An
  exercise cell that is gone, not valid Python, failing, or no longer defining that name (renamed
  or deleted) gets a verdict of its own: MISSING_CELL, SYNTAX_ERROR, CELL_ERROR, RENAMED, DELETED.
- the kernel calls it on the grader's cases through the check engine's sandbox (copies of each
  case, ``--time-limit`` per call, capped output, forbidden helpers watched, gradients computed)
  and sends back data (wire.py): outputs, errors, gradients, printed size, forbidden calls. The
  grader judges them in its own process with the registry's references, computed there, and the
  check engine's comparisons (exercises/grading.py: ``prepare`` / ``collect`` / ``judge``), so
  the verdicts and hints are the ones a check prints in the notebook.
- a kernel that dies while the function runs (``os._exit``, a crash) gives KERNEL_DIED; a check
  that runs past all its time limits, TIME_LIMIT; an answer that does not come back or makes no
  sense, NO_RESULT. Then the next exercise goes on in a fresh kernel. Nothing one notebook does
  stops the others: ``--jobs`` notebooks (default 2) are graded at once, each in its own kernel.

Time, measured on the course's 2-core machine while other work loaded it: a lesson 00 notebook
takes 2-4 s with ``--cells own`` and 4-5 s with ``--cells all``; lessons whose cells train models
(01-04) take 8-18 s with ``--cells all``. Starting the grader (its imports and the template
process) takes another 10-15 s once per run.

Runs on Linux (and other systems with fork, resource limits and Unix sockets), not on Windows.

Threat model
------------
What the grader guarantees: a verdict is computed in the grader's process, from its own cases and
references, by code the notebook cannot reach. A notebook that patches torch (``torch.allclose =
lambda *a, **k: True``), the check engine (``course_utils.exercises.grading``), the registry, or
even this package's kernel side changes only its own kernel: it cannot make a wrong answer pass,
because the values the grader compares come back as data and must match the references to the
tolerance. The grader unpickles that data with ``torch.load(weights_only=True)`` (tensors,
numbers, strings, lists: no code runs), checks every field, and never trusts what the notebook
printed.

What the kernel reports and a determined learner can fake, because it is computed beside their
code: that no forbidden helper was called (the watcher is in the kernel; code run before it can
switch it off, and the package's references are importable there), that a result is on the graph
and its gradients (they are checked against the references, but computed in the kernel), and
what changed in the world. So a learner who calls the package's own reference and also disables
the kernel's watcher can pass an exercise that forbids it: the forbidden-helper verdict catches
the honest use, not a deliberate forgery. To help a teacher spot such notebooks, the grader reads
every code cell's syntax tree (in its own process) for code that reaches for the grading
machinery (the check engine, the registry, tracers, frames, code objects) or assigns to
attributes of torch, Python or the package; the ``review`` column and the feedback name what it
found. Obfuscated code escapes that reading.

What the grader is not: an operating-system sandbox. The kernel runs as the grader's user, can
read and write the files that user can and start processes (killed with the kernel's process
group when it is done; a process that detaches itself survives). Grade untrusted submissions in a
container or a CI job (the classroom workflow does), not on a machine holding anything of value.
The memory limit is on address space: allocations past it fail inside the kernel rather than
exhausting the machine.
"""
