"""Nothing on the student's side solves an exercise, and every exercise says what its check refuses.

The student's side is the ``course_utils`` package: what a learner's notebook imports; the sweep
reads, beside it, everything else of Python a published artifact ships (the grader and the
script of the platforms' autograders: ``SHIPPED``). A learner who
calls one of its functions, say ``masks.causal_mask`` for exercise 02.causal_mask, has solved
nothing; the exercise's ``forbidden`` names (course_teacher/exercises/registry.py) make its check
refuse that call. Three rules, each a test here:

1. Every function of the package that passes an exercise when nothing is forbidden (values, dtypes
   and gradients alone) is among that exercise's forbidden names. The sweep calls every function,
   class and function attribute of a class the package defines, public and private, as if it were
   the learner's answer.
2. Nothing of the package passes any exercise as it is graded (with its forbidden names).
3. A check enforces nothing its exercise's text does not state: the English and the Chinese text
   of each exercise name every function its check refuses (``states`` gives the rule).

Beyond what the sweep finds, an exercise's author forbids the functions that solve its core from
its arguments (05.sampled_measure: the package's sampled scores and its max − mean), and nothing
else: never a whole module. Out of scope: the learner's own compositions, such as a partial
application of a course function with the exercise's fixed extra arguments
(``lambda scores, keep: masks.masked_softmax(scores, keep, caller="x")``): the function it calls is
what the forbidden names name, and the check catches that call however it is made.
"""

import contextlib
import dataclasses
import importlib
import inspect
import pkgutil
import re
import types
import warnings

import jupytext
import matplotlib
import pytest
import torch

from prepared import prepared  # each spec's Reference prepared once per process (tests/prepared.py)

from course_teacher.exercises import EXERCISES, TRANSPOSES, evaluate
from course_teacher import build
from course_utils.exercises import PASSED, rules

matplotlib.use("Agg")

#: Seconds for one call of a candidate (a real answer takes milliseconds on these cases).
CALL_LIMIT = 0.5

#: Functions the sweep does not call, because calling them acts on the world rather than computing:
#: each writes files, starts a process or changes the process itself, and none returns a tensor.
#: (``main`` functions, the command lines, are left out by name.) The test below proves each name exists.
ACTS_ON_THE_WORLD = {
    "course_utils.session.setup",  # seeds every generator, sets the plot style and font for the process
    "course_teacher.grade.grader.write_answers",  # starts a process that writes an answer key
    "course_teacher.grade.grader.grade",  # grades notebooks: kernels, files
    "course_teacher.grade.grader.grade_one",
    "course_teacher.grade.grader.write",  # writes a gradebook
    "course_teacher.grade.grader._sweep",  # removes earlier runs' temporary folders
    "course_teacher.grade.grader._stop",  # raises KeyboardInterrupt (the SIGTERM handler)
    "course_teacher.grade.gradebook.Gradebook",  # makes an output folder
    "course_teacher.grade.gradebook.write",
    "course_teacher.grade.gradebook._replace",
    "course_teacher.grade.gradebook._Folders",
    "course_teacher.grade.launch._limit",  # sets this process's resource limits
    "course_teacher.grade.launch._become",  # changes this process's user
    "course_teacher.grade.launch._first_to_go",
    "course_teacher.grade.sandbox.release",  # closes a file descriptor (a tensor is an index)
    "course_teacher.grade.sandbox.data_fd",  # opens a pipe
    "course_teacher.grade.runner.kill_all",
    "course_teacher.platforms.autograder.install",  # makes a virtual environment
    "course_teacher.platforms.autograder.gradescope",  # grades, writes the platforms' results
    "course_teacher.platforms.autograder.classroom50",
    "course_teacher.platforms.autograder.grade",
}

#: What the sweep reads: the student package, and what the platforms' autograders ship beside it
#: (the grader, the autograder's script): together, every line of Python a published artifact holds
#: (test_platforms.py, test_release.py).
SHIPPED = ("course_utils", "course_teacher.grade", "course_teacher.platforms.autograder")


def _modules():
    """Every module of SHIPPED, imported (importing one has no side effects: a module's command
    line runs only under ``python -m``; a package's ``__main__`` is that command line, so it is
    left out)."""
    found = []
    for name in SHIPPED:
        module = importlib.import_module(name)
        found.append(module)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), f"{name}."):
            if not info.name.endswith(".__main__"):
                found.append(importlib.import_module(info.name))
    return found


def _ours(obj):
    module = getattr(obj, "__module__", None) or ""
    return any(module == name or module.startswith(f"{name}.") for name in SHIPPED)


def candidates():
    """{full name: callable} for every function and class the package defines, and every function
    attribute of those classes (methods, static and class methods), public and private. An object a
    module imports from another is named where it is defined."""
    modules = _modules()
    named = {}  # id(obj) -> (name, obj)

    def add(name, obj, home):
        if id(obj) not in named or home:
            named[id(obj)] = (name, obj)

    for module in modules:
        for key, obj in list(vars(module).items()):
            if not (isinstance(obj, (types.FunctionType, type)) and _ours(obj)):
                continue
            home = obj.__module__ == module.__name__
            add(f"{module.__name__}.{key}", obj, home)
            if isinstance(obj, type):
                for attribute, member in vars(obj).items():
                    function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                    if isinstance(function, types.FunctionType) and _ours(function):
                        add(f"{module.__name__}.{key}.{attribute}", getattr(obj, attribute), home)
    found = {}
    for name, obj in named.values():
        if name.rsplit(".", 1)[-1] == "main" or name in ACTS_ON_THE_WORLD:
            continue
        found[name] = obj
    return dict(sorted(found.items()))


def accepts(function, count):
    """Whether `function` can be called with `count` positional arguments. The grader and the
    notebook's check call the learner's function positionally with exactly the case's arguments
    (``function(*case)``), so a function that cannot take them cannot pass: leaving it out loses
    nothing. A callable whose signature cannot be read is tried."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True


def _first_case_only(spec):
    """`spec` with its first public case alone and nothing forbidden: a necessary condition to pass,
    cheap to test."""
    return dataclasses.replace(spec, cases=lambda generator: spec.cases(generator)[:1], forbidden=(), mistakes=())


@contextlib.contextmanager
def _no_run_time_rules(spec):
    """The run-time rules (rules.py) switched off for `spec`'s exercise when `spec` forbids nothing: the
    operations it forbids, the course functions that solve it (and any, rules.OWN_CODE), lesson 09's kernel rule.
    "Nothing forbidden" means none of them, or the sweep would only see what the dispatcher already refuses."""
    if spec.forbidden:
        yield
        return
    saved = rules.forbidden_operations, rules.solvers, rules.is_kernel, rules.own_code
    rules.forbidden_operations, rules.solvers, rules.is_kernel, rules.own_code = (
        (lambda _: ()), (lambda _: ()), (lambda _: False), (lambda _: False))
    try:
        yield
    finally:
        rules.forbidden_operations, rules.solvers, rules.is_kernel, rules.own_code = saved


def _passes(spec, function):
    """Whether `function`, as the learner's answer, passes `spec` (each call under CALL_LIMIT; the
    figures it drew are closed); a `spec` that forbids nothing runs without the run-time rules."""
    import matplotlib.pyplot as plt

    try:
        with warnings.catch_warnings(), _no_run_time_rules(spec):
            warnings.simplefilter("ignore")
            # course_teacher.exercises.evaluate's judgement, on a Reference prepared once per spec: preparing it
            # (the reference and every known mistake run on every case) was three quarters of the sweep's time,
            # and the same for each of the hundreds of candidates (measured on 10.generate_cached: 421 of 540 s)
            return evaluate(spec, function, time_limit=CALL_LIMIT, reference=prepared(spec)).status == PASSED
    except Exception:  # noqa: BLE001
        # The judge itself failed on what the candidate returned: no pass. (It happens: grading's
        # own Raised, called with a case's tensors, returns an object the judge takes for a
        # raised error and cannot read.)
        return False
    finally:
        plt.close("all")


@pytest.fixture(scope="module")
def everything():
    return candidates()


def _argument_count(spec):
    return len(spec.cases(torch.Generator().manual_seed(spec.seed))[0])


# A candidate stopped by the time limit while Python runs a weakref callback is reported by Python as
# an exception it ignored: the sweep expects time limits.
@pytest.mark.slow  # (the grader's hidden cases, a kernel or a fresh process: not in `make quick`)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_nothing_of_the_package_passes(exercise, everything):
    """Rules 1 and 2: what passes with nothing forbidden is forbidden, so nothing passes as graded."""
    spec = EXERCISES[exercise]
    count = _argument_count(spec)
    open_spec, first = dataclasses.replace(spec, forbidden=()), _first_case_only(spec)
    assert _passes(open_spec, spec.reference), "the reference must pass with nothing forbidden"
    # the first case alone first (a necessary condition, and cheap), then every public case
    passing = [name for name, function in everything.items()
               if accepts(function, count) and _passes(first, function) and _passes(open_spec, function)]
    # no candidate broke the machinery for those after it (which would hide a pass)
    assert _passes(open_spec, spec.reference), "the sweep changed what the check sees"
    unforbidden = [name for name in passing if name not in spec.forbidden]
    assert not unforbidden, f"{exercise}: these pass and are not forbidden: {unforbidden}"
    # A candidate that fails with nothing forbidden fails as graded too (forbidding only adds a
    # reason to fail): only the ones that pass need the real check.
    for name in passing:
        assert not _passes(spec, everything[name]), f"{exercise}: {name} passes the check as graded"


def test_the_sweep_sees_the_package(everything):
    assert "course_utils.masks.causal_mask" in everything
    assert "course_utils.probsparse._gathered_scores" in everything
    assert "course_utils.transformer.EncoderLayer.forward" in everything
    for name in ACTS_ON_THE_WORLD:
        module, _, function = name.rpartition(".")
        assert callable(getattr(importlib.import_module(module), function)), name


# ----------------------------------------------------------------------------- the text says it

#: The words that name the transpose family (registry.TRANSPOSES: every way to reorder axes) as a whole.
FAMILY = ("transpose", "转置")


def short_name(name):
    """How an exercise's text names a forbidden function: its last two dotted parts, as a learner
    writes them: "course_utils.masks.causal_mask" -> "masks.causal_mask", "F.softmax",
    "Tensor.softmax", "torch.special.softmax" -> "special.softmax",
    "course_utils.transformer.EncoderLayer.forward" -> "EncoderLayer.forward"."""
    return ".".join(name.split(".")[-2:])


def states(text, name):
    """Whether `text` names the forbidden `name`. The rule, exact and simple: the text holds the
    name's ``short_name`` verbatim, not as part of a longer name (no letter, digit or "_" right
    before or after it: "special.softmax" counts inside `torch.special.softmax`, "F.softmax" does
    not count inside "F.log_softmax", nor "EncoderLayer.forward" inside
    "TransformerEncoderLayer.forward"). A name of the transpose family counts as stated when the
    text names the family: "transpose" or "转置"."""
    if name in TRANSPOSES:
        return any(word in text for word in FAMILY)
    short = re.escape(short_name(name))
    return re.search(rf"(?<![A-Za-z0-9_]){short}(?![A-Za-z0-9_])", text) is not None


def exercise_texts():
    """{exercise id: {"en": text, "zh": text}}: an exercise's text is the markdown cells between the
    code cell before its exercise cell and the exercise cell, each language's cells joined."""
    found = {}
    for path in build.lessons().values():
        cells = jupytext.read(path).cells
        for index, cell in enumerate(cells):
            if "exercise" not in build.tags(cell):
                continue
            start = index
            while start > 0 and cells[start - 1].cell_type == "markdown":
                start -= 1
            found[cell.metadata["exercise"]] = {
                lang: "\n\n".join(c.source for c in cells[start:index] if f"lang-{lang}" in build.tags(c))
                for lang in build.LANGUAGES
            }
    return found


TEXTS = exercise_texts()


def test_every_exercise_has_a_text_in_both_languages():
    assert sorted(TEXTS) == sorted(EXERCISES)
    for exercise, texts in TEXTS.items():
        assert all(texts[lang].strip() for lang in build.LANGUAGES), exercise


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_text_states_what_the_check_forbids(exercise):
    for lang in build.LANGUAGES:
        missing = [name for name in EXERCISES[exercise].forbidden if not states(TEXTS[exercise][lang], name)]
        assert not missing, f"{exercise}: the {lang} text does not name {[short_name(n) for n in missing]}"


def test_the_rule_for_naming_is_exact():
    assert states("the check refuses `masks.causal_mask`", "course_utils.masks.causal_mask")
    assert not states("the check refuses `causal_mask`", "course_utils.masks.causal_mask")
    assert states("`torch.special.softmax`", "torch.special.softmax")
    assert not states("`F.log_softmax`", "F.softmax")
    assert not states("`TransformerEncoderLayer.forward`", "course_utils.transformer.EncoderLayer.forward")
    assert states("不接受课程自带的masks.causal_mask", "course_utils.masks.causal_mask")
    assert states("不用转置", "Tensor.mT") and not states("no einsum", "Tensor.mT")
