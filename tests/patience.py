"""Waits that scale with the machine's speed, for the tests that wait on a clock.

A test that waits for something (a grader to finish, a process to start or die, a sandbox to go) needs a
deadline, or a grader that blocks would hang the suite. A fixed deadline chosen on a quiet machine fails
on a busy one: a laptop compiling something, or CI's two cores shared with a second test process and the
graders' kernels. So a deadline here is a base (what the wait needs on a quiet 2-core machine, with its
margin) times the machine's slowness, measured two ways, the larger counting:

- once per test session (tests/conftest.py calls ``calibrate``; pytest-xdist's workers get the
  controller's number): a fixed piece of pure-Python work, timed on the wall clock, against what it takes
  on a quiet core of the course's 2-core machine. That counts a slower CPU and a busy one alike.
- at every check of a deadline: the load average over the cores this process may use, so that a wait
  started on a quiet machine stretches when the machine gets busy during it.

The factor is at least 1 (a fast machine keeps the base: the bases are what the tests were written for)
and at most MAX_FACTOR (a grader that really blocks still fails, late rather than never).
"""

import os
import statistics
import subprocess
import time

#: CPU seconds of ``_work()`` on one quiet core of the course's 2-core development machine (measured:
#: 0.050-0.053 s in process time, whatever the load; the wall clock matches it on a quiet machine).
REFERENCE_S = 0.05
MAX_FACTOR = 10.0
_measured = None  # the session's calibration (calibrate, or set by tests/conftest.py in an xdist worker)


def _work(n=1_000_000):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def measure(runs=5):
    """The session's slowness: the median wall time of `runs` runs of a fixed piece of work over what it
    takes on a quiet reference core (at least 1)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        _work()
        times.append(time.perf_counter() - started)
    return max(1.0, statistics.median(times) / REFERENCE_S)


def calibrate(value=None):
    """Set the session's slowness: `value` (a worker given the controller's), or measured now."""
    global _measured
    _measured = float(value) if value is not None else measure()
    return _measured


def calibrated():
    """The session's slowness as calibrated (measured now if it was not yet)."""
    return _measured if _measured is not None else calibrate()


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def contention():
    """How many processes want each core now (the 1-minute load average per core), at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available here
        return 1.0
    return max(1.0, load / _cores())


def factor():
    """By how much a quiet machine's wait is stretched here and now."""
    return min(MAX_FACTOR, max(calibrated(), contention()))


def seconds(base):
    """`base` seconds (the wait on a quiet machine) stretched by the machine's slowness now."""
    return base * factor()


class Deadline:
    """A deadline of `base` seconds on a quiet machine, which moves later while the machine is busy: each
    check compares the time spent with `base` stretched by the slowness at that moment."""

    def __init__(self, base):
        self.base = base
        self.started = time.monotonic()
        self.stretch = factor()  # the largest slowness seen since the start: a wait never shrinks

    def elapsed(self):
        return time.monotonic() - self.started

    def limit(self):
        self.stretch = max(self.stretch, factor())
        return self.base * self.stretch

    def passed(self):
        return self.elapsed() >= self.limit()

    def left(self):
        return max(0.0, self.limit() - self.elapsed())


def eventually(condition, base, every=0.1):
    """Poll `condition` until it holds or `base` seconds (stretched) have passed; its last value."""
    deadline = Deadline(base)
    while not condition() and not deadline.passed():
        time.sleep(every)
    return condition()


def communicate(process, base):
    """process.communicate() within `base` seconds (stretched); subprocess.TimeoutExpired past them."""
    deadline = Deadline(base)
    while True:
        try:
            return process.communicate(timeout=min(10.0, max(0.1, deadline.left())))
        except subprocess.TimeoutExpired:
            if deadline.passed():
                raise


def join(thread, base):
    """thread.join() within `base` seconds (stretched); whether the thread ended."""
    deadline = Deadline(base)
    while thread.is_alive() and not deadline.passed():
        thread.join(min(10.0, max(0.1, deadline.left())))
    return not thread.is_alive()


def wait(process, base):
    """process.wait() within `base` seconds (stretched); its exit code, None if it still runs."""
    deadline = Deadline(base)
    while process.poll() is None and not deadline.passed():
        try:
            process.wait(min(10.0, max(0.1, deadline.left())))
        except subprocess.TimeoutExpired:
            pass
    return process.poll()
