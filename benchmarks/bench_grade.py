"""What the sandbox costs the grader: seconds per submission, with and without bubblewrap.

    .venv/bin/python benchmarks/bench_grade.py                 3 rounds, --cells own
    .venv/bin/python benchmarks/bench_grade.py --rounds 5 --cells all

The honest submissions of tests/test_grade_hostile.py (lesson 00 solved in English and in
Chinese, lesson 00 with two known mistakes, lesson 00 partly not attempted, lessons 01 and 02
solved) are each graded alone (``grader.grade``, one job), in a sandbox and with ``--no-sandbox``'s
kernels, in interleaved rounds (each round grades every submission both ways, in turn), so that a
change in the machine's load touches both alike. For each way it prints the median over every
submission and round of the seconds ``grade_one`` took (reading, scanning, starting the kernel,
running the cells, checking and judging) and of the whole run (the same, plus the run's own set-up:
its temporary folder and thread pool), then each submission's median. Not a test: timings vary with
the machine and its load; compare the two ways of one run.
"""

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_grade_hostile import HONEST, STUDENTS, _honest  # the honest submissions, built the same way

from course_teacher.grade import grader, sandbox

WAYS = {"sandbox": True, "no sandbox": False}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", choices=("own", "all"), default="own")
    args = parser.parse_args(argv)
    ok, why = sandbox.available()
    if not ok:
        sys.exit(f"no sandbox here: {why}")
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as base:
        roots = {}
        for label in HONEST:
            roots[label] = Path(base) / label
            _honest(roots[label] / STUDENTS[label], label)
        graded = {way: {label: [] for label in HONEST} for way in WAYS}
        runs = {way: [] for way in WAYS}
        options = {way: grader.Options(time_limit=2, cell_timeout=30, cells=args.cells, sandboxed=sandboxed)
                   for way, sandboxed in WAYS.items()}
        for label in HONEST:  # warm up: the references, computed once per process
            grader.grade(roots[label], options["no sandbox"], jobs=1)
        for _ in range(args.rounds):
            for label in HONEST:
                for way in WAYS:
                    started = time.monotonic()
                    (result,) = grader.grade(roots[label], options[way], jobs=1)
                    runs[way].append(time.monotonic() - started)
                    graded[way][label].append(result.seconds)
    print(f"grading one submission alone, --cells {args.cells}, {args.rounds} rounds; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, euid {os.geteuid()}, Python {platform.python_version()}")
    print(f"{'':12} {'grade_one (median s)':>22} {'whole run (median s)':>22}")
    for way in WAYS:
        every = [s for seconds in graded[way].values() for s in seconds]
        print(f"{way:12} {statistics.median(every):22.2f} {statistics.median(runs[way]):22.2f}")
    sandboxed, bare = (statistics.median(s for seconds in graded[way].values() for s in seconds) for way in WAYS)
    print(f"the sandbox adds {sandboxed - bare:.2f} s a submission ({sandboxed / bare:.2f}x)\n")
    print(f"{'submission':14} " + " ".join(f"{way:>12}" for way in WAYS))
    for label in HONEST:
        print(f"{label:14} " + " ".join(f"{statistics.median(graded[way][label]):12.2f}" for way in WAYS))


if __name__ == "__main__":
    main()
