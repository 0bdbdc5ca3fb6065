"""The grader's side inside a notebook's kernel: call the learner's function, send back data.

After the cells up to an exercise cell have run, the grader runs one line in the kernel:
``collect(globals(), "padding_mask", calls_path, answer_path)``. It reads the calls the grader
wrote (the cases, weights, forbidden names, time limit), looks the function up by the name the
exercise gave it, calls it through the check engine's sandbox (grading.collect: copies of each
case, a time limit, capped output, forbidden calls recorded, gradients computed) and writes the
outcomes as plain data (wire.py). It judges nothing: the grader does, in its own process.

Everything here runs beside the learner's code, which may have replaced any of it; the grader
treats what comes back as a claim to check, never as a verdict (see course_teacher/grade/__init__.py).
"""


import torch

from . import grading, leftovers, wire


def start():
    """Run by the grader first, before any cell of the notebook: the threads alive now are the kernel's own,
    and every thread started later is the notebook's (a check fails while one runs: leftovers.py)."""
    leftovers.baseline(strict=True)


def collect(namespace, name, calls_path, answer_path):
    """Call namespace[name] on the calls in `calls_path`; write the outcomes to `answer_path`."""
    calls = torch.load(calls_path, weights_only=True)
    function = namespace.get(name, wire) if type(namespace) is dict else wire  # wire: "not there"
    if function is wire:
        answer = {"format": wire.FORMAT, "missing": True}
    elif not callable(function):
        answer = {"format": wire.FORMAT, "not_callable": wire.type_name(function)}
    else:
        with grading.no_collection():  # until the answer is written
            answer = wire.encode(grading.collect(calls, function, calls["time_limit"], eager=True))
    wire.save(answer, answer_path)
