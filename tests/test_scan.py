"""The grader's reading of the learner's code (course_teacher.grade.scan): which exercises score 0
for a forbidden reference, and which notebooks score 0 for code it cannot read.

The notebooks are the committed student renders (and their solution cells), changed here in
memory: a learner's answer in an exercise cell, or new cells of their own just before it. Nothing
runs: the scan reads text.
"""

import ast
import importlib
import inspect
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from course_teacher import links
from course_teacher.exercises import EXERCISES, TRANSPOSES
from course_teacher.grade import key, scan, submission
from course_utils import file_names

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted(path.name for path in (ROOT / "notebooks" / "en").glob("[0-9][0-9]_*.ipynb"))  # not the home, index.ipynb
L00, L01, L02, L06 = "00_tensor_shapes.ipynb", "01_attention_basics.ipynb", "02_masking.ipynb", "06_transformer.ipynb"
CAUSAL = ("course_utils.masks.causal_mask",)  # what 02.causal_mask could forbid (it does not, yet)


def _render(name, lang="en", solutions=False):
    """A committed render of the lesson `name` names (its English name) in `lang`, under that language's name."""
    folder = ROOT / "notebooks" / ("solutions" if solutions else "") / lang
    return nbformat.read(str(folder / file_names.lesson_notebook(Path(name).stem, lang)), as_version=4)


def _code_cells(notebook):
    return [submission.Cell(i, c.source, c.metadata.get("exercise")) for i, c in enumerate(notebook.cells)
            if c.cell_type == "code"]


class Lesson:
    """A lesson's student render, as the learner may have changed it."""

    def __init__(self, name, lang="en", solved=False):
        notebook = _render(name, lang)
        self.course = {c.source.strip() for c in notebook.cells if c.cell_type == "code"}
        self.cells = _code_cells(notebook)
        self.functions = {e: self._checked(e) for e in (c.exercise for c in self.cells) if e}
        if solved:
            solutions = {c.exercise: c.source for c in _code_cells(_render(name, lang, solutions=True)) if c.exercise}
            self.cells = [submission.Cell(c.index, solutions.get(c.exercise, c.source), c.exercise) for c in self.cells]

    def _checked(self, exercise):
        """The function the course's check cell of `exercise` checks."""
        for cell in self.cells:
            tree = submission.parse(cell.source)
            for node in ast.walk(tree) if isinstance(tree, ast.AST) else ():
                if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check"
                        and ast.literal_eval(node.args[0]) == exercise):
                    return node.args[1].id
        raise LookupError(exercise)

    def cell(self, exercise):
        return next(c for c in self.cells if c.exercise == exercise)

    def answer(self, exercise, source):
        """The exercise cell holds `source`."""
        index = self.cell(exercise).index
        self.cells = [submission.Cell(c.index, textwrap.dedent(source).strip(), c.exercise) if c.index == index else c
                      for c in self.cells]
        return self

    def before(self, exercise, *sources):
        """New cells of the learner's, just before the exercise's cell (numbered as if inserted:
        every later cell moves down)."""
        at = self.cell(exercise).index
        moved = [submission.Cell(c.index + len(sources) if c.index >= at else c.index, c.source, c.exercise)
                 for c in self.cells]
        new = [submission.Cell(at + i, textwrap.dedent(s).strip()) for i, s in enumerate(sources)]
        self.cells = sorted(moved + new, key=lambda c: c.index)
        return self

    def edit(self, first_line, source):
        """The course cell that starts with `first_line` holds `source` instead."""
        target = next(c for c in self.cells if c.source.startswith(first_line))
        self.cells = [submission.Cell(c.index, textwrap.dedent(source).strip() if c is target else c.source, c.exercise)
                      for c in self.cells]
        return self

    def number(self, exercise):
        return self.cell(exercise).index + 1

    def scan(self, forbidden=None, functions=True):
        """scan.scan with every exercise of the lesson: `forbidden` ({id: names}) replaces the
        registry's lists of the exercises it names; `functions`: give each exercise its function's
        name (as the course's check cell names it), as the grader does."""
        forbidden = forbidden or {}
        exercises = [scan.Target(c.exercise, c.index, forbidden.get(c.exercise, EXERCISES[c.exercise].forbidden),
                                 self.functions[c.exercise] if functions else None)
                     for c in self.cells if c.exercise in EXERCISES]
        return scan.scan(self.cells, self.course, exercises)


def _names(findings, exercise):
    return [(hit.cell, hit.name) for hit in findings.forbidden.get(exercise, ())]


def constructs_of(findings):
    return [(hit.cell, hit.name) for hit in findings.review]


# ----------------------------------------------------------------------------- no false positive

#: Course functions a lesson's exercise texts hand the learner as parts to build with, which no teacher
#: would forbid there: lesson 10 assembles a GPT from the learner's earlier work (lesson 01's attention,
#: lesson 07's cache) and the window rule its text names.
HANDED_OUT = {"10_gpt.ipynb": ("course_utils.attention.scaled_dot_product_attention", "course_utils.decoding.KVCache",
                               "course_utils.gpt.window_start")}


def _lesson_helpers(name):
    """Every function and class of the course modules a lesson's first cell imports from."""
    first = next(c.source for c in _code_cells(_render(name)))
    found = set()
    for node in ast.walk(ast.parse(first)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("course_utils"):
            for module_name in [node.module] + [f"{node.module}.{a.name}" for a in node.names]:
                try:
                    module = importlib.import_module(module_name)
                except ImportError:  # a function's name, not a module's
                    continue
                found |= {f"{module_name}.{n}" for n, obj in vars(module).items()
                          if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                          and obj.__module__ == module_name}
    return tuple(sorted(found))


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", LESSONS)
def test_the_course_notebook_and_its_solutions_have_no_finding(name, lang):
    assert not Lesson(name, lang).scan(), "the course's own notebook"
    solved = Lesson(name, lang, solved=True)
    assert not solved.scan(), "the course's solutions, with the registry's forbidden names"
    assert not solved.scan(functions=False), "and without the functions' names (every name a cell binds)"
    # and had every exercise forbidden every course function its lesson imports (but those its texts hand out)
    helpers = tuple(h for h in _lesson_helpers(name) if h not in HANDED_OUT.get(name, ()))
    stricter = {c.exercise: helpers + tuple(EXERCISES[c.exercise].forbidden) for c in solved.cells if c.exercise}
    assert not solved.scan(stricter)


def test_a_forbidden_call_in_an_unchanged_course_cell_is_no_finding():
    lesson = Lesson(L02)
    assert any("causal_mask(" in c.source for c in lesson.cells if not c.exercise)  # the course calls it
    assert not lesson.scan({"02.causal_mask": CAUSAL})
    assert not Lesson(L01).scan()  # its cells call both functions 01.scaled_dot forbids


def test_in_a_changed_course_cell_only_the_learners_lines_are_the_learners():
    original = next(c.source for c in Lesson(L02).cells if c.source.startswith("print(causal_mask(4))"))
    kept = Lesson(L02).edit("print(causal_mask(4))", original + "\nprint('my own line')")
    assert not kept.scan({"02.causal_mask": CAUSAL})
    changed = Lesson(L02).edit("print(causal_mask(4))",
                               original.replace("keep_mask=causal_mask(L)", "keep_mask=causal_mask(5)", 1))
    assert [name for _, name in _names(changed.scan({"02.causal_mask": CAUSAL}), "02.causal_mask")] == list(CAUSAL)
    # the demonstration's print with other numbers is a look (see test_a_look_is_no_finding)
    looked = Lesson(L02).edit("print(causal_mask(4))", original.replace("causal_mask(4)", "causal_mask(5)", 1))
    assert not looked.scan({"02.causal_mask": CAUSAL})


# ----------------------------------------------------------------------------- forbidden references

REACHING = {  # cells of the learner's, before the exercise cell (the lesson imports masks and causal_mask)
    "a call": ["y = masks.causal_mask(3, 3)"],
    "no call": ["x = masks.causal_mask"],
    "import as": ["from course_utils.masks import causal_mask as cm"],
    "module alias": ["from course_utils import masks as m\nx = m.causal_mask"],
    "dotted import": ["import course_utils.masks\ny = course_utils.masks.causal_mask(3, 3)"],
    "dotted import as": ["import course_utils.masks as cm\ny = cm.causal_mask(3, 3)"],
    "re-binding": ["m = masks\nm2 = m\nf = m2.causal_mask"],
    "getattr with a constant": ["f = getattr(masks, 'causal_mask')"],
    "the parent package": ["import course_utils\ny = course_utils.masks.causal_mask(2, 2)"],
    "a star import of the package": ["from course_utils import *\ny = masks.causal_mask(2, 2)"],
    "a star import of the module": ["from course_utils.masks import *"],
    "an item of a list": ["ms = [masks]\ny = ms[0].causal_mask(2, 2)"],
    "a function's result": ["def get():\n    return masks\n\n\nget().causal_mask(2, 2)"],
    "a loop": ["for m in (masks,):\n    f = m.causal_mask"],
    "a conditional": ["m = masks if True else None\nf = m.causal_mask"],
    "a global set in a function": ["def keep():\n    global f\n    f = masks.causal_mask"],
    "a default argument": ["def mine(L_q, L_k, f=masks.causal_mask):\n    return f(L_q, L_k)"],
    "a %timeit": ["%timeit -n 3 masks.causal_mask(2, 2)"],
    "a %%time cell": ["%%time\nz = masks.causal_mask(2, 2)\n"],
    "a bare call a %time runs": ["%time masks.causal_mask(2, 2)"],  # a magic's code is never a look
}


@pytest.mark.parametrize("way", REACHING)
def test_every_way_of_reaching_a_forbidden_function_is_found(way):
    lesson = Lesson(L02).before("02.causal_mask", *REACHING[way])
    findings = lesson.scan({"02.causal_mask": CAUSAL})
    hits = findings.forbidden["02.causal_mask"]
    assert hits and {hit.name for hit in hits} == set(CAUSAL)
    new = range(lesson.number("02.causal_mask") - len(REACHING[way]), lesson.number("02.causal_mask"))
    assert {hit.cell for hit in hits} <= set(new), "found in the learner's cells, named by number"
    assert all(hit.line == next(c for c in lesson.cells if c.index + 1 == hit.cell).where[1] for hit in hits)
    assert not findings.review
    assert findings.verdict("02.causal_mask") == scan.Verdict(scan.FORBIDDEN, hits)
    assert findings.verdict("02.decoder_mask") is None


LOOKS = [  # a learner's cell re-running a demonstration of lesson 02 with other numbers: no finding
    "masks.causal_mask(4, 6)",
    "causal_mask(3, 7)",
    "fig, axes = plt.subplots(1, 2)\nmask_picture(causal_mask(3, 7), ax=axes[0], title='causal_mask(3, 7)')",
    "print(causal_mask(3, 7))",
    "print(masks.causal_mask(3, L, align='bottom_right'))",
    "print(causal_mask(3, L)[-2:], causal_mask(L).sum())",
    "print(causal_mask(3, 7).int() * 2 + 1)",
    "print(~causal_mask(4, 6) & causal_mask(4, 6).T)",
    "plt.imshow(masks.causal_mask(3, 7))",
    "heatmap(causal_mask(3, 7).float(), ax=axes[1], vmax=1.0, colorbar=False)",
    "torch.equal(causal_mask(3, L), causal_mask(L)[:3])",
    "display(causal_mask(2, 3))",
    "print(f'{causal_mask(2, 3)}', len(causal_mask(2, 3)), repr(causal_mask(1, 1)))",
    "for _ in range(3):\n    pass\ncausal_mask(3, 3)",  # a Store of `_` is no read of IPython's history
]


@pytest.mark.parametrize("source", LOOKS, ids=[s.split("\n")[-1][:40] for s in LOOKS])
def test_a_look_is_no_finding(source):
    """A top-level expression calling a forbidden function with constant arguments, its result only
    shown: a look. It cannot loop, so it cannot cover the hidden cases."""
    for where in ("before", "answer"):
        lesson = Lesson(L02)
        if where == "before":
            lesson.before("02.causal_mask", source)
        else:
            lesson.answer("02.causal_mask", "def my_causal_mask(L_q, L_k):\n    return None\n\n\n" + source)
        findings = lesson.scan({"02.causal_mask": CAUSAL})
        assert not findings, (where, findings)


NOT_LOOKS = [  # the same call where its result may be kept, or the call may loop: a finding
    "x = masks.causal_mask(4, 6)",
    "x += masks.causal_mask(4, 6)",
    "print(y := masks.causal_mask(4, 6))",
    "print(masks.causal_mask((n := 4), 6))",
    "[masks.causal_mask(n, n) for n in range(1, 13)]",
    "print(*(causal_mask(n, 6) for n in range(1, 13)))",
    "for n in range(1, 13):\n    causal_mask(n, 6)",
    "if True:\n    causal_mask(4, 6)",
    "with torch.no_grad():\n    causal_mask(4, 6)",
    "def keep(mask):\n    return mask\n\n\nkeep(causal_mask(4, 6))",
    "def keep(mask):\n    return mask\n\n\nprint(keep(causal_mask(4, 6) + 0))",
    "table = []\ntable.append(causal_mask(4, 6))",
    "d = {}\nd.update(m=causal_mask(4, 6))",
    "d = {}\nd.__setitem__((4, 6), causal_mask(4, 6))",
    "def size():\n    return 4\n\n\ncausal_mask(size(), 6)",
    "causal_mask(len('four'), 6)",  # a call as argument
    "causal_mask(*(4, 6))",
    "causal_mask(**{'L_q': 4, 'L_k': 6})",
    "causal_mask((lambda: 4)(), 6)",
    "list(map(masks.causal_mask, range(1, 13), range(1, 13)))",
    "print(masks.causal_mask(4, 6), masks.causal_mask)",
    "print(getattr(masks, 'causal_mask')(4, 6))",
    "import io\nbuffer = io.StringIO()\nprint(causal_mask(4, 6), file=buffer)",
    "kept = torch.zeros(4, 6, dtype=torch.bool)\ntorch.logical_or(causal_mask(4, 6), kept, out=kept)",
    "kept = torch.zeros(4, 6, dtype=torch.bool)\nkept.copy_(causal_mask(4, 6))",
    "torch.save(causal_mask(4, 6), 'masks.pt')",
    "torch.nn.init.zeros_(causal_mask(4, 6))",
    "def show(x):\n    return x\n\n\ntorch.where(causal_mask(4, 6), 1, 0).apply_(show)",
    "layer = nn.Linear(2, 2)\nnn.Module.register_buffer(layer, 'm', causal_mask(4, 6))",
    "axes[0].imshow(causal_mask(4, 6))",  # a method of an object the scan cannot name
    "class Table(list):\n    pass\n\n\nprint(causal_mask(4, 6), Table)",
    "causal_mask(4, 6) if True else None",
    "causal_mask(4, 6)(1)",
    "x = torch.ones(6)\nx[causal_mask(4, 6)[0]]",
]


@pytest.mark.parametrize("source", NOT_LOOKS, ids=[s.split("\n")[-1][:40] for s in NOT_LOOKS])
def test_a_forbidden_call_whose_result_may_be_kept_is_found(source):
    lesson = Lesson(L02).before("02.causal_mask", source)
    findings = lesson.scan({"02.causal_mask": CAUSAL})
    assert _names(findings, "02.causal_mask") == [(lesson.number("02.causal_mask") - 1, CAUSAL[0])], findings


def test_a_look_with_another_forbidden_reference_counts_whole():
    """A look is judged per exercise: every reference to the exercise's forbidden names in it must be a
    looked-at call; a tensor operation forbidden elsewhere does not make it count."""
    lesson = Lesson(L02).before("02.causal_mask", "print(causal_mask(4, 6), masks.causal_mask)")
    assert [h.code for h in lesson.scan({"02.causal_mask": CAUSAL}).forbidden["02.causal_mask"]] == [
        "causal_mask(4, 6)"]  # one hit per cell and name: the first
    # in lesson 00, a look at a transpose in the exercise's own cell (a test line) is no finding; its
    # property (no call) still is
    good = 'def scores_einsum(q, k):\n    return torch.einsum("bqhd,bkhd->bhqk", q, k)\n\n\nx = torch.randn(2, 3)\n'
    assert not Lesson(L00).answer("00.scores_einsum", good + "print(x.transpose(0, 1))").scan()
    lesson = Lesson(L00).answer("00.scores_einsum", good + "print(x.mT)")
    assert [n for _, n in _names(lesson.scan(), "00.scores_einsum")] == ["Tensor.mT"]


def test_an_import_in_one_cell_and_a_call_in_another_is_found():
    lesson = Lesson(L02).before("02.causal_mask", "import course_utils.masks as cm").answer("02.causal_mask", """
        def my_causal_mask(L_q, L_k):
            return cm.causal_mask(L_q, L_k)
    """)
    hits = lesson.scan({"02.causal_mask": CAUSAL}).forbidden["02.causal_mask"]
    assert [(h.cell, h.code) for h in hits] == [(lesson.number("02.causal_mask"), "cm.causal_mask(L_q, L_k)")]


def test_a_name_the_course_imported_is_the_course_function_until_the_learner_redefines_it():
    answer = "def my_causal_mask(L_q, L_k):\n    return causal_mask(L_q, L_k)"
    used = Lesson(L02).answer("02.causal_mask", answer)
    found = _names(used.scan({"02.causal_mask": CAUSAL}), "02.causal_mask")
    assert found == [(used.number("02.causal_mask"), CAUSAL[0])]
    own = Lesson(L02).before("02.causal_mask", """
        def causal_mask(L_q, L_k):
            return torch.ones(L_q, L_k).tril().bool()
    """).answer("02.causal_mask", answer)
    assert not own.scan({"02.causal_mask": CAUSAL})


#: An honest 00.padding_mask whose helper the learner named ``check``, as the course's check is named (issue 37):
#: a class, a function, a name assigned, a module of the learner's imported as ``check``.
OWN_CHECK = {
    "class": """
        class check:
            @staticmethod
            def lengths(lengths, max_len):
                if lengths.ndim != 1 or max_len < 0:
                    raise ValueError("padding_mask: lengths (B,), max_len >= 0")
    """,
    "def": """
        def check(lengths, max_len):
            if lengths.ndim != 1 or max_len < 0:
                raise ValueError("padding_mask: lengths (B,), max_len >= 0")
    """,
    "assignment": """
        check = lambda lengths, max_len: None
    """,
    "import as": """
        import math as check
    """,
}
OWN_CHECK_CALLS = {"class": "check.lengths(lengths, max_len)", "def": "check(lengths, max_len)",
                   "assignment": "check(lengths, max_len)", "import as": "check.isfinite(max_len)"}


@pytest.mark.parametrize("kind", sorted(OWN_CHECK))
@pytest.mark.parametrize("where", ["the exercise cell", "a cell before"])
def test_a_learners_own_check_is_theirs_not_the_courses(kind, where):
    """Names are what the notebook binds them to as the grader runs it: the course's check cells, which the grader
    never runs (they call check("00.padding_mask", ...)), rebind ``check`` to the course's in the notebook only."""
    helper = textwrap.dedent(OWN_CHECK[kind]).strip()
    answer = textwrap.dedent(f"""
        def padding_mask(lengths, max_len):
            {OWN_CHECK_CALLS[kind]}
            positions = torch.arange(max_len, device=lengths.device)
            return (positions[None, :] < lengths[:, None])[:, None, None, :]
    """).strip()
    lesson = Lesson(L00, solved=True)
    if where == "a cell before":
        lesson.before("00.padding_mask", helper).answer("00.padding_mask", answer)
    else:
        lesson.answer("00.padding_mask", helper + "\n\n\n" + answer)
    assert any(submission.checked(c.source) == ["00.padding_mask"] for c in lesson.cells)  # the course's check cell
    assert not lesson.scan()


def test_a_check_cell_the_grader_runs_still_binds_its_names():
    """Only a cell the grader skips binds nothing: a learner's cell that rebinds ``check`` to the course's module
    after the answer runs (their function reads it then), and so does an exercise cell that calls check(...)."""
    answer = textwrap.dedent(OWN_CHECK["class"]).strip() + textwrap.dedent("""


        def padding_mask(lengths, max_len):
            check.fail("padding_mask", "lengths", check.describe(lengths), "a tensor")
            return (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, None, :]
    """)
    rebound = "from course_utils import validation as check"
    later = Lesson(L00, solved=True).answer("00.padding_mask", answer)
    at = later.cells.index(later.cell("00.padding_mask")) + 1
    later.cells = [submission.Cell(i, c.source, c.exercise) for i, c in
                   enumerate(later.cells[:at] + [submission.Cell(0, rebound)] + later.cells[at:])]
    assert "course_utils.validation.describe" in [n for _, n in _names(later.scan(), "00.padding_mask")]
    within = Lesson(L00, solved=True).answer("00.padding_mask", f"{answer}\n\n\n{rebound}\n"
                                                                "check('00.padding_mask', padding_mask)")
    assert submission.checked(within.cell("00.padding_mask").source) == ["00.padding_mask"]
    assert "course_utils.validation.describe" in [n for _, n in _names(within.scan(), "00.padding_mask")]


def test_in_a_cell_the_grader_never_runs_its_own_names_still_hold():
    """A check cell's own lines read ``check`` as the course's check (what it imports there); after the cell, and
    in a function defined before it, the name is what it was: the learner's class."""
    from course_teacher.grade import names

    learner = ast.parse("class check:\n    pass\n\n\ndef mask(x):\n    return check.lengths(x)").body
    course = ast.parse('from course_utils import check\ncheck("00.padding_mask", mask)').body
    after = ast.parse("check").body
    analysis = names.Analysis(learner + course + after, names.Objects(), unrun={id(s) for s in course})
    in_cell = course[1].value.func
    in_function = learner[1].body[0].value.func
    assert analysis.refs[id(in_cell)] == {"course_utils.check"}
    assert not {n for n in analysis.refs[id(in_function)] if n.startswith("course_utils")}
    assert analysis.refs[id(after[0].value)] == {names.OWN}
    run = names.Analysis(learner + course + after, names.Objects())  # run by the grader: the import holds
    assert "course_utils.check" in run.refs[id(after[0].value)]
    assert "course_utils.check.lengths" in run.refs[id(in_function)]


def test_a_method_is_reached_through_its_class_a_subclass_and_any_module_path():
    ours, torchs = "course_utils.transformer.EncoderLayer.forward", "torch.nn.TransformerEncoderLayer.forward"
    for source, name in [
        ("layer = EncoderLayer(8, 2, 16)", ours),
        ("layer = nn.TransformerEncoderLayer(8, 2, 16, norm_first=True)", torchs),
        ("class Mine(nn.TransformerEncoderLayer):\n    pass", torchs),
        ("from torch.nn.modules.transformer import TransformerEncoderLayer", torchs),
        ("def build(package):\n    return package.EncoderLayer(8, 2, 16)", ours),
        ("f = EncoderLayer.forward", ours),
    ]:
        lesson = Lesson(L06).before("06.post_norm_decoder", source)
        assert [n for _, n in _names(lesson.scan(), "06.post_norm_decoder")] == [name], source
    # a method's name alone, on an object the scan cannot name, is nobody's
    assert not Lesson(L06).before("06.post_norm_decoder", "def run(module, x):\n    return module.forward(x)").scan()


def test_the_learners_own_attributes_are_theirs_even_named_like_a_forbidden_function():
    own = Lesson(L06).before("06.sinusoidal_encoding", """
        class Encoding(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.sinusoidal_encoding = torch.zeros(d)

            def forward(self, x):
                return x + self.sinusoidal_encoding


        def fill(table, d):
            table.offset_rotation = torch.eye(d)  # assigned, not read
    """)
    assert not own.scan()
    # a class deriving from something else: its `self` may carry anything
    other = Lesson(L06).before("06.sinusoidal_encoding", """
        class Mine(nn.Linear):
            def encode(self, n):
                return self.sinusoidal_encoding(n, 4)
    """)
    assert [n for _, n in _names(other.scan(), "06.sinusoidal_encoding")] == [
        "course_utils.transformer.sinusoidal_encoding"]


def test_a_torch_function_is_found_under_its_other_names():
    for source in ["f = torch._C._nn.scaled_dot_product_attention",
                   "from torch import nn\nf = nn.functional.scaled_dot_product_attention",
                   "from torch.nn import functional\nf = functional.scaled_dot_product_attention"]:
        lesson = Lesson(L01).before("01.scaled_dot", source)
        assert [n for _, n in _names(lesson.scan(), "01.scaled_dot")] == ["F.scaled_dot_product_attention"], source
    # on an object the scan cannot name, the attribute's name is either forbidden function
    lesson = Lesson(L01).before("01.scaled_dot", "def mine(backend, q, k, v):\n"
                                                 "    return backend.scaled_dot_product_attention(q, k, v)")
    assert [n for _, n in _names(lesson.scan(), "01.scaled_dot")] == list(EXERCISES["01.scaled_dot"].forbidden)


def test_a_tensor_operation_counts_in_the_exercise_and_what_it_uses_not_in_a_scratch_cell():
    good = 'def scores_einsum(q, k):\n    return torch.einsum("bqhd,bkhd->bhqk", q, k)'
    scratch = Lesson(L00).before("00.scores_einsum", "x = torch.randn(2, 3)\nprint(x.T, x.transpose(0, 1))")
    assert not scratch.answer("00.scores_einsum", good).scan()

    # the exercise calls a helper of that cell's: the helper's transpose counts, the scratch line does not
    helper = Lesson(L00).before("00.scores_einsum", """
        print(torch.randn(2, 3).T)


        def helper(q, k):
            return torch.einsum("bqhd,bhdk->bhqk", q, k.permute(0, 2, 3, 1))
    """).answer("00.scores_einsum", "def scores_einsum(q, k):\n    return helper(q, k)")
    number = helper.number("00.scores_einsum") - 1
    assert _names(helper.scan(), "00.scores_einsum") == [(number, "Tensor.permute")]
    assert [h.code for h in helper.scan().forbidden["00.scores_einsum"]] == ["k.permute(0, 2, 3, 1)"]

    for sources, answer, expected in [
        # followed through names: a helper using a lambda of another cell
        (["def helper(q, k):\n    return q @ inner(k)", "inner = lambda t: t.mT"], "return helper(q, k)", "Tensor.mT"),
        ([], 'return q @ getattr(k, "mT")', "Tensor.mT"),
        (["from torch import transpose as tr"], "return q @ tr(k, -1, -2)", "torch.transpose"),
        (["def setup():\n    global h\n    h = lambda q, k: q @ k.transpose(-1, -2)"], "return h(q, k)",
         "Tensor.transpose"),
        ([], "return q @ k.swapaxes(-1, -2)", "Tensor.swapaxes"),
        ([], "return q @ torch.Tensor.mT.__get__(k)", "Tensor.mT"),
    ]:
        lesson = Lesson(L00).before("00.scores_einsum", *sources) if sources else Lesson(L00)
        lesson.answer("00.scores_einsum", "def scores_einsum(q, k):\n    " + answer)
        assert expected in {name for _, name in _names(lesson.scan(), "00.scores_einsum")}, answer
    # a line of the exercise cell's own counts, even outside the function
    lesson = Lesson(L00).answer("00.scores_einsum", good + "\n\n\nprint(torch.randn(2, 3).T)")
    assert _names(lesson.scan(), "00.scores_einsum") == [(lesson.number("00.scores_einsum"), "Tensor.T")]
    # a function given by assignment is followed as well
    lesson = Lesson(L00).before("00.scores_einsum", "swap = functools.partial(torch.transpose, dim0=-1, dim1=-2)")
    lesson.answer("00.scores_einsum", "import functools\nscores_einsum = lambda q, k: q @ swap(k)")
    assert [name for _, name in _names(lesson.scan(), "00.scores_einsum")] == ["torch.transpose"]


def test_the_data_a_test_line_of_the_exercise_cell_uses_is_not_followed():
    good = 'def scores_einsum(q, k):\n    return torch.einsum("bqhd,bkhd->bhqk", q, k)'
    lesson = Lesson(L00).before("00.scores_einsum", "q = torch.randn(1, 2, 3, 4)\nk = q.transpose(0, 0)")
    lesson.answer("00.scores_einsum", good + "\n\n\nout = scores_einsum(q, k)")
    assert not lesson.scan()
    # without the function's name the scan follows every name the cell binds (out, then q and k)
    assert _names(lesson.scan(functions=False), "00.scores_einsum") == [(lesson.number("00.scores_einsum") - 1,
                                                                         "Tensor.transpose")]


def test_softmax_is_a_tensor_operation_the_exercise_may_not_use():
    assert not Lesson(L01).before("01.softmax", "y = torch.softmax(torch.randn(3), -1)").scan()
    for sources, answer, expected in [
        ([], "return scores.softmax(-1)", "Tensor.softmax"),
        ([], "return torch.special.softmax(scores, -1)", "torch.special.softmax"),
        ([], "return F.log_softmax(scores, -1).exp()", "F.log_softmax"),
        (["import torch.nn.functional as G\nsm = lambda s: G.softmax(s, -1)"], "return sm(scores)", "F.softmax"),
    ]:
        lesson = Lesson(L01).before("01.softmax", *sources) if sources else Lesson(L01)
        lesson.answer("01.softmax", "def my_softmax(scores):\n    " + answer)
        assert [name for _, name in _names(lesson.scan(), "01.softmax")] == [expected], answer


def test_hits_are_one_per_cell_and_name_in_cell_order():
    lesson = Lesson(L02).before("02.causal_mask", "a = masks.causal_mask\nb = masks.causal_mask(2, 2)",
                                "from course_utils.masks import causal_mask as c")
    hits = lesson.scan({"02.causal_mask": CAUSAL}).forbidden["02.causal_mask"]
    first = lesson.number("02.causal_mask") - 2
    assert [(h.cell, h.code) for h in hits] == [(first, "masks.causal_mask"),
                                                 (first + 1, "from course_utils.masks import causal_mask as c")]
    assert lesson.scan({"02.causal_mask": CAUSAL}) == lesson.scan({"02.causal_mask": CAUSAL})


def test_two_cells_of_the_same_text_are_each_named():
    lesson = Lesson(L02).before("02.causal_mask", "f = masks.causal_mask", "f = masks.causal_mask")
    first = lesson.number("02.causal_mask") - 2
    assert _names(lesson.scan({"02.causal_mask": CAUSAL}), "02.causal_mask") == [(first, CAUSAL[0]),
                                                                                   (first + 1, CAUSAL[0])]


def test_a_cell_nested_too_deeply_to_read_is_for_review():
    deep = "x = " + " + ".join(["1"] * (scan.MAX_DEPTH + 10))  # parses, but nests once per term
    lesson = Lesson(L02).before("02.causal_mask", deep, "y = " + " + ".join(["1"] * 40))
    assert constructs_of(lesson.scan()) == [(lesson.number("02.causal_mask") - 2, "nesting")]


def test_a_cell_that_does_not_parse_is_skipped():
    lesson = Lesson(L02).before("02.causal_mask", "f = masks.causal_mask\ndef broken(:\n    exec('x')")
    assert not lesson.scan({"02.causal_mask": CAUSAL})


# ----------------------------------------------------------------------------- code it cannot read

DYNAMIC = [  # (a learner's cell, the construct the review names)
    ("exec('x = 1')", "exec"),
    ("y = eval('1 + 1')", "eval"),
    ("c = compile('1', 's', 'eval')", "compile"),
    ("os = __import__('os')", "__import__"),
    ("import importlib\nm = importlib.import_module('course_utils.masks')", "importlib"),
    ("from importlib import reload", "importlib"),
    ("name = 'causal_' + 'mask'\nf = getattr(masks, name)", "getattr"),
    ("setattr(masks, 'causal' + '_mask', None)", "setattr"),
    ("print(hasattr(masks, 'x'.upper()))", "hasattr"),
    ("attrs = list(map(getattr, [masks], ['causal_mask']))", "getattr"),
    ("import operator\nf = operator.attrgetter('causal_mask')(masks)", "operator.attrgetter"),
    ("from operator import methodcaller", "operator.methodcaller"),
    ("f = vars(masks)['causal_mask']", "vars"),
    ("g = globals()", "globals"),
    ("l = locals()", "locals"),
    ("f = masks.__dict__['causal_mask']", "__dict__"),
    ("code = my_causal_mask.__code__", "__code__"),
    ("g = check.__globals__", "__globals__"),
    ("b = __builtins__", "__builtins__"),
    ("c = check.__closure__", "__closure__"),
    ("classes = object.__subclasses__()", "__subclasses__"),
    ("import sys\nm = sys.modules['course_utils.masks']", "sys.modules"),
    ("import sys\nframe = sys._getframe()", "sys._getframe"),
    ("import inspect", "inspect"),
    ("from inspect import currentframe", "inspect"),
    ("import types\nf = types.FunctionType(code, {})", "types.FunctionType"),
    ("from types import CodeType", "types.CodeType"),
    ("import marshal", "marshal"),
    ("import pickle\nf = pickle.loads(data)", "pickle"),
    ("state = torch.load('state.pt')", "torch.load"),
    ("state = torch.load(path, weights_only=False)", "torch.load"),
    ("import ctypes", "ctypes"),
    ("import gc\nholders = gc.get_referrers(masks)", "gc.get_referrers"),
    ("import builtins", "builtins"),
    ("import runpy", "runpy"),
    ("import subprocess", "subprocess"),
    ("import os\nos.system('ls')", "os.system"),
    ("import os\nos.execv('/bin/ls', ['ls'])", "os.execv"),
    ("import os\nout = os.popen('ls').read()", "os.popen"),
    ("!ls", "!"),
    ("files = !ls", "!"),
    ("%run helper.py", "%run"),
    ("%load helper.py", "%load"),
    ("%%bash\nls\n", "%%bash"),
    ("%%script python\nprint(1)\n", "%%script"),
    ("%sx ls", "%sx"),
    ("%%writefile cheat.py\nfrom course_utils.masks import causal_mask\n", "%%writefile"),
    ("%pip install einops", "%pip"),
    ("shell = get_ipython()", "get_ipython"),
    ("%timeit -s \"import course_utils.masks as m\" m.causal_mask(2, 2)", "%timeit"),
    ("import sys\nsys.settrace(None)", "sys.settrace"),
    ("from torch.overrides import TorchFunctionMode", "torch.overrides.TorchFunctionMode"),
    ("from course_utils.exercises import grading", "course_utils.exercises"),
    ("from course_teacher.exercises import EXERCISES", "course_teacher"),
    ("torch.softmax = lambda x, dim: x", "assignment"),
    ("F.softmax.__defaults__ = (1,)", "__defaults__"),
    ("setattr(torch, 'einsum', None)", "assignment"),
    ("del torch.nn.functional.scaled_dot_product_attention", "assignment"),
    ("import cheat", "import"),
    ("import timeit\nt = timeit.timeit('masks.causal_mask(2, 2)', globals=None)", "timeit"),
    ("import numpy as np\nx = np.load('x.npy', allow_pickle=True)", "numpy.load"),
    ("from string import Formatter", "string.Formatter"),
    ("import typing\nhints = typing.get_type_hints(my_causal_mask)", "typing.get_type_hints"),
    ("from unittest import mock\nm = mock._importer('course_utils.masks')", "unittest.mock"),
    ("def grab(error):\n    return error.__traceback__.tb_frame", "tb_frame"),
    ("import os\nm = os.sys.modules", "sys.modules"),  # a module is known by its own name
    ("print(get_ipython().user_ns['Out'])", "get_ipython"),
    ("y = Out[3]", scan.HISTORY),  # a look's result stays in IPython's output history
    ("y = _", scan.HISTORY),
    ("print(__, ___)", scan.HISTORY),
    ("y = _5", scan.HISTORY),
    ("y = _oh[5]", scan.HISTORY),
    ("y = In[-1]", scan.HISTORY),
    ("text = _i5 + _ih[2]", scan.HISTORY),
    ("def last():\n    return _\n", scan.HISTORY),
    # the allow-list: what no rule above names is reviewed too, when it is not on the list
    ("match masks:\n    case object(causal_mask=f):\n        g = f", "match class pattern"),
    ("match print:\n    case object(__self__=b):\n        pass", "match class pattern"),
    ("import threading\nthreading.Thread(target=my_causal_mask).start()", "threading"),
    ("from concurrent.futures import ThreadPoolExecutor", "concurrent"),
    ("def softmax(x):\n    return torch._softmax(x, -1, False)", "private name"),
    ("f = torch.ops.aten._scaled_dot_product_attention_math", "torch.ops"),
    ("with torch._C.DisableTorchFunction():\n    pass", "private name"),
    ("f = getattr(torch, '_softmax')", "private name"),
    ("from torch.nn.functional import _canonical_mask", "private name"),
    ("def f(x):\n    return x._version", "private attribute"),
    ("def f(x):\n    x.__class__ = int", "private attribute"),
    ("import os", "os"),
    ("from .helpers import f", "relative import"),
    ("g = torch.jit.script(my_causal_mask)", "torch.jit"),
    # Triton: only what writing a kernel needs (scan.py's ALLOWED says why, and the conditions)
    ("import triton.compiler", "triton"),
    ("import triton\nk = triton.compile(source)", "triton"),
    ("from triton.runtime import interpreter", "triton"),
    ("import triton\nb = triton.runtime.interpreter.interpreter_builder", "triton"),
    ("import triton\ntriton.knobs.runtime.interpret = False", "triton"),
    ("from triton.tools.tensor_descriptor import TensorDescriptor", "triton"),
    ("import triton\ntune = triton.autotune(configs=[], key=[])", "triton"),
    ("import triton.language as tl\nf = tl.inline_asm_elementwise", "triton.language.inline_asm_elementwise"),
    ("import triton.language as tl\nf = tl.extra.libdevice.exp", "triton.language.extra"),
    ("from triton.language.extra import libdevice", "triton.language.extra"),
    ("import triton.language as tl\nf = tl.core.inline_asm_elementwise", "triton.language.core"),
    ("import triton.language as tl\nf = tl.math.exp", "triton.language.math"),
    ("from course_utils import triton_bounds", "course_utils.triton_bounds"),
    ("from course_utils import triton_setup\nb = triton_setup.triton_bounds.install", "course_utils.triton_bounds"),
    ("from course_utils import flash_triton\nc = flash_triton.triton.compiler", "triton"),  # known by its own name
    ("import triton\nh = triton._C.libtriton", "private name"),
]


@pytest.mark.parametrize("source, construct", DYNAMIC, ids=[c + ": " + s.split("\n")[-1][:30] for s, c in DYNAMIC])
def test_code_the_scan_cannot_read_is_for_the_teachers_review(source, construct):
    lesson = Lesson(L02).before("02.decoder_mask", "x = 1", source)
    findings = lesson.scan()
    number = lesson.number("02.decoder_mask") - 1
    # the named construct, and perhaps the allow-list's names for the same code (``import os``)
    assert (number, construct) in constructs_of(findings), findings.review
    assert {cell for cell, _ in constructs_of(findings)} == {number}
    assert findings.review[0].line == lesson.cells[[c.index for c in lesson.cells].index(number - 1)].where[1]
    for exercise in ("02.causal_mask", "02.decoder_mask", "02.masked_softmax"):  # every exercise of the notebook
        assert findings.verdict(exercise) == scan.Verdict(scan.REVIEW, findings.review)


ORDINARY = [
    "import math\nprint(math.sqrt(2.0))",
    "x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))",
    'scores = torch.einsum("bqhd,bkhd->bhqk", torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))',
    "shape = getattr(torch.randn(2), 'shape')\nprint(hasattr(torch, 'einsum'))",
    'name = "mask"\nprint(f"{name!r}: {torch.ones(2).sum():.2f}")',
    "squares = [i * i for i in range(5)]\npairs = {i: j for i, j in zip(range(3), 'abc')}",
    "state = torch.load('state.pt', weights_only=True)",
    "import numpy as np\nx = np.load('x.npy')",
    "%matplotlib inline",
    "%timeit -n 3 -r 2 torch.randn(3)",
    "%%timeit -n 2\ntorch.randn(3)\n",
    "%%capture output\nprint(1)\n",
    "%%time\ny = torch.randn(3)\n",
    "%config InlineBackend.figure_format = 'retina'",
    "%load_ext autoreload\n%autoreload 2",
    "torch.randn?",
    "from IPython.display import display, Markdown\ndisplay(Markdown('hi'))",
    "import timeit\nprint(timeit.timeit(lambda: torch.randn(3), number=3))",
    "import time, random, functools, itertools, collections\nstart = time.perf_counter()",
    "plt.rcParams['figure.figsize'] = (4, 3)",
    ("class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.linear = nn.Linear(2, 2)\n        self.linear.weight.data.zero_()\n\n"
     "    def forward(self, x):\n        return self.linear(x)"),
    "with torch.no_grad():\n    w = torch.zeros(2)\n    w += 1",
    "try:\n    1 / 0\nexcept ZeroDivisionError as error:\n    print(type(error).__name__, error)",
    "def compile(x):\n    return x\n\n\nprint(compile(3))",  # the learner's own function of that name
    "x = torch.randn(3, 2)\nprint(x.T @ x)",  # a transpose, in no exercise's reach
    "import einops",  # (seaborn is off the list: its DataFrames evaluate text, `df.eval`)
    "for _ in range(3):\n    pass\nx, _ = divmod(7, 2)\ndel _",  # `_` stored or deleted, not read
    "_private = 1\nprint(_private, _x1)",
    # a Triton kernel and its launch: what lesson 09's exercises need is on the allow-list
    ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
     "def double(X, Y, n, BLOCK: tl.constexpr):\n    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
     "    x = tl.load(X + i, mask=i < n, other=0.0)\n    tl.store(Y + i, tl.exp(x - tl.max(x, axis=0)), mask=i < n)\n\n\n"
     "x = torch.randn(40)\ny = torch.empty_like(x)\n"
     "double[(triton.cdiv(40, 16),)](x, y, 40, BLOCK=triton.next_power_of_2(16))"),
]


@pytest.mark.parametrize("source", ORDINARY, ids=[s.split("\n")[0][:40] for s in ORDINARY])
def test_ordinary_code_is_no_finding(source):
    findings = Lesson(L02).before("02.decoder_mask", source).scan({"02.causal_mask": CAUSAL})
    assert not findings, findings


#: The course's own statements that use what is not on the allow-list: lesson 08 measures PyTorch's
#: own kernels through their private operators (the math kernel's peak memory, the flash kernel's
#: log-sum-exp, which no public function returns). A learner who retypes one goes to review.
COURSE_UNLISTED = {("08_flash_attention.ipynb", "torch.ops"), ("08_flash_attention.ipynb", "private name")}


def test_the_course_cells_themselves_hold_nothing_the_scan_cannot_read():
    """Had the learner retyped every course cell (so that each is theirs), the review would still be
    empty but for COURSE_UNLISTED: the course's own code uses no construct of the list."""
    for lang in ("en", "zh"):
        for name in LESSONS:
            lesson = Lesson(name, lang, solved=True)
            # but the Colab install at the head of the setup cell (links.colab_cell), which runs pip:
            # retyped by a learner it is rightly reviewed (an unchanged cell is never scanned)
            cells = [submission.Cell(c.index, c.source.replace(links.colab_cell(lang), ""), c.exercise)
                     for c in lesson.cells]
            assert sum(c.source != d.source for c, d in zip(cells, lesson.cells)) == 1, (lang, name)
            exercises = [(c.exercise, c.index, ()) for c in cells if c.exercise]
            found = {(name, hit.name) for hit in scan.scan(cells, set(), exercises).review}
            assert found <= COURSE_UNLISTED, (lang, name, found)


def test_a_cell_written_to_make_reading_it_slow_is_reviewed_in_time():
    """34 nested classes made the scan take 2**34 steps (the grader stalled); reading is linear in the
    code's size now, and bounded (VISITS_PER_NODE): past the bound, the teacher reviews it."""
    nested = "".join("    " * i + f"class C{i}:\n" for i in range(34)) + "    " * 34 + "x = masks.causal_mask\n"
    lesson = Lesson(L02).before("02.causal_mask", nested)
    started = time.perf_counter()
    lesson.scan({"02.causal_mask": CAUSAL})
    assert time.perf_counter() - started < 5
    statements = [scan.read_tree("x = 1").body[0]] * 10
    analysis = scan.Analysis(statements, scan.Objects())
    assert analysis.visits <= 40 and analysis.budget >= scan.VISITS_BASE
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scan, "VISITS_BASE", 0)
        patch.setattr(scan, "VISITS_PER_NODE", 0)
        findings = Lesson(L02).before("02.causal_mask", "y = 1").scan()
    assert [hit.name for hit in findings.review] == ["too complex"]


# ----------------------------------------------------------------------------- the result

def test_a_forbidden_reference_outranks_the_review_for_its_exercise():
    lesson = Lesson(L02).before("02.causal_mask", "f = masks.causal_mask", "exec('')")
    findings = lesson.scan({"02.causal_mask": CAUSAL})
    assert findings.verdict("02.causal_mask").mistake == scan.FORBIDDEN
    assert findings.verdict("02.decoder_mask").mistake == scan.REVIEW
    assert constructs_of(findings) == [(lesson.number("02.causal_mask") - 1, "exec")]


def test_targets_give_each_exercise_its_cell_and_the_keys_forbidden_names(tmp_path):
    notebook = _render(L01)
    path = tmp_path / L01
    nbformat.write(notebook, str(path))
    read = submission.read(path, "x", "x")
    functions = {"01.additive_scores": "my_additive_scores", "01.softmax": "my_softmax", "01.scaled_dot": "my_attention"}
    exercises = [key.Exercise(e, f, 1, tuple(EXERCISES[e].forbidden)) for e, f in functions.items()]
    found = scan.targets(read, exercises)
    assert [(t.id, t.function) for t in found] == list(functions.items())
    for target in found:
        assert read.cells[[c.index for c in read.cells].index(target.cell)].exercise == target.id
        assert target.forbidden == tuple(EXERCISES[target.id].forbidden)
    assert scan.targets(read, [key.Exercise("01.nowhere", "nothing_defines_this", 1)])[0].cell is None
    assert set(TRANSPOSES) == set(EXERCISES["00.scores_einsum"].forbidden)


def test_the_allow_list_lets_every_independently_written_answer_through():
    """The 400-odd learners' answers written from the notebooks alone (tests/test_learner_answers*.py),
    right and wrong, each read as the exercise cell of a learner: none goes to review, but the one that
    imports numpy with __import__ (a DYNAMIC rule's, long before the allow-list)."""
    import test_learner_answers
    import test_learner_answers_l04_l06
    import test_learner_answers_l07_l08

    reviewed, count = [], 0
    for module in (test_learner_answers, test_learner_answers_l04_l06, test_learner_answers_l07_l08):
        answers = next(value for value in vars(module).values() if type(value).__name__ == "Answers")
        for exercise, function, _ in answers:
            if exercise not in EXERCISES:
                continue
            lines = textwrap.dedent(inspect.getsource(function)).splitlines()
            source = "\n".join(["import math", "import torch", "import torch.nn.functional as F", "from torch import nn"]
                               + [line for line in lines if not line.lstrip().startswith("@")])
            target = (exercise, 1, tuple(EXERCISES[exercise].forbidden), function.__name__)
            findings = scan.scan([submission.Cell(1, source)], frozenset(), [target])
            count += 1
            reviewed += [(exercise, function.__name__, hit.name) for hit in findings.review]
    assert count > 400
    assert {name for _, name, _ in reviewed} <= {"sm_numpy"}, reviewed
