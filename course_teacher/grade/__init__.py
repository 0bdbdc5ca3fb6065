"""The teacher's grader: submitted notebooks in, a gradebook out.

    python -m course_teacher.grade SUBMISSIONS [--out grades] [--seed N | --key FOLDER] [--lesson NN]
                                   [--min-score 3 | 75%] [--jobs 2] [--no-sandbox]
    make grade SUBMISSIONS=path [SEED=N] [LESSON=NN] [MIN_SCORE=...]

SUBMISSIONS is one notebook or a folder of them, nested as you like. The student's id is the
first folder under SUBMISSIONS (``submissions/alice/00_tensor_shapes.ipynb`` and
``submissions/alice/week1/00_tensor_shapes.ipynb`` are alice's); a notebook directly in
SUBMISSIONS, or given alone, is named by its file name without ``.ipynb`` (``bob.ipynb``: bob);
``--student`` sets the id outright. Hidden folders (``.ipynb_checkpoints``) and the output folder
are skipped; links are never followed.

What it writes, under ``--out`` (default ``grades/``; gradebook.py), each file whole or not at all
and as soon as the submission is graded (a grader stopped half-way leaves the gradebook of what
finished):

- ``grades.csv``: a row per submission and exercise: student, lesson, exercise, status (passed,
  failed, not attempted, crashed), mistake (the named mistake or kind of failure: ``NO_SCALE``,
  ``FORBIDDEN``, ``REVIEW``, ``TIME_LIMIT``, ``RENAMED``, ``WRONG_LESSON``, ``NOT_REGULAR``, ...),
  points, max_points, submission (its path under SUBMISSIONS), review (the code the teacher should
  read, for REVIEW rows); cells that a spreadsheet would take for a formula are escaped;
- for each submission, ``<its path without .ipynb>/result.json`` in Classroom 50's format
  (``classroom50/result/v1``: score, max-score, a test per exercise) and ``feedback.md``: the
  verdicts and hints a check prints in the notebook, in the notebook's language, and what
  became of the notebook's other cells, every string that comes from the submission escaped;
- ``.gradebook.json``: what the grader wrote, so that a later run removes only its own stale files.

Every run grades everything again and writes the same files for the same submissions and seed (no
dates, no timings in them). An exercise is worth its ``points``: full points when it passes, else 0.
The exit code is 0 when every submission reached ``--min-score`` (default 0), 1 when one did not,
2 when there was nothing to grade, 3 when there is no sandbox and no ``--no-sandbox``, 130 when stopped.

The grader grades against an answer key (key.py): each exercise's expected results on its public
and hidden cases and each lesson's plan, as data. Without ``--key`` it writes one from this
checkout first (``--seed`` draws its hidden cases), in a process of its own, so that the grader's
process holds what a platform's autograder holds: no reference.

How one submission is graded (grader.py)
----------------------------------------
1. Read (submission.py): a regular file only (a link, a pipe or a device is not opened), at most
   20 MB, a notebook; its lesson is the one its cells carry, and must be the one its file name and
   ``--lesson`` say (else every exercise scores 0, WRONG_LESSON). Nothing of the file is ever
   quoted back.
2. Read the learner's code (scan.py, with names.py's name analysis), in the grader's own process:
   every cell the learner wrote or changed, together, against an allow-list of callables
   (policy.py: the learner's own names, safe builtins, the tensor API, ``math``, the course's
   functions, ``triton.language``; never a package whole, since a package holds text evaluators,
   process starters and file loaders), in time linear in its size and bounded. A function an
   exercise forbids (its text says which), or anything that computes it under another name
   (policy.COMPUTES: ``torch.special.softmax``, ``F.scaled_dot_product_attention`` for a softmax, the
   course's ``online_softmax``), reached in any way, scores that exercise 0 (FORBIDDEN); anything
   not on the list (``exec``, ``sympy``, ``open``, ``importlib``, ``getattr`` on a built string,
   patching a library, IPython's output history, threads, private names, ``torch.ops``, a ``match``
   class pattern, ...) scores every exercise 0 for the teacher's review (REVIEW); an exercise's
   function that is a copy of the course's own code (copies.py, after renaming, comments, added or
   reordered statements) scores that exercise 0 for review, naming its source. The cell and the
   code are named in the feedback.
3. Run (runner.py, sandbox.py): a fresh kernel in a bubblewrap sandbox of its own (below). The
   cells run in order up to each exercise cell (``--cells all``: every cell but the check cells;
   ``--cells own``: imports, setup, the exercise cells and the learner's own cells). A cell that
   fails, runs past ``--cell-timeout`` or kills the kernel is noted and skipped; after a death a
   fresh kernel runs the cells that had run well again (at most 3 per notebook).
4. Check: the kernel calls the learner's function (found by the name the exercise gave it) on the
   grader's cases, public and hidden (drawn from ``--seed``), through the check engine's sandbox
   (copies, a time limit per call, capped output, forbidden calls watched, gradients computed), and
   writes back plain data (course_utils/exercises/kernel.py, wire.py). The grader judges it against
   its answer key with the check engine's comparisons, so the verdicts and hints are the ones a
   check prints in the notebook; a verdict on a hidden case shows none of its inputs or results, and
   what the kernel says the function changed in torch is named only from policy.FIXED_CHANGES.

``--jobs`` submissions are graded at once, each in a process of its own (grader.py's ``_Children``),
killed from outside at its deadline: whatever one submission makes the grader do, the run completes,
and SIGTERM or Ctrl-C stops it at once, keeping what finished. A submission whose run was strained (a cell or a check
out of time or memory: a neighbour taking the CPU could cause it) is graded again alone before its
result is final, so that no grade depends on what else ran beside it.

Runs on Linux; the sandbox needs bubblewrap (Debian/Ubuntu: ``apt-get install bubblewrap``).

Threat model
------------
Every submission is treated as written by someone who wants full marks without solving, or wants
to change a classmate's grade.

- No submission can reach another's grade. Each kernel runs in its own sandbox: its own PID,
  network, IPC and UTS namespaces, as an unprivileged user of its own (one uid per job slot, with
  limits on processes, memory, file size and open files; where the machine has memory control
  groups, one cap on all of its processes together: cgroups.py), seeing only the Python installation, the
  virtual environment and the student-side package ``course_utils``, all read-only, a private
  size-capped HOME and /tmp, its working folder, and an environment of a few variables (no secret of
  the grader's). It cannot see the grader, the repository, the answers (``course_teacher``), the
  solutions, the other submissions or the gradebook; it cannot write the grader's files; its IPython
  keeps no history; every process it starts dies with it, and it dies with the grader.
- The verdicts are the grader's: computed in its process, from its own cases and references, on
  data the kernel sends (unpickled as data only, every field checked, files opened without
  following links). A kernel that patches torch or the check engine changes only its own answers.
- The answers are out of reach: the student-side package holds each exercise's public cases and
  their results as data, and no function that passes an exercise (tests/test_student_side.py);
  the hidden cases are drawn from the teacher's seed, in the grader.

What remains, and what the teacher does about it:

- The course's repository is public, with its solutions and this package: with the default seed,
  anyone can compute the hidden cases. Give your own ``--seed`` (kept secret), and for assessed
  work give students a repository or bundle without ``notebooks/solutions`` and ``course_teacher``
  (``make release``'s student zip).
- What the kernel reports about itself (that no forbidden function ran, the gradients) is computed
  beside the learner's code; the static scan (step 2) is the check a kernel cannot forge, and code
  it cannot read goes to the teacher (REVIEW) instead of being trusted.
- Without bubblewrap (``--no-sandbox``, macOS, a container without namespaces) the kernels run as
  the grader's user (as an unprivileged uid when the grader is root and that uid can run its
  Python): grade one submission per fresh container or CI job then, never a class on a machine
  holding anything of value. The grader never falls back to that by itself: without a sandbox it
  grades nothing (exit 3) unless told ``--no-sandbox``; its uid locks live where only root can
  make them (/run), so no other user can make it find none.
- Without memory control groups, each process of a kernel has its own memory cap, and a kernel
  that starts several holds their sum.
"""
