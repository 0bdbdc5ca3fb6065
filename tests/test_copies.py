"""A copy of the course's own code is no answer (course_teacher/grade/copies.py): the student package
holds working functions of eight exercises (the issue's list), and the references and solutions are
public. Pasted as an answer, renamed, reformatted or with the docstring dropped, each is told by its
fingerprint and goes to the teacher's review naming its source; no answer written independently of
the course (tests/test_learner_answers*.py) is taken for one."""

import ast
import importlib
import inspect
import re
import textwrap

import answer_keys
import pytest

from course_teacher.exercises import EXERCISES
from course_teacher.grade import copies, grader, submission

pytestmark = pytest.mark.slow  # (the grader and its answer key: `make test`'s, not the inner loop's)

#: The student package's functions that pass an exercise when pasted as its answer.
PACKAGE = {
    "00.padding_mask": "course_utils.masks.padding_mask",
    "00.split_heads": "course_utils.multihead.split_heads",
    "00.merge_heads": "course_utils.multihead.merge_heads",
    "01.additive_scores": "course_utils.attention.additive_scores",
    "01.scaled_dot": "course_utils.attention.scaled_dot_product_attention",
    "02.causal_mask": "course_utils.masks.causal_mask",
    "02.masked_softmax": "course_utils.masks.masked_softmax",
    "07.apply_rope": "course_utils.decoding.apply_rope",
}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    return answer_keys.key(tmp_path_factory, "00", "01", "02", "03", "05", "06", "07", "08")  # (the course's fingerprints are in every lesson's key)


def _exercise(answers, exercise):
    return next(e for e in answers.plan(exercise[:2], "en")[0] if e.id == exercise)


def _disguised(function, name):
    """`function`'s code as a copier pastes it: renamed to `name`, its parameters renamed, no
    docstring, reformatted (ast.unparse drops comments and layout)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    node = tree.body[0]
    node.name = name
    if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
        node.body = node.body[1:]
    renames = {a.arg: f"my_{a.arg}" for a in node.args.args + node.args.kwonlyargs}
    for child in ast.walk(node):
        if isinstance(child, ast.arg) and child.arg in renames:
            child.arg = renames[child.arg]
        elif isinstance(child, ast.Name) and child.id in renames:
            child.id = renames[child.id]
    return ast.unparse(tree)


@pytest.mark.parametrize("exercise", sorted(PACKAGE))
def test_a_pasted_course_function_is_a_copy_naming_its_source(answers, exercise):
    module, _, name = PACKAGE[exercise].rpartition(".")
    function = getattr(importlib.import_module(module), name)
    spec = _exercise(answers, exercise)
    cell = submission.Cell(3, _disguised(function, spec.function))
    assert grader.copied_from(cell, spec, answers) == PACKAGE[exercise]


#: The helpers a pasted course function calls, moved or renamed (issue 37): the module alias ``check`` renamed (a
#: class of the learner's, ``checks``), its functions called bare (defined in the cell), the module's own private
#: helpers renamed (``_pair`` as ``own_pair``).
HELPERS_MOVED = {
    "alias renamed": lambda source: source.replace("check.", "checks."),
    "called bare": lambda source: re.sub(r"\bcheck\.", "", source),
    "private helpers renamed": lambda source: re.sub(r"\b_(\w+)\(", r"own_\1(", source.replace("check.", "v.")),
}


@pytest.mark.parametrize("move", sorted(HELPERS_MOVED))
@pytest.mark.parametrize("exercise", sorted(PACKAGE))
def test_a_pasted_course_function_with_its_helpers_moved_is_a_copy_naming_its_source(answers, exercise, move):
    module, _, name = PACKAGE[exercise].rpartition(".")
    spec = _exercise(answers, exercise)
    source = _disguised(getattr(importlib.import_module(module), name), spec.function)
    moved = HELPERS_MOVED[move](source)
    assert moved != source or move == "private helpers renamed" and "_" not in source
    assert grader.copied_from(submission.Cell(3, moved), spec, answers) == PACKAGE[exercise]


@pytest.mark.parametrize("exercise", ["03.alignment", "05.top_u_attention", "06.post_norm_decoder", "08.tiled_forward"])
def test_a_pasted_reference_is_a_copy(answers, exercise):
    spec = _exercise(answers, exercise)
    reference = EXERCISES[exercise].reference
    module = inspect.getmodule(reference)
    functions = copies.functions(inspect.getsource(module))
    named = [n for n, f in functions.items() if f"reference {exercise}" == answers.copies.get(copies.fingerprint(f))]
    assert named, f"no function of {module.__name__} is fingerprinted as {exercise}'s reference"
    cell = submission.Cell(3, _disguised(getattr(module, named[0]), spec.function))
    assert grader.copied_from(cell, spec, answers) == f"reference {exercise}"


def test_the_solution_notebooks_are_no_copies(answers):
    """The lessons' worked solutions grade full marks (the platforms' tests): no fingerprint is theirs."""
    from submissions import render

    for stem in ("00_tensor_shapes", "04_multihead_attention", "08_flash_attention"):
        for cell in render(f"{stem}.ipynb", "en", solutions=True).cells:
            if cell.cell_type == "code" and cell.metadata.get("exercise"):
                for function in copies.functions(cell.source).values():
                    assert answers.copies.get(copies.fingerprint(function)) is None, (stem, function.name)


def test_no_independently_written_answer_is_taken_for_a_copy(answers):
    import test_learner_answers
    import test_learner_answers_l04_l06
    import test_learner_answers_l07_l08

    taken, count = [], 0
    for module in (test_learner_answers, test_learner_answers_l04_l06, test_learner_answers_l07_l08):
        collected = next(value for value in vars(module).values() if type(value).__name__ == "Answers")
        for exercise, function, _ in collected:
            if exercise not in EXERCISES:
                continue
            for found in copies.functions(textwrap.dedent(inspect.getsource(function))).values():
                count += 1  # (a decorator that wraps an answer shows its own function too: read both)
                if answers.copies.get(copies.fingerprint(found)):
                    taken.append((exercise, found.name, answers.copies[copies.fingerprint(found)]))
    assert count > 400 and not taken, taken


def test_a_one_line_wrapper_is_too_small_to_tell():
    (function,) = copies.functions("def f(q, k, v):\n    return attention(q, k, v)").values()
    assert copies.fingerprint(function) is None
