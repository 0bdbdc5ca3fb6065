"""An exercise's Reference, computed on the teacher's side: what the references and the known
mistakes give on the public cases, and on hidden cases drawn from the teacher's seed.

The notebook's check reads the public part as data (course_utils.exercises.public); the grader
computes the whole in its own process, before any learner code runs anywhere.
"""

import functools
import warnings

import jupytext
import torch

from course_utils.exercises import grading, objects
from course_utils.exercises.compare import tensors
from course_utils.exercises.expected import Case, Known, Reference
from course_utils.exercises.grading import copies, gradients, kind_of, names_of, on_graph

from .. import sources
from ..grade.key import DEFAULT_SEED
from ..render import render
from .registry import EXERCISES

#: The hidden cases' seed when the teacher gives none (public: see the grader's key.py).
DEFAULT_HIDDEN_SEED = DEFAULT_SEED


def prepare(exercise, hidden_seed=None):
    """The Reference (course_utils.exercises.expected) of `exercise` (a registry.Exercise): its public cases, then, when
    `hidden_seed` is given, its hidden cases drawn from it."""
    grad_mode = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    try:
        args = list(exercise.cases(torch.Generator().manual_seed(exercise.seed)))
        published = len(args)
        if hidden_seed is not None:
            draw = exercise.hidden or exercise.cases
            args += list(draw(torch.Generator().manual_seed(int(hidden_seed))))
        cases = [_case(exercise.id, exercise.reference, number, case) for number, case in enumerate(args, start=1)]
        for case in cases[published:]:
            case.hidden = True
        if exercise.largest is not None:
            for case in cases:
                case.largest = int(exercise.largest(*case.args))
        mistakes = tuple(Known(m.code, dict(m.hint), tuple(_behaviour(exercise.id, m.fn, case) for case in args))
                         for m in exercise.mistakes)
        count = len(args[0]) if args else 0
        names = names_of(exercise.reference, count) or []
        returns = returned(exercise.id)
        if not cases or not isinstance(cases[0].expected, (tuple, list)) or len(cases[0].expected) != len(returns):
            returns = ()  # "Returns (B, L, d)": a shape, not the names of a tuple's values
        return Reference(exercise.id, cases, (exercise.atol, exercise.rtol), mistakes, tuple(exercise.forbidden),
                         names, exercise.points, returns)
    finally:
        torch.set_grad_enabled(grad_mode)


def returned(exercise):
    """The names of the values the exercise's function returns, as the docstring of its cell in the
    lesson gives them ("Returns (output, lse): ..."): a verdict then names the value that differs.
    () for a function that returns one value, or a lesson not on this checkout."""
    text = _exercise_docstrings(exercise[:2]).get(exercise, "")
    start = text.find("Returns (")
    if start < 0:
        return ()
    depth, parts, part = 0, [], ""
    for character in text[start + len("Returns ("):]:
        if character == "(":
            depth += 1
        elif character == ")":
            if depth == 0:
                break
            depth -= 1
        if character == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += character
    parts.append(part)
    names = tuple(part.split()[0] if part.split() else "" for part in parts)
    return names if len(names) > 1 and all(name.isidentifier() for name in names) else ()


@functools.cache
def _exercise_docstrings(lesson):
    """{exercise id: its cell's text} of a lesson's English student render (the stub and its docstring)."""
    try:
        source = sources.lessons(lesson)[lesson]
    except (KeyError, SystemExit):
        return {}
    rendered = render(jupytext.read(source), "en", solutions=False)
    return {cell.metadata["exercise"]: cell.source for cell in rendered.cells if cell.metadata.get("exercise")}


def _case(exercise, reference, number, args):
    """Run the reference on a case: its result, and its gradients."""
    leaves, fresh = copies(args, grad=True)
    with torch.random.fork_rng(devices=[]):
        output = _kept(exercise, reference, args, fresh)
    produced = [t for _, t in tensors(output)]
    attached = [i for i, t in enumerate(produced) if t.is_floating_point() and on_graph(t)]
    generator = torch.Generator().manual_seed(number)  # fixed: the same weights for reference and learner
    weights = [torch.randn(produced[i].shape, generator=generator, dtype=produced[i].dtype) for i in attached]
    found = gradients([produced[i] for i in attached], weights, leaves) if attached else {}
    return Case(number, tuple(args), _detached(output), attached, weights, found)


def _behaviour(exercise, mistake, args):
    """What a mistake (our code) gives on a case: ("value", result) or ("raised", its error's kind);
    quietly, on copies, leaving the random state alone."""
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("value", _detached(_kept(exercise, mistake, args, copies(args, grad=False)[1])))
    except Exception as error:  # noqa: BLE001 (a mistake may raise: that is how it behaves there)
        return ("raised", kind_of(type(error)))


def _kept(exercise, function, args, fresh):
    """What the check compares for `function` on a case (`args`, and `fresh`, the copies it is called
    on): its result, called as the check calls it (objects.py: some arguments are objects built from
    the case's data, some exercises are judged by what the calls showed)."""
    return objects.finish(exercise, args, objects.call(exercise, _plain, function, fresh))


def _plain(function, *args):
    return function(*args)


def _detached(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detached(item) for item in value)
    return value


def evaluate(exercise, function, *, hidden_seed=None, time_limit=None, reference=None):
    """The grading.Verdict for `function` on `exercise` (an id or a registry.Exercise), judged in this
    process against the teacher's references: the public cases, and hidden ones when `hidden_seed`
    is given. What the grader decides, without a kernel (tests, and a teacher trying an answer).

    `reference`: the answer key, `prepare(exercise, hidden_seed)` done once for many functions, as the
    grader prepares its key once for a whole class (preparing runs the reference and every known
    mistake on every case: most of a call's time). The verdict is the same; judging leaves the key as
    it was, apart from the names and labels it sets afresh on each case every time."""
    spec = EXERCISES[exercise] if isinstance(exercise, str) else exercise
    if reference is None:
        reference = prepare(spec, hidden_seed)
    elif not isinstance(reference, Reference) or reference.exercise != spec.id:
        got = reference.exercise if isinstance(reference, Reference) else type(reference).__name__
        raise ValueError(f"evaluate: reference must be the prepared Reference of {spec.id!r} "
                         f"(prepare({spec.id!r}, hidden_seed)), got one of {got!r}")
    elif any(case.hidden for case in reference.cases) != (hidden_seed is not None):
        raise ValueError(f"evaluate: reference must be prepared with the hidden_seed given ({hidden_seed!r}): "
                         f"got one {'with' if hidden_seed is None else 'without'} hidden cases")
    return grading.judge(reference, grading.collect(reference.calls, function, time_limit))
