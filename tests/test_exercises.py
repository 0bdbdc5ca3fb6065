"""Every registered exercise proves its check: the reference passes, each known mistake fails and
is named, the stub reads as not attempted, broken functions get verdicts, not tracebacks, and the
generic rules hold for every exercise: exact dtypes, a result attached to the graph where the
reference's is, and learner code that patches torch can neither pass a wrong answer nor fail a
right one. (tests/test_grading.py attacks the check with hostile learners.)"""

import dataclasses
import functools
import io
import math

import jupytext
import nbformat
import pytest
import torch

from course_teacher.exercises import EXERCISES
from course_utils import evaluate, i18n
from course_teacher import build
from course_utils.exercises import CRASHED, FAILED, NOT_ATTEMPTED, PASSED, check, public
from course_utils.exercises import objects, rules
from course_utils.exercises.grading import Raised, changed_arguments, copies, reproduces
from cells import run_cell
from prepared import evaluate as evaluate_hidden  # the teacher's verdict, each Reference prepared once
from prepared import prepared

IDS = sorted(EXERCISES)
HIDDEN_SEED = 12345  # a teacher's
MISTAKES = [(exercise, mistake) for exercise in IDS for mistake in EXERCISES[exercise].mistakes]


def test_every_lesson_so_far_has_at_least_three_exercises_with_three_mistakes_each():
    for lesson in build.lessons():
        ours = [e for e in IDS if e.startswith(f"{lesson}.")]
        assert len(ours) >= 3, f"lesson {lesson} has exercises {ours}"
        for exercise in ours:
            assert len(EXERCISES[exercise].mistakes) >= 3, exercise


@pytest.mark.slow  # (the grader's hidden cases, a kernel or a fresh process: not in `make quick`)
@pytest.mark.parametrize("exercise", IDS)
def test_every_case_is_plain_data_that_crosses_to_a_kernel(exercise):
    """The grader sends the calls, hidden cases included, with torch.save, and the kernel loads them
    with weights_only=True: a case holds tensors, numbers, strings, lists and dicts, no object."""
    calls = prepared(exercise, hidden_seed=HIDDEN_SEED).calls
    buffer = io.BytesIO()
    torch.save(calls, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert len(loaded["args"]) == len(calls["args"]) and loaded["largest"] == calls["largest"]


# That the reference passes its own check (unless it calls a function the exercise forbids the
# learner, as a package reference may) is proved in tests/test_devices.py, with meta as torch's
# default device: test_each_check_makes_its_tensors_where_its_cases_are, one check run for both.


# lesson 09's `slow` (Triton's interpreter: 85 check runs, 13 of `make quick`'s 390 CPU-seconds); `make test` runs them
@pytest.mark.parametrize("exercise, mistake", [
    pytest.param(e, m, id=f"{e}-{m.code}", marks=[pytest.mark.slow] if e in rules.KERNEL_EXERCISES else [])
    for e, m in MISTAKES])
def test_each_known_mistake_fails_and_is_named(exercise, mistake):
    verdict = evaluate(exercise, mistake.fn)
    assert verdict.status == FAILED, verdict.message
    assert verdict.code == mistake.code, verdict.message
    assert mistake.code in verdict.message and mistake.hint["en"] in verdict.message
    assert set(mistake.hint) == {"en", "zh"} and all(mistake.hint.values())


@pytest.mark.slow  # (the grader's hidden cases, a kernel or a fresh process: not in `make quick`)
@pytest.mark.parametrize("exercise, mistake", MISTAKES, ids=[f"{e}-{m.code}" for e, m in MISTAKES])
def test_each_known_mistake_is_named_on_the_hidden_cases_too(exercise, mistake):
    """As the grader judges it: the public cases and hidden ones drawn from a teacher's seed."""
    verdict = evaluate_hidden(exercise, mistake.fn, hidden_seed=HIDDEN_SEED)
    assert verdict.status == FAILED and verdict.code == mistake.code, verdict.message


def _call(function, case):
    with torch.no_grad():
        return function(*copies(case, grad=False)[1])


def _outcomes(exercise, function):
    """The function's output on each case of the exercise, or the error it raised there."""
    spec = EXERCISES[exercise]
    cases = spec.cases(torch.Generator().manual_seed(spec.seed))
    outcomes = []
    for case in cases:
        try:
            outcomes.append(_call(function, case))
        except Exception as error:  # a mistake may raise on some case: that is how it behaves there
            outcomes.append(Raised(error))
    return outcomes, (spec.atol, spec.rtol)


@pytest.mark.parametrize("exercise", IDS)
def test_mistakes_are_told_apart_from_the_reference_and_from_each_other(exercise):
    """Otherwise a check could name the wrong mistake, or call a correct answer a mistake."""
    known = prepared(exercise).mistakes  # their results on the public cases, as the check has them
    for made in EXERCISES[exercise].mistakes:
        outcomes, tolerance = _outcomes(exercise, made.fn)
        for other in known:
            if other.code != made.code:
                assert not reproduces(other, outcomes, tolerance), f"{made.code} reads as {other.code}"
    outcomes, tolerance = _outcomes(exercise, EXERCISES[exercise].reference)
    for mistake in known:
        assert not reproduces(mistake, outcomes, tolerance), f"the reference reads as {mistake.code}"


# A second check run for each of the ~400 mistakes (a fifth of `make quick`'s time): `make test` runs it, and
# the inner loop keeps the first, test_each_known_mistake_fails_and_is_named.
@pytest.mark.slow
@pytest.mark.parametrize("exercise, mistake", MISTAKES, ids=[f"{e}-{m.code}" for e, m in MISTAKES])
def test_a_mistake_is_named_by_its_values_even_when_cut_off_from_the_graph(exercise, mistake):
    """Mistake recognition compares outputs only: the same mistake computed under no_grad is still named."""

    def detached(*args):
        with torch.no_grad():
            return mistake.fn(*args)

    assert evaluate(exercise, detached).code == mistake.code


#: Mistakes that raise whatever the input, so no case can show their output; and BLOCK = n, which raises where
#: n is not a power of two, as the first case's n must be (to show the padding's mistakes).
RAISE_BY_NATURE = {("00.merge_heads", "VIEW_NOT_CONTIGUOUS"), ("09.softmax_kernel", "BLOCK_NOT_POWER_OF_2")}


@pytest.mark.parametrize("exercise", IDS)
def test_every_mistake_runs_on_the_first_case(exercise):
    """The first case is chosen (square, where axes matter) so that a mistake runs there and can
    be recognised by its output, not only by the error it raises on later cases."""
    spec = EXERCISES[exercise]
    first = spec.cases(torch.Generator().manual_seed(spec.seed))[0]
    _call(spec.reference, first)
    for mistake in spec.mistakes:
        if (exercise, mistake.code) not in RAISE_BY_NATURE:
            _call(mistake.fn, first)  # raises here, failing the test, if the mistake cannot run


def _solutions(lesson):
    """{exercise id: the function the lesson source's solution cell defines}."""
    namespace = {}
    exec("import math\nimport torch\nimport torch.nn.functional as F\n", namespace)  # what lessons import
    if lesson == "10":  # its solutions use what its setup cell imports
        exec("from course_utils import gpt\nfrom course_utils.attention import scaled_dot_product_attention\n"
             "from course_utils.decoding import KVCache\n", namespace)
    if lesson == "09":  # its kernels use triton and tl, imported through the switch to the interpreter
        exec("from course_utils.triton_setup import load\nload()\nimport triton\nimport triton.language as tl\n", namespace)
    found = {}
    # the English render with solutions: a cell's two languages (`# lang:` blocks) as a notebook holds one
    for cell in build.render(jupytext.read(build.lessons()[lesson]), "en", solutions=True).cells:
        if "exercise" in build.tags(cell):
            before = set(namespace)
            run_cell(cell.source, namespace)
            (name,) = set(namespace) - before
            found[cell.metadata["exercise"]] = namespace[name]
    return found


def _interpreted_slow(exercise, *values, id=None):
    """A parameter (`values`, or the exercise alone) of a generic test that runs the lesson's solution: `slow`
    where that solution is Triton kernels run by Triton's interpreter (lesson 09: 1-3 s a check, half of this
    module's time in `make quick`). `make test` runs them all; the inner loop proves each generic rule on
    every other exercise."""
    marks = [pytest.mark.slow] if exercise in rules.KERNEL_EXERCISES else []
    return pytest.param(*(values or (exercise,)), marks=marks, id=id)


#: The exercises, for the generic tests that run a lesson's solution (lesson 09's `slow`: _interpreted_slow).
SOLVED = [_interpreted_slow(exercise) for exercise in IDS]


#: A right answer to every exercise: the lesson's own solution (the reference where no lesson
#: notebook exists yet); the generic tests below change it into wrong ones.
SOLUTIONS = {exercise: EXERCISES[exercise].reference for exercise in IDS}
SOLUTIONS.update({exercise: f for lesson in sorted(build.lessons()) for exercise, f in _solutions(lesson).items()})


@pytest.mark.slow  # (the grader's hidden cases, a kernel or a fresh process: not in `make quick`)
@pytest.mark.parametrize("lesson", sorted(build.lessons()))
def test_the_lessons_own_solutions_pass_their_checks(lesson):
    """As the grader judges them: the public cases and hidden ones together. (The notebook's own check, on
    the public cases alone, passes in every solution notebook nbval runs: `make test`'s last step.)"""
    solutions = _solutions(lesson)
    assert sorted(solutions) == [e for e in IDS if e.startswith(f"{lesson}.")]
    for exercise, function in solutions.items():
        verdict = evaluate_hidden(exercise, function, hidden_seed=HIDDEN_SEED)
        assert verdict.status == PASSED and "passed" in verdict.message, verdict.message


@pytest.mark.slow  # (`make quick` runs `publish --check` itself, before its tests: the same comparison)
def test_the_public_data_is_what_the_teachers_references_give():
    from course_teacher import publish
    from course_utils.exercises import public

    assert public.EXERCISES == tuple(EXERCISES)  # in the lessons' order, as the registry has them
    assert publish.problems() == []


def test_the_teachers_evaluate_on_a_prepared_key_gives_the_verdict_it_gives_alone():
    """course_teacher.exercises.evaluate(..., reference=key) is how the tests judge many functions against
    one key (tests/prepared.py): the verdict is the one it prepares itself, and a key of another exercise,
    or with other cases than the seed asks for, is refused by name."""
    from course_teacher.exercises import evaluate as teacher_evaluate
    from course_teacher.exercises import prepare

    spec = EXERCISES["01.scaled_dot"]
    key = prepare(spec, HIDDEN_SEED)
    for function in (spec.reference, *(mistake.fn for mistake in spec.mistakes)):
        alone = teacher_evaluate(spec.id, function, hidden_seed=HIDDEN_SEED)
        assert teacher_evaluate(spec.id, function, hidden_seed=HIDDEN_SEED, reference=key) == alone
        assert teacher_evaluate(spec.id, function, hidden_seed=HIDDEN_SEED, reference=key) == alone  # key reused
    assert {teacher_evaluate(spec.id, m.fn, hidden_seed=HIDDEN_SEED, reference=key).code for m in spec.mistakes} == {
        m.code for m in spec.mistakes}
    other = next(exercise for exercise in IDS if exercise.startswith("02."))
    with pytest.raises(ValueError, match=rf"reference must be the prepared Reference of '01.scaled_dot'.*{other}"):
        teacher_evaluate(spec.id, spec.reference, reference=prepared(other))
    with pytest.raises(ValueError, match="hidden_seed"):
        teacher_evaluate(spec.id, spec.reference, reference=key)  # a key with hidden cases, no seed
    with pytest.raises(ValueError, match="hidden_seed"):
        teacher_evaluate(spec.id, spec.reference, hidden_seed=HIDDEN_SEED, reference=prepared(spec.id))
    with pytest.raises(ValueError, match="got one of 'dict'"):
        teacher_evaluate(spec.id, spec.reference, reference={})


@pytest.mark.slow  # (the grader's hidden cases, a kernel or a fresh process: not in `make quick`)
def test_a_table_of_the_public_answers_fails_on_the_hidden_cases():
    """What the student's package holds (the public cases' results) cannot pass the grader."""
    from course_utils.exercises import public

    passed = []
    for exercise in IDS:
        reference = public.load(exercise)
        table = [(case.args, case.expected) for case in reference.cases]

        def looked_up(*args):
            for known, expected in table:
                if len(known) == len(args) and all(
                    (torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                     and a.shape == b.shape and a.dtype == b.dtype else a == b)
                    if type(a) is type(b) else False for a, b in zip(known, args)):
                    return expected
            raise ValueError("not a public case")

        if evaluate_hidden(exercise, looked_up, hidden_seed=HIDDEN_SEED).status == PASSED:
            passed.append(exercise)
    assert passed == []


@pytest.mark.parametrize("exercise", IDS)
def test_stub_reads_as_not_attempted(exercise):
    def stub(*args):
        raise NotImplementedError(f"exercise {exercise}")

    verdict = evaluate(exercise, stub)
    assert verdict.status == NOT_ATTEMPTED and "not attempted" in verdict.message


@pytest.mark.parametrize("exercise", IDS)
def test_a_raising_function_gets_a_crashed_verdict(exercise):
    def broken(*args):
        raise KeyError("oops")

    verdict = evaluate(exercise, broken)
    assert verdict.status == CRASHED and "KeyError" in verdict.message and "oops" in verdict.message
    assert "test case 1 (" in verdict.message  # the case, with its arguments


def _tensor_positions(exercise):
    """The positions of the tensor arguments of the exercise's first case (but those the check turns into
    an object, objects.BUILT: tests/test_exercises_l10.py changes a weight of a block in place)."""
    built = objects.BUILT.get(exercise, ())
    return [i for i, arg in enumerate(_first_case(exercise)) if isinstance(arg, torch.Tensor) and i not in built]


def _first_case(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))[0]


def _changed_in_place(tensor):
    with torch.no_grad():
        if tensor.dtype == torch.bool:
            tensor.logical_not_()
        else:
            tensor.add_(1)


ARGUMENTS = [_interpreted_slow(e, e, p, id=f"{e}-{p}") for e in IDS for p in _tensor_positions(e)]


@pytest.mark.parametrize("exercise, position", ARGUMENTS)
def test_a_right_answer_that_changes_an_argument_in_place_fails_naming_it(exercise, position):
    """An exercise's function never changes its arguments (lesson 00's first exercise and the README
    say so): whichever argument it changes, the check fails as INPUT_MODIFIED and names it."""
    solution = SOLUTIONS[exercise]

    def changes_one(*args):
        result = solution(*args)
        _changed_in_place(args[position])
        return result

    names = public.load(exercise).names
    verdict = evaluate(exercise, changes_one)
    assert verdict.status == FAILED and verdict.code == "INPUT_MODIFIED", verdict.message
    assert f"changed its argument `{names[position]}` in place" in verdict.message
    assert f"`{names[position]} = {names[position]}.clone()`" in verdict.message


@pytest.mark.parametrize("lesson", sorted(build.lessons()))
def test_the_course_changes_no_argument_in_place(lesson):
    """The lesson's solutions, the references and every known mistake leave their arguments as
    they were given (bit for bit), on every public and hidden case: the course keeps its own rule."""
    for exercise in [e for e in IDS if e.startswith(f"{lesson}.")]:
        spec = EXERCISES[exercise]
        cases = list(spec.cases(torch.Generator().manual_seed(spec.seed)))
        cases += list((spec.hidden or spec.cases)(torch.Generator().manual_seed(HIDDEN_SEED)))
        functions = [("solution", SOLUTIONS[exercise]), ("reference", spec.reference)]
        functions += [(m.code, m.fn) for m in spec.mistakes]
        for name, function in functions:
            for number, case in enumerate(cases, start=1):
                given = copies(case, grad=False)[1]
                try:
                    with torch.no_grad():
                        function(*given)
                except Exception:  # noqa: BLE001 (a mistake may raise: what matters is what it did to its arguments)
                    pass
                assert changed_arguments(case, given) == [], f"{exercise} {name} changes case {number}"


def _map_tensors(output, change):
    if isinstance(output, torch.Tensor):
        return change(output)
    if isinstance(output, (tuple, list)):
        return type(output)(_map_tensors(item, change) for item in output)
    return output


def _reference_outputs(exercise, grad=False):
    """The reference's output on the first case (its floating inputs requiring grad if `grad`)."""
    spec = EXERCISES[exercise]
    first = spec.cases(torch.Generator().manual_seed(spec.seed))[0]
    found = []
    _map_tensors(spec.reference(*copies(first, grad=grad)[1]), lambda t: found.append(t) or t)
    return found


def _float_output(exercise):
    found = _reference_outputs(exercise)
    return bool(found) and all(t.is_floating_point() for t in found)


def _differentiable(exercise):
    return any(t.requires_grad and t.grad_fn is not None for t in _reference_outputs(exercise, grad=True))


@pytest.mark.parametrize("exercise", SOLVED)
def test_a_wrong_shaped_result_is_reported_as_a_shape_difference(exercise):
    if not _float_output(exercise):
        pytest.skip("no tensor output")
    solution = SOLUTIONS[exercise]
    verdict = evaluate(exercise, lambda *args: _map_tensors(solution(*args), lambda t: t.unsqueeze(0)))
    assert verdict.status == FAILED and "shape" in verdict.message and verdict.code is None


@pytest.mark.parametrize("exercise", SOLVED)
def test_a_nan_result_is_reported_as_nan(exercise):
    if not _float_output(exercise):
        pytest.skip("no floating-point tensor output")
    solution = SOLUTIONS[exercise]
    verdict = evaluate(exercise, lambda *args: _map_tensors(solution(*args), lambda t: t * math.nan))
    assert verdict.status == FAILED and "NaN" in verdict.message


@pytest.mark.parametrize("exercise", IDS)
def test_a_wrong_type_is_reported(exercise):
    verdict = evaluate(exercise, lambda *args: "a string")
    assert verdict.status == FAILED and "should be" in verdict.message


@pytest.mark.parametrize("exercise", SOLVED)
def test_a_result_of_another_dtype_fails_naming_both_dtypes(exercise):
    # dtypes no named mistake returns (float where int64 is expected: tests/test_grading.py)
    other = {torch.float32: torch.float64, torch.float64: torch.float32, torch.bool: torch.uint8,
             torch.int64: torch.int32, torch.float16: torch.float64, torch.bfloat16: torch.float64}
    expected = _reference_outputs(exercise)[0].dtype
    solution = SOLUTIONS[exercise]

    def retyped(*args):
        return _map_tensors(solution(*args), lambda t: t.to(other[t.dtype]))

    verdict = evaluate(exercise, retyped)
    assert verdict.status == FAILED and "dtype" in verdict.message, verdict.message
    assert str(expected).replace("torch.", "") in verdict.message
    assert str(other[expected]).replace("torch.", "") in verdict.message


@pytest.mark.parametrize("how", ["detach", "no_grad"])
@pytest.mark.parametrize("exercise", SOLVED)
def test_a_result_cut_off_from_the_graph_fails_where_the_exercise_is_differentiable(exercise, how):
    solution = SOLUTIONS[exercise]

    def detached(*args):
        return _map_tensors(solution(*args), lambda t: t.detach())

    def under_no_grad(*args):
        with torch.no_grad():
            return solution(*args)

    verdict = evaluate(exercise, detached if how == "detach" else under_no_grad)
    if _differentiable(exercise):
        assert verdict.status == FAILED and verdict.code == "NO_GRAPH", verdict.message
    else:  # nothing to differentiate: the check asks for no graph
        assert verdict.status == PASSED, verdict.message


def _patch_the_world():
    """What a hostile learner's code replaces: torch's comparisons, the package's reference and
    message catalogue. Returns the originals, to prove they are back."""
    import course_utils.attention
    import course_utils.i18n

    originals = {
        (torch, "allclose"): torch.allclose,
        (torch, "equal"): torch.equal,
        (torch, "isnan"): torch.isnan,
        (torch.Tensor, "double"): torch.Tensor.double,
        (torch.Tensor, "__ne__"): torch.Tensor.__ne__,
        (torch.autograd, "grad"): torch.autograd.grad,
        (course_utils.attention, "scaled_dot_product_attention"): course_utils.attention.scaled_dot_product_attention,
        (course_utils.i18n, "message"): course_utils.i18n.message,
    }
    torch.allclose = lambda *a, **k: True
    torch.equal = lambda *a, **k: True
    torch.isnan = lambda t: torch.zeros_like(t, dtype=torch.bool)
    torch.Tensor.double = lambda self: torch.zeros_like(self, dtype=torch.float64)
    torch.Tensor.__ne__ = lambda self, other: torch.zeros_like(self, dtype=torch.bool)
    torch.autograd.grad = lambda outputs, inputs, **k: tuple(torch.zeros_like(i) for i in inputs)
    course_utils.attention.scaled_dot_product_attention = lambda *a, **k: None
    course_utils.i18n.message = lambda *a, **k: "✅ passed"
    return originals


def _assert_restored(originals):
    for (owner, name), original in originals.items():
        assert getattr(owner, name) is original, name


def _garbage(t):
    if t.dtype == torch.bool:
        return ~t
    return t + 1 if t.dtype == torch.int64 else t * 0 + 7.0


@pytest.mark.parametrize("exercise", SOLVED)
def test_a_function_that_patches_torch_and_returns_garbage_fails(exercise):
    solution, originals = SOLUTIONS[exercise], {}

    def hostile(*args):
        result = solution(*args)
        originals.update(_patch_the_world())
        return _map_tensors(result, _garbage)

    verdict = evaluate(exercise, hostile)
    _assert_restored(originals)
    assert verdict.status == FAILED, verdict.message
    assert "torch.allclose (replaced)" in verdict.message and "put everything back" in verdict.message


@pytest.mark.parametrize("exercise", SOLVED)
def test_a_right_answer_under_a_patched_world_still_passes(exercise):
    solution, originals = SOLUTIONS[exercise], {}

    def patches_then_answers(*args):
        result = solution(*args)
        originals.update(_patch_the_world())
        return result

    verdict = evaluate(exercise, patches_then_answers)
    _assert_restored(originals)
    assert verdict.status == PASSED, verdict.message
    assert "torch.allclose (replaced)" in verdict.message


def test_a_near_miss_reports_the_largest_difference_and_where():
    solution = SOLUTIONS["01.scaled_dot"]

    def off_by_a_bit(q, k, v):
        output, weights = solution(q, k, v)
        output = output.clone()
        output[0, 0, 1] += 0.5
        return output, weights

    verdict = evaluate("01.scaled_dot", off_by_a_bit)
    assert verdict.code is None and "up to 0.5" in verdict.message and "(0, 0, 1)" in verdict.message


def test_verdicts_follow_the_notebook_language():
    i18n.set_language("zh")
    mistake = EXERCISES["01.scaled_dot"].mistakes[0]
    verdict = evaluate("01.scaled_dot", mistake.fn)
    assert "还不对" in verdict.message and mistake.hint["zh"] in verdict.message


def test_check_prints_the_verdict(capsys):
    check("01.scaled_dot", SOLUTIONS["01.scaled_dot"])
    assert "passed" in capsys.readouterr().out


def test_unknown_exercise_and_non_function_get_clear_messages():
    with pytest.raises(ValueError, match="argument 'exercise' got 'nope'"):
        evaluate("nope", print)
    verdict = evaluate("01.scaled_dot", 42)
    assert verdict.status == FAILED and "argument 'function' got int" in verdict.message


def test_a_check_leaves_the_random_state_and_the_inputs_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)

    def greedy(q, k, v):
        torch.rand(1000)  # uses the global generator
        q.mul_(0)  # and edits its input in place
        return SOLUTIONS["01.scaled_dot"](q, k, v)

    evaluate("01.scaled_dot", greedy)
    assert torch.equal(torch.rand(3), expected)


def _check_outputs(path):
    """{exercise id: the text its check cell printed} in one committed notebook."""
    found = {}
    for cell in nbformat.read(path, as_version=4).cells:
        called = build.CHECK_CALL.search(cell.source) if cell.cell_type == "code" else None
        if called:
            found[called.group(1)] = "".join(o.get("text", "") for o in cell.outputs)
    return found


@pytest.mark.parametrize("lesson", sorted(build.lessons()))
def test_committed_notebooks_show_solutions_passing_and_stubs_not_attempted(lesson):
    # nbval re-executes these notebooks and compares with these outputs, so they are real
    marks = {("en", True): "passed", ("zh", True): "通过", ("en", False): "not attempted", ("zh", False): "尚未作答"}
    for lang, solutions, path in build.targets(build.lessons()[lesson]):
        outputs = _check_outputs(path)
        ours = [e for e in IDS if e.startswith(f"{lesson}.")]
        assert sorted(outputs) == ours, path
        for exercise, text in outputs.items():
            assert marks[lang, solutions] in text, f"{path}: {exercise}: {text!r}"


# ----------------------------------------------------------------------------- hidden cases

#: Exercises whose hidden cases, drawn from the teacher's seed, miss an edge that their public cases
#: have, so that a known mistake passes the hidden cases alone; each with why. Lesson 07 is being reworked
#: elsewhere: finish it there. Strict: once the hidden cases catch every mistake the xfail fails, so this
#: list stays true; remove the entry then.
HIDDEN_EDGES_PENDING = {}  # exercises whose hidden cases miss a known mistake, with why (none now)


def _signature(value):
    """What a case's argument is, values aside: a tensor's shape and dtype, a number or
    a string itself (an integer argument is part of a case's shape: a length, a head count, a block),
    a list's or tuple's items in turn."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, *(_signature(item) for item in value))
    if isinstance(value, dict):
        return ("dict", *((key, _signature(item)) for key, item in sorted(value.items())))
    return (type(value).__name__, value)


def _same(a, b):
    """Whether two cases are identical: the same signatures and the same values, bit for bit."""
    if _signature(a) != _signature(b):
        return False
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b) if not a.is_floating_point() else bool(
            torch.equal(torch.nan_to_num(a, nan=0.5), torch.nan_to_num(b, nan=0.5)))
    if isinstance(a, (tuple, list)):
        return all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return all(_same(a[key], b[key]) for key in a)
    return a == b


def _public_cases(exercise):
    spec = EXERCISES[exercise]
    return list(spec.cases(torch.Generator().manual_seed(spec.seed)))


def _hidden_cases(exercise, seed):
    """The hidden cases the grader draws for `exercise` from the teacher's seed `seed` (reference.prepare)."""
    spec = EXERCISES[exercise]
    return list((spec.hidden or spec.cases)(torch.Generator().manual_seed(seed)))


HIDDEN_SEEDS = (HIDDEN_SEED, 0, 1, 7, 2024)  # a teacher's, the public seed (most exercises use 0), and others


@pytest.mark.parametrize("exercise", IDS)
def test_hidden_cases_differ_from_the_public_ones_in_shape_and_from_seed_to_seed(exercise):
    """Hidden cases that only redraw values on the public shapes catch nothing more than the public ones,
    and cases that do not depend on the seed can be copied from the public data: for every seed the
    hidden set holds a case of shapes (or integer arguments) no public case has, no hidden case is a
    public one, and two seeds draw different hidden sets."""
    public = _public_cases(exercise)
    shapes = {_signature(case) for case in public}
    drawn = {}
    for seed in HIDDEN_SEEDS:
        hidden = drawn[seed] = _hidden_cases(exercise, seed)
        assert hidden, f"seed {seed}: no hidden case"
        assert any(_signature(case) not in shapes for case in hidden), f"seed {seed}: only the public shapes"
        for number, case in enumerate(hidden, start=1):
            copied = [n for n, known in enumerate(public, start=1) if _same(case, known)]
            assert not copied, f"seed {seed}: hidden case {number} is public case {copied[0]}"
    for seed in HIDDEN_SEEDS[1:]:
        other = drawn[seed]
        assert len(other) != len(drawn[HIDDEN_SEED]) or not all(
            _same(a, b) for a, b in zip(other, drawn[HIDDEN_SEED])), f"seeds {HIDDEN_SEED} and {seed} draw the same"


@functools.cache  # one registry entry per exercise and seed: its Reference is prepared once (tests/prepared.py)
def _hidden_only(exercise, seed=HIDDEN_SEED):
    """The exercise judged on its hidden cases alone (as the check judges its public ones)."""
    spec = EXERCISES[exercise]
    return dataclasses.replace(spec, cases=lambda generator: _hidden_cases(exercise, seed))


def _pending(exercise):
    reason = HIDDEN_EDGES_PENDING.get(exercise)
    return pytest.param(exercise, marks=pytest.mark.xfail(reason=reason, strict=True)) if reason else exercise


@pytest.mark.slow  # (the grader's hidden cases: not in `make quick`)
@pytest.mark.parametrize("exercise", [_pending(e) for e in IDS])
def test_the_hidden_cases_alone_pass_the_solution_and_catch_every_known_mistake(exercise):
    """The hidden cases stay within what the exercise's text promises (the lesson's solution and the
    reference pass them, for several seeds), and keep the edges the public cases have: each known mistake,
    caught on the public cases, is caught on the hidden ones alone too."""
    spec = EXERCISES[exercise]
    for seed in HIDDEN_SEEDS[:3]:
        alone = _hidden_only(exercise, seed)
        verdict = evaluate_hidden(alone, SOLUTIONS[exercise])
        assert verdict.status == PASSED, (seed, verdict.message)
        verdict = evaluate_hidden(alone, spec.reference)
        # (a reference may call what the learner may not; lesson 09's are plain torch, which the kernel rule refuses)
        refused = "FORBIDDEN" if spec.forbidden else None
        kernel = exercise in rules.KERNEL_EXERCISES and verdict.code == "TORCH_OUTSIDE_KERNEL"
        assert verdict.status == PASSED or verdict.code == refused or kernel, (seed, verdict.message)
    alone = _hidden_only(exercise, HIDDEN_SEED)
    missed = [m.code for m in spec.mistakes if evaluate_hidden(alone, m.fn).status == PASSED]
    assert missed == [], f"passed on the hidden cases (seed {HIDDEN_SEED}): {missed}"
