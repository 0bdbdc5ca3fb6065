"""The teacher's grader (course_teacher.grade) on a folder of generated submissions.

The submissions are made at test time from the committed renders of lessons 00 and 01: right
answers (the solution cells), known mistakes, and hostile or broken notebooks. They are graded
once (the module's fixture, `--cells own`: each notebook's imports, setup, exercise cells and the
learner's own cells; the lessons' demonstration cells would cost seconds each), and the gradebook
must be exactly the expected one. Other tests read the files that run wrote, or call the pieces
in this process (the wire format, the student and language rules).
"""

import copy
import csv
import io
import json
import shutil
from pathlib import Path

import answer_keys
import nbformat
import pytest
import torch
from submissions import answer, exercise_cell, insert, render, save, solved

from course_teacher.exercises import EXERCISES, prepare
from course_teacher.grade import grader, submission
from course_utils import i18n
from course_utils.exercises import evaluate, grading, wire
from wired import wired

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

ROOT = Path(__file__).resolve().parent.parent
LESSON_00 = "00_tensor_shapes.ipynb"
LESSON_01 = "01_attention_basics.ipynb"
OPTIONS = ["--jobs", "2", "--cells", "own", "--time-limit", "2", "--cell-timeout", "8"]


# Wrong answers written by hand, each one a known mistake of lesson 00.
CAROL = {  # English
    "00.padding_mask": "def padding_mask(lengths, max_len):\n    return torch.arange(max_len) < lengths[:, None]",
    "00.scores_einsum": 'def scores_einsum(q, k):\n    return torch.einsum("bqhd,bkhd->bhkq", q, k)',
    "00.split_heads": "def split_heads(x, num_heads):\n"
                      "    B, L, HD = x.shape\n    return x.reshape(B, num_heads, L, HD // num_heads)",
    "00.merge_heads": "def merge_heads(x):\n    B, H, L, D = x.shape\n    return x.reshape(B, L, H * D)",
}
DAN = {  # Chinese
    "00.padding_mask": "def padding_mask(lengths, max_len):\n"
                       "    return ~(torch.arange(max_len) < lengths[:, None])[:, None, None, :]",
    "00.scores_einsum": 'import math\n\n\ndef scores_einsum(q, k):\n'
                        '    return torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])',
    "00.split_heads": "def split_heads(x, num_heads):\n"
                      "    B, L, HD = x.shape\n    return x.reshape(B, L, num_heads, HD // num_heads)",
    "00.merge_heads": "def merge_heads(x):\n    return x.sum(1)",
}
RIGHT_MERGE = "def merge_heads(x):\n    B, H, L, D = x.shape\n    return x.transpose(1, 2).reshape(B, L, H * D)"
RIGHT_EINSUM = 'def scores_einsum(q, k):\n    return torch.einsum("bqhd,bkhd->bhqk", q, k)'


def _submissions(root):
    """Write the folder of submissions; {student: what it holds}."""
    # alice: right answers, one of them through a helper in a cell of her own; her check cells deleted
    alice = solved(LESSON_00, "en")
    alice.cells = [c for c in alice.cells if not submission.checked(c.source)]
    insert(alice, "00.padding_mask", "def positions(n):\n    return torch.arange(n)")
    answer(alice, "00.padding_mask", "def padding_mask(lengths, max_len):\n"
                                      "    return (positions(max_len) < lengths[:, None])[:, None, None, :]")
    save(alice, root / "alice" / LESSON_00)

    # bob: right answers in Chinese; his check cells edited to check nothing
    bob = solved(LESSON_00, "zh")
    for cell in bob.cells:
        for exercise in submission.checked(cell.source):
            cell.source = f'check("{exercise}", lambda *args: None)'
    save(bob, root / "bob" / LESSON_00)

    # carol (English) and dan (Chinese, in a subfolder): known mistakes
    carol = render(LESSON_00, "en")
    for exercise, source in CAROL.items():
        answer(carol, exercise, source)
    save(carol, root / "carol" / LESSON_00)
    dan = render(LESSON_00, "zh")
    for exercise, source in DAN.items():
        answer(dan, exercise, source)
    save(dan, root / "dan" / "week1" / LESSON_00)

    # erin: a huge print, an endless loop, a forbidden permute, a renamed function, a deleted exercise cell
    erin = render(LESSON_00, "en")
    insert(erin, "00.padding_mask", 'print("x" * 20_000_000)')
    answer(erin, "00.padding_mask", "def padding_mask(lengths, max_len):\n    while True:\n        pass")
    answer(erin, "00.scores_einsum", 'def scores_einsum(q, k):\n'
                                      '    return torch.einsum("bhqd,bhkd->bhqk", q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3))')
    answer(erin, "00.split_heads", "def split(x, num_heads):\n    return x")
    erin.cells.remove(exercise_cell(erin, "00.merge_heads"))
    save(erin, root / "erin" / LESSON_00)

    # frank (Chinese): patches torch, the check engine and the grader's kernel side, then answers
    # right: the grader reads that code before anything runs and scores every exercise 0, for review
    frank = solved(LESSON_00, "zh")
    insert(frank, "00.padding_mask", """
        import course_utils.exercises.compare as compare
        import course_utils.exercises.grading as grading
        import course_utils.exercises.wire as wire

        torch.allclose = lambda *args, **kwargs: True
        torch.Tensor.allclose = lambda *args, **kwargs: True
        compare.difference = lambda *args, **kwargs: None
        grading.judge = lambda *args, **kwargs: grading.Verdict("?", "passed", "✅", None)
        wire.decode = lambda *args, **kwargs: None
    """)
    save(frank, root / "frank" / LESSON_00)

    # leo (Chinese): garbage, a right answer that prints 10 MB, its input handed back, a right answer (a kernel
    # that dies needs code the scan holds for review, numpy's as_strided for one: test_grade_sandbox kills one
    # with the scan switched off)
    leo = render(LESSON_00, "zh")
    answer(leo, "00.padding_mask", "def padding_mask(lengths, max_len):\n"
                                    "    return torch.zeros(len(lengths), 1, 1, max_len, dtype=torch.bool)")
    answer(leo, "00.scores_einsum", RIGHT_EINSUM.replace("    return", '    print("y" * 10_000_000)\n    return'))
    answer(leo, "00.split_heads", "def split_heads(x, num_heads):\n    return x")
    answer(leo, "00.merge_heads", RIGHT_MERGE)
    save(leo, root / "leo" / LESSON_00)

    # grace: a syntax error, a memory blow-up, a deleted function, an endless cell that ignores the
    # interrupt (so the grader kills the kernel, starts another and runs the cells before it again),
    # and a right answer
    grace = render(LESSON_00, "en")
    answer(grace, "00.padding_mask", "def padding_mask(lengths, max_len)\n    return lengths")
    answer(grace, "00.scores_einsum", "def scores_einsum(q, k):\n    return torch.empty(2**40)")
    answer(grace, "00.split_heads", "# I will come back to this one")
    insert(grace, "00.merge_heads", "while True:  # and deaf to the interrupt\n    try:\n        while True:\n"
                                    "            pass\n    except KeyboardInterrupt:\n        pass")
    answer(grace, "00.merge_heads", RIGHT_MERGE)
    save(grace, root / "grace" / LESSON_00)

    # ivan: right answers, but before the last exercise a cell replaces the grader's side in the
    # kernel with one that writes a forged answer
    ivan = solved(LESSON_00, "en")
    insert(ivan, "00.merge_heads", """
        import course_utils.exercises.kernel as kernel_side

        def forged(namespace, name, calls_path, answer_path):
            with open(answer_path, "wb") as file:
                file.write(b"all passed")

        kernel_side.collect = forged
    """)
    save(ivan, root / "ivan" / LESSON_00)

    # heidi: lesson 01, calls the package's own reference where the exercise forbids it
    heidi = render(LESSON_01, "en")
    answer(heidi, "01.scaled_dot", "import course_utils.attention\n\n\ndef my_attention(query, key, value):\n"
                                    "    return course_utils.attention.scaled_dot_product_attention(query, key, value)")
    save(heidi, root / "heidi" / LESSON_01)

    # judy: not a notebook; kate: a notebook of no lesson, directly in the folder
    (root / "judy").mkdir()
    (root / "judy" / LESSON_00).write_text("{ this is not JSON", encoding="utf-8")
    save(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("my notes")]), root / "kate.ipynb")


EXPECTED = """\
student,lesson,exercise,status,mistake,points,max_points,submission,review
alice,00,00.padding_mask,passed,,1,1,alice/00_tensor_shapes.ipynb,
alice,00,00.scores_einsum,passed,,1,1,alice/00_tensor_shapes.ipynb,
alice,00,00.split_heads,passed,,1,1,alice/00_tensor_shapes.ipynb,
alice,00,00.merge_heads,passed,,1,1,alice/00_tensor_shapes.ipynb,
bob,00,00.padding_mask,passed,,1,1,bob/00_tensor_shapes.ipynb,
bob,00,00.scores_einsum,passed,,1,1,bob/00_tensor_shapes.ipynb,
bob,00,00.split_heads,passed,,1,1,bob/00_tensor_shapes.ipynb,
bob,00,00.merge_heads,passed,,1,1,bob/00_tensor_shapes.ipynb,
carol,00,00.padding_mask,failed,NO_UNSQUEEZE,0,1,carol/00_tensor_shapes.ipynb,
carol,00,00.scores_einsum,failed,OUTPUT_TRANSPOSED,0,1,carol/00_tensor_shapes.ipynb,
carol,00,00.split_heads,failed,VIEW_NO_PERMUTE,0,1,carol/00_tensor_shapes.ipynb,
carol,00,00.merge_heads,failed,RESHAPE_NO_PERMUTE,0,1,carol/00_tensor_shapes.ipynb,
dan,00,00.padding_mask,failed,MASK_INVERTED,0,1,dan/week1/00_tensor_shapes.ipynb,
dan,00,00.scores_einsum,failed,SCALED,0,1,dan/week1/00_tensor_shapes.ipynb,
dan,00,00.split_heads,failed,NO_TRANSPOSE,0,1,dan/week1/00_tensor_shapes.ipynb,
dan,00,00.merge_heads,failed,HEADS_SUMMED,0,1,dan/week1/00_tensor_shapes.ipynb,
erin,00,00.padding_mask,crashed,TIME_LIMIT,0,1,erin/00_tensor_shapes.ipynb,
erin,00,00.scores_einsum,failed,FORBIDDEN,0,1,erin/00_tensor_shapes.ipynb,
erin,00,00.split_heads,failed,RENAMED,0,1,erin/00_tensor_shapes.ipynb,
erin,00,00.merge_heads,failed,MISSING_CELL,0,1,erin/00_tensor_shapes.ipynb,
frank,00,00.padding_mask,failed,REVIEW,0,1,frank/00_tensor_shapes.ipynb,{frank_review}
frank,00,00.scores_einsum,failed,REVIEW,0,1,frank/00_tensor_shapes.ipynb,{frank_review}
frank,00,00.split_heads,failed,REVIEW,0,1,frank/00_tensor_shapes.ipynb,{frank_review}
frank,00,00.merge_heads,failed,REVIEW,0,1,frank/00_tensor_shapes.ipynb,{frank_review}
grace,00,00.padding_mask,crashed,SYNTAX_ERROR,0,1,grace/00_tensor_shapes.ipynb,
grace,00,00.scores_einsum,crashed,RuntimeError,0,1,grace/00_tensor_shapes.ipynb,
grace,00,00.split_heads,failed,DELETED,0,1,grace/00_tensor_shapes.ipynb,
grace,00,00.merge_heads,passed,,1,1,grace/00_tensor_shapes.ipynb,
heidi,01,01.additive_scores,not attempted,,0,1,heidi/01_attention_basics.ipynb,
heidi,01,01.softmax,failed,FORBIDDEN,0,1,heidi/01_attention_basics.ipynb,
heidi,01,01.scaled_dot,failed,FORBIDDEN,0,1,heidi/01_attention_basics.ipynb,
ivan,00,00.padding_mask,failed,REVIEW,0,1,ivan/00_tensor_shapes.ipynb,{ivan_review}
ivan,00,00.scores_einsum,failed,REVIEW,0,1,ivan/00_tensor_shapes.ipynb,{ivan_review}
ivan,00,00.split_heads,failed,REVIEW,0,1,ivan/00_tensor_shapes.ipynb,{ivan_review}
ivan,00,00.merge_heads,failed,REVIEW,0,1,ivan/00_tensor_shapes.ipynb,{ivan_review}
judy,00,00.padding_mask,crashed,NOT_JSON,0,1,judy/00_tensor_shapes.ipynb,
judy,00,00.scores_einsum,crashed,NOT_JSON,0,1,judy/00_tensor_shapes.ipynb,
judy,00,00.split_heads,crashed,NOT_JSON,0,1,judy/00_tensor_shapes.ipynb,
judy,00,00.merge_heads,crashed,NOT_JSON,0,1,judy/00_tensor_shapes.ipynb,
kate,,,crashed,UNKNOWN_LESSON,0,0,kate.ipynb,
leo,00,00.padding_mask,failed,,0,1,leo/00_tensor_shapes.ipynb,
leo,00,00.scores_einsum,passed,,1,1,leo/00_tensor_shapes.ipynb,
leo,00,00.split_heads,failed,,0,1,leo/00_tensor_shapes.ipynb,
leo,00,00.merge_heads,passed,,1,1,leo/00_tensor_shapes.ipynb,
"""


def _cell_before(exercise, lang="en"):
    """The number (from 1) a cell inserted just before `exercise`'s cell of lesson 00 gets."""
    notebook = render(LESSON_00, lang)
    return notebook.cells.index(exercise_cell(notebook, exercise)) + 1


FRANK_CELL, GRACE_CELL = _cell_before("00.padding_mask", "zh"), _cell_before("00.merge_heads")
IVAN_CELL = _cell_before("00.merge_heads")
FRANK_REVIEW = f"import course_utils.exercises.compare as compare (cell {FRANK_CELL}); torch.allclose (cell {FRANK_CELL})"
IVAN_REVIEW = (f"\"import course_utils.exercises.kernel as kernel_side (cell {IVAN_CELL}); kernel_side.collect "
               f"(cell {IVAN_CELL}); open(answer_path, 'wb') (cell {IVAN_CELL})\"")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """(submissions folder, output folder, exit code, stdout) of one grading run over every submission."""
    root = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("grades")
    _submissions(root)
    output = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", output)
        code = grader.main([str(root), "--out", str(out), "--min-score", "50%", *OPTIONS])
    return root, out, code, output.getvalue()


def _read(path):
    return Path(path).read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- the gradebook

def test_the_gradebook_is_the_expected_one(graded):
    _, out, code, printed = graded
    assert _read(out / "grades.csv") == EXPECTED.format(frank_review=FRANK_REVIEW, ivan_review=IVAN_REVIEW)
    assert code == 1, "carol, dan, erin, ... are below 50 %: the exit code says so"
    assert "graded 12 submission(s)" in printed


def test_each_result_json_is_in_classroom_50s_format(graded):
    _, out, _, _ = graded
    rows = list(csv.DictReader(io.StringIO(_read(out / "grades.csv"))))
    keys = sorted({r["submission"].removesuffix(".ipynb") for r in rows})
    for key in keys:
        result = json.loads(_read(out / key / "result.json"))
        assert set(result) == {"schema", "score", "max-score", "tests"} and result["schema"] == "classroom50/result/v1"
        ours = [r for r in rows if r["submission"].removesuffix(".ipynb") == key]
        assert [t["test-name"] for t in result["tests"]] == [r["exercise"] or key for r in ours]
        for test, row in zip(result["tests"], ours):
            assert {"test-name", "passed", "score", "max-score"} <= set(test)
            assert test["passed"] is (row["status"] == "passed") and test["score"] == int(row["points"])
            assert type(test["score"]) is int and type(test["max-score"]) is int and test["message"]
        assert result["score"] == sum(t["score"] for t in result["tests"])
        assert result["max-score"] == sum(t["max-score"] for t in result["tests"])


def _evaluated(exercise, source, lang, answers):
    """The verdict a check prints in the notebook for the function `source` defines (its name from `answers`)."""
    namespace = {"torch": torch}
    exec(source, namespace)  # noqa: S102 (the answers written above)
    i18n.set_language(lang)
    try:
        name = next(e.function for e in answers.plan(exercise[:2], lang)[0] if e.id == exercise)
        return evaluate(exercise, namespace[name]).message
    finally:
        i18n.set_language("en")


@pytest.mark.parametrize("student, answers, lang, key", [
    ("carol", CAROL, "en", "carol/00_tensor_shapes"), ("dan", DAN, "zh", "dan/week1/00_tensor_shapes"),
])
def test_feedback_is_what_the_notebooks_check_says_in_its_language(graded, student, answers, lang, key,
                                                                   tmp_path_factory):
    _, out, _, _ = graded
    feedback = _read(out / key / "feedback.md")
    for exercise, source in answers.items():
        assert _evaluated(exercise, source, lang, answer_keys.key(tmp_path_factory, "00")) in feedback
    assert ("反馈" in feedback and "错误代号" in feedback) if lang == "zh" else ("Diagnosis" in feedback)


def test_code_that_patches_torch_or_the_grading_machinery_scores_0_for_review(graded):
    """frank's cell replaces torch.allclose, compare.difference, grading.judge and wire.decode; ivan's
    replaces the grader's side in the kernel with one that forges an answer. The grader reads that
    code in its own process before anything runs: every exercise 0, for the teacher's review, saying
    which cell and what. (Had it run: the answers come back as data and are judged here, see the
    wire tests below.)"""
    _, out, _, _ = graded
    frank = _read(out / "frank/00_tensor_shapes/feedback.md")
    assert "留待教师复核" in frank and f"第 {FRANK_CELL} 个单元格" in frank and "`torch.allclose`" in frank, frank
    ivan = json.loads(_read(out / "ivan/00_tensor_shapes/result.json"))["tests"]
    assert all(t["mistake"] == "REVIEW" and "for the teacher's review" in t["message"] for t in ivan)


def test_printing_in_a_kernel_is_counted_not_shown(graded):
    _, out, _, _ = graded
    leo = _read(out / "leo/00_tensor_shapes/feedback.md")
    # 10 MB and a newline on each of 12 cases (6 public, 6 hidden), counted, not shown
    assert "打印了 120000012 个字符" in leo


def test_hostile_cells_are_recorded_and_skipped(graded):
    _, out, _, _ = graded
    erin = _read(out / "erin/00_tensor_shapes/feedback.md")
    assert "ran for more than 2 s on test case 1" in erin and "uses `Tensor.permute`, which this exercise forbids" in erin
    assert "defines `split`, but no longer `split_heads`" in erin and "no exercise cell for it any more" in erin
    grace = _read(out / "grace/00_tensor_shapes/feedback.md")
    assert "not valid Python (line 1" in grace and "can't allocate memory" in grace
    assert f"Cell {GRACE_CELL} (`while True:  # and deaf to the interrupt`) ran for more than 8 s and was stopped; " \
        "the grader skipped it" in grace
    heidi = _read(out / "heidi/01_attention_basics/feedback.md")
    assert "`course_utils.attention.scaled_dot_product_attention`" in heidi


def test_a_rerun_writes_identical_files_and_removes_stale_ones(graded, tmp_path):
    """Grading alice and judy again, alone, into a copy of the output: their files are byte for
    byte the same, and the other students' files (no longer submitted) are gone."""
    root, out, _, _ = graded
    again = tmp_path / "again"
    for student in ("alice", "judy"):
        shutil.copytree(root / student, again / student)
    copy_out = tmp_path / "grades"
    shutil.copytree(out, copy_out)
    assert grader.main([str(again), "--out", str(copy_out), *OPTIONS]) == 0
    for key in ("alice/00_tensor_shapes", "judy/00_tensor_shapes"):
        for name in ("result.json", "feedback.md"):
            assert _read(copy_out / key / name) == _read(out / key / name)
    assert sorted(p.relative_to(copy_out).as_posix() for p in copy_out.rglob("*") if p.is_file()) == [
        ".gradebook.json", "alice/00_tensor_shapes/feedback.md", "alice/00_tensor_shapes/result.json", "grades.csv",
        "judy/00_tensor_shapes/feedback.md", "judy/00_tensor_shapes/result.json"]
    expected = [line for line in EXPECTED.splitlines() if line.startswith(("student,", "alice,", "judy,"))]
    assert _read(copy_out / "grades.csv").splitlines() == expected


# ----------------------------------------------------------------------------- the pieces, in this process



# every mistake of lesson 00, and two of every other exercise: each kind of result crosses the wire
MISTAKES = [(e, m) for e in sorted(EXERCISES) for m in EXERCISES[e].mistakes[: None if e < "01" else 2]]


@pytest.mark.parametrize("exercise, mistake", MISTAKES, ids=[f"{e}-{m.code}" for e, m in MISTAKES])
def test_through_the_wire_a_mistake_gets_the_notebooks_verdict(exercise, mistake):
    assert wired(exercise, mistake.fn) == evaluate(exercise, mistake.fn)


def _stub(*args):
    raise NotImplementedError


def _no_graph(scores):
    return torch.softmax(scores, dim=-1).detach()


def _custom_backward(scores):
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.softmax(x, dim=-1)

        @staticmethod
        def backward(ctx, grad):
            return 2 * grad

    return Twice.apply(scores)


def _subclass(scores):
    class Liar(torch.Tensor):
        pass

    return torch.softmax(scores, dim=-1).as_subclass(Liar)


@pytest.mark.parametrize("exercise, function", [
    ("01.softmax", lambda s: (s - s.amax(-1, keepdim=True)).exp() / (s - s.amax(-1, keepdim=True)).exp().sum(-1, True)),
    ("01.softmax", _stub), ("01.softmax", _no_graph), ("01.softmax", _custom_backward), ("01.softmax", _subclass),
    ("01.softmax", lambda s: s.tolist()), ("01.softmax", lambda s: torch.softmax(s, -1)),
    ("01.softmax", lambda s: 1 / 0), ("01.softmax", lambda s: torch.zeros(10**7)),
    ("02.causal_mask", lambda L_q, L_k: torch.ones(L_q, L_k).tril()), ("02.causal_mask", lambda L_q, L_k: None),
    ("01.scaled_dot", lambda q, k, v: (q, k, v, [q] * 300)),
], ids=["right", "stub", "no-graph", "custom-backward", "subclass", "list", "forbidden", "error", "big", "float-mask",
        "none", "long-tuple"])
def test_through_the_wire_every_kind_of_verdict_is_the_notebooks(exercise, function):
    assert wired(exercise, function) == evaluate(exercise, function)


def test_a_forged_or_broken_answer_is_refused_not_believed(tmp_path):
    reference = prepare(EXERCISES["01.softmax"])
    good = wire.encode(grading.collect(reference.calls, lambda s: torch.zeros_like(s), eager=True))
    for broken in ({}, {**good, "format": "v0"}, {**good, "results": []}, {**good, "printed": -1},
                   {**good, "results": [{"value": {"tensor": "no"}}] * len(good["results"])}):
        with pytest.raises(wire.WireError):
            wire.decode(broken, reference, 1.0)
    # claiming every result is on the graph, with made-up gradients, does not make zeros right
    forged = copy.deepcopy(good)
    for result in forged["results"]:
        result["value"]["on_graph"] = True
    assert grading.judge(reference, wire.decode(forged, reference, 1.0)).status == "failed"
    # a file with pickled code is refused, and its code never runs
    (tmp_path / "evil.pt").write_bytes(b"cos\nsystem\n(S'touch " + str(tmp_path / "ran").encode() + b"'\ntR.")
    with pytest.raises(wire.WireError):
        wire.load(tmp_path / "evil.pt")
    assert not (tmp_path / "ran").exists()
    with pytest.raises(wire.WireError):
        wire.load(tmp_path / "missing.pt")


def test_the_answer_key_written_holds_the_submitted_lessons_only(tmp_path):
    """main writes the key of the lessons its submissions are of (every lesson's references cost a minute
    of CPU), read as grade_one reads them: from the file name, else the cells; none for a notebook of no
    lesson, nor for one it cannot read (test_gradebook: a run of such notebooks writes no key at all)."""
    save(render(LESSON_01, "zh"), tmp_path / "bo" / "week1" / "notes.ipynb")  # lesson 01 by its cells
    (tmp_path / "cy").mkdir()
    (tmp_path / "cy" / "notes.ipynb").write_text("{ not JSON", encoding="utf-8")
    assert grader.submitted_lessons(submission.find(tmp_path)) == ["01"]
    save(render(LESSON_01, "en"), tmp_path / "al" / LESSON_00)  # lesson 00 by its name (a mismatch)
    assert grader.submitted_lessons(submission.find(tmp_path)) == ["00", "01"]
    assert grader.submitted_lessons(submission.find(tmp_path / "cy")) == []


def test_student_ids_come_from_the_first_folder_or_the_file_name(tmp_path):
    for path in ("a/00_x.ipynb", "a/week1/01_y.ipynb", "b.ipynb", ".ipynb_checkpoints/c.ipynb",
                 "a/.ipynb_checkpoints/00_x-checkpoint.ipynb", "grades/d/00_x.ipynb"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("{}")
    found = [(key, student) for _, key, student in submission.find(tmp_path, skip=tmp_path / "grades")]
    assert found == [("a/00_x", "a"), ("a/week1/01_y", "a"), ("b", "b")]
    assert [s for _, _, s in submission.find(tmp_path / "b.ipynb")] == ["b"]
    assert [s for _, _, s in submission.find(tmp_path, student="zed")] == ["zed"] * 4


def test_the_language_comes_from_setup_then_the_cells_tags_then_the_folder(tmp_path):
    english = render(LESSON_00, "en")
    assert submission.read(ROOT / "notebooks/zh" / "00_张量形状入门.ipynb", "k", "s").lang == "zh"
    assert submission.read(ROOT / "notebooks/en" / LESSON_00, "k", "s").lang == "en"
    for cell in english.cells:
        cell.source = cell.source.replace('setup(lang="en")', "setup()")
        cell.metadata.get("tags", []).clear() if cell.cell_type == "markdown" else None
    save(english, tmp_path / "zh" / "x.ipynb")
    assert submission.read(tmp_path / "zh" / "x.ipynb", "k", "s").lang == "zh"


def test_every_grade_message_has_both_languages_and_formats():
    from course_teacher.grade.messages import MESSAGES  # the grader's own table

    ours = {k: v for k, v in MESSAGES.items() if k.startswith("grade.")}
    assert len(ours) > 20 and all(set(v) == {"en", "zh"} and all(v.values()) for v in ours.values())
    for key in {key for key, _ in grader.VERDICTS.values()}:
        assert key in ours


def test_the_cells_run_are_every_cell_or_the_learners_own_but_never_a_check_cell(tmp_path_factory):
    found = submission.read(ROOT / "notebooks/en" / LESSON_00, "k", "s")
    exercises, course_cells = answer_keys.key(tmp_path_factory, "00").plan("00", "en")
    exercise_cells = {submission.exercise_cell(found, e)[0].index for e in exercises}
    every = grader.cells_to_run(found.cells, exercise_cells, "all", course_cells)
    own = grader.cells_to_run(found.cells, exercise_cells, "own", course_cells)
    checks = [c for c in found.cells if submission.checked(c.source)]
    assert len(checks) == 4 and not set(map(id, checks)) & set(map(id, every))
    assert len(every) == len(found.cells) - 4
    assert [c.index for c in own] == [found.cells[0].index, *sorted(exercise_cells)]  # the setup cell, the exercises
    found.cells[5].source += "\nprint('mine')"  # a cell the learner changed runs too
    assert found.cells[5] in grader.cells_to_run(found.cells, exercise_cells, "own", course_cells)
