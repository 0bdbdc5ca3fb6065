"""What a red team did to `make grade` after the hostile class of test_grade_hostile.py, each run
through the grader as a teacher runs it (`python -m course_teacher.grade`, in the sandbox, two at a
time), beside honest submissions whose grades must come out byte-identical to theirs graded alone:

- walking around the scan: a ``match`` statement's class patterns reaching a course function, and
  ``print.__self__`` (the builtins) for ``exec``; the function called from a thread, out of the
  kernel's watcher; the kernel side's ``collect`` replaced through ``match``;
- private operators: ``torch._softmax``, ``torch.ops.aten._scaled_dot_product_attention_math``,
  and ``torch._C.DisableTorchFunction`` blinding the watcher for an untiled attention;
- a copy of the course's own code as an answer (``masks.padding_mask``, renamed and reformatted, with
  a line added, and with the course's checks it calls written again as a class of the cell's, ``checks``);
- issue 37: callables of allowed packages that run text, start processes or open files (sympy,
  ``torch.utils.benchmark``, PIL, ``collect_env``, ``switch_backend``, ``NpzFile``, ``DataLoader``, ``open``),
  the references under other names (FORBIDDEN), torch attributes named after the hidden inputs;
- a function that, on the hidden cases, raises with their inputs in its message, to read them in
  its feedback;
- 34 nested classes, which made the scan take 2**34 steps: graded now within its limits;
- routes a second independent review found (tests/attacks_more.py: ATTACKS_MORE), refused at run time: lesson 09's
  answer computed in NumPy and written through a view, as scalar arguments, a global, a pointer's offset, fill values
  or a tensor from NumPy; a course function that computes the answer under another name, or a table it computed;
- an independent review: matplotlib settings that name code (``rcParams['backend']``, ``figure.hooks``),
  ``%config`` (whose text IPython executes), a class that makes numpy read memory at an address, a ``def
  __import__`` that received the grader's own collect call and forged its answer.

Each scores 0 for the teacher's review with its reason named (or, the last two, is graded and shows
nothing of a hidden case; ATTACKS_MORE's, 0 with the run-time refusal's reason); the run completes. Beside
them, an honest 00 whose helper is a class named ``check`` (OWN_CHECK) gets full marks."""

import inspect
import json
import textwrap

import padding_mask_copies
import patience
import pytest
from attacks_more import ATTACKS_MORE
from submissions import answer, insert, render, save, solved

from course_teacher.grade import grader, sandbox
from course_utils import masks

pytestmark = pytest.mark.slow

L00, L01, L02, L08 = "00_tensor_shapes.ipynb", "01_attention_basics.ipynb", "02_masking.ipynb", "08_flash_attention.ipynb"
# The grader's limits stretched by the session's calibrated slowness, as tests/test_grade_hostile.py's: on a busy
# machine an attack must be refused for its reason, not cut off by the time limit first.
OPTIONS = ["--jobs", "2", "--cells", "own", "--time-limit", f"{2 * patience.calibrated():g}",
           "--cell-timeout", f"{30 * patience.calibrated():g}", "--seed", "8231"]


def _copy_of_padding_mask():
    source = textwrap.dedent(inspect.getsource(masks.padding_mask))
    body = source.split('"""', 2)[2]  # its docstring dropped
    return "from course_utils import validation as check\n\n\ndef padding_mask(lens, size):" + \
        body.replace("lengths", "lens").replace("max_len", "size")


ATTACKS = {  # label: (lesson notebook, {exercise: its cell's new text} or (before exercise, a new cell), what it shows)
    "match-course": (L02, {"02.causal_mask": "from course_utils import masks\n\n\ndef my_causal_mask(L_q, L_k):\n"
                                             "    match masks:\n        case object(causal_mask=found):\n"
                                             "            return found(L_q, L_k)"}, "match class pattern"),
    "match-exec": (L01, ("01.softmax", "match print:\n    case object(__self__=b):\n        match b:\n"
                                       "            case object(exec=run):\n                run('import torch')"),
                   "match class pattern"),
    "thread": (L01, {"01.softmax": "import threading\nimport torch\n\n\ndef my_softmax(x):\n    out = []\n"
                                   "    t = threading.Thread(target=lambda: out.append(torch.softmax(x, -1)))\n"
                                   "    t.start()\n    t.join()\n    return out[0]"}, "threading"),
    "private-softmax": (L01, {"01.softmax": "import torch\n\n\ndef my_softmax(x):\n    return torch._softmax(x, -1, False)"},
                        "private name"),
    "aten-math": (L01, {"01.scaled_dot": "import torch\n\n\ndef my_attention(query, key, value):\n"
                                         "    return torch.ops.aten._scaled_dot_product_attention_math(query, key, value)"}, "torch.ops"),
    "disable-watcher": (L08, {"08.tiled_forward": "import torch\n\n\ndef my_tiled_attention(query, key, value, block_q, block_k):\n"
                                                  "    with torch._C.DisableTorchFunction():\n"
                                                  "        s = query @ key.transpose(-2, -1) * query.shape[-1] ** -0.5\n"
                                                  "        lse = torch.logsumexp(s, -1)\n"
                                                  "        return torch.exp(s - lse[..., None]) @ value, lse"},
                        "private name"),
    "forged-collect": (L00, ("00.padding_mask", "import course_utils\nmatch course_utils:\n"
                                                "    case object(exercises=e):\n        pass"), "match class pattern"),
    "copy": (L00, {"00.padding_mask": _copy_of_padding_mask()}, "course_utils.masks.padding_mask"),
    # issue 37: callables of allowed packages that run text, start processes or open files
    "sympy": (L01, ("01.softmax", "import sympy\nsympy.parse_expr('1 + 1', transformations=())"), "sympy"),
    "benchmark-timer": (L00, ("00.padding_mask", "import torch.utils.benchmark as b\nb.Timer(stmt='1 + 1').timeit(1)"),
                        "torch.utils.benchmark"),
    "pil-unsafe-eval": (L02, ("02.causal_mask", "from PIL import ImageMath\nImageMath.unsafe_eval('1')"), "PIL"),
    "collect-env": (L00, ("00.padding_mask", "from torch.utils import collect_env\ncollect_env.run('true')"),
                    "torch.utils.collect_env"),
    "switch-backend": (L00, ("00.padding_mask", "import matplotlib.pyplot as plt\nplt.switch_backend('module://x')"),
                       "matplotlib.pyplot.switch_backend"),
    "npzfile": (L00, ("00.padding_mask", "import numpy\nnumpy.lib.npyio.NpzFile('x.npz')"), "numpy.lib.npyio"),
    "dataloader": (L00, ("00.padding_mask", "from torch.utils.data import DataLoader\n"
                                            "list(DataLoader(range(4), num_workers=2))"), "torch.utils.data"),
    "open": (L00, ("00.padding_mask", "text = open('x.py').read()"), "builtin open"),
    # a copy of the course's padding_mask with one line added: still a copy
    "copy-unused": (L00, {"00.padding_mask": _copy_of_padding_mask().replace("def padding_mask(lens, size):",
                                                                             "def padding_mask(lens, size):\n    unused = 0")},
                    "course_utils.masks.padding_mask"),
    # issue 37: the copy with the course's checks it calls (``check``, course_utils.validation) written again as a class
    # of the cell's, ``checks`` (tests/padding_mask_copies.py): 4/4 before the fingerprint named helpers by what they are
    "copy-own-checks": (L00, {"00.padding_mask": padding_mask_copies.in_a_class()}, "course_utils.masks.padding_mask"),
    # an independent review: settings that name code (the scan reads the key they touch, the magic's text)
    "rc-backend": (L00, ("00.padding_mask", "import matplotlib.pyplot as plt\n"
                                            "plt.rcParams['backend'] = 'module://course_utils.tiled'"),
                   "matplotlib rcParams"),
    "rc-hooks": (L00, ("00.padding_mask", "import matplotlib.pyplot as plt\n"
                                          "dict.update(plt.rcParams, {'figure.hooks': ['course_utils.tiled:x']})"),
                 "matplotlib rcParams"),
    "config-exec": (L01, ("01.softmax", "%config A.b = globals().update(my_softmax=print)"), "%config"),
    # the grader's collect call received by the notebook's own __import__, which read the hidden cases from its
    # path and wrote a forged answer (tofile): 01.softmax passed with its stub before the scan reviewed it
    "forged-import": (L01, ("01.softmax", "import io\nimport torch\n\n\nclass Forger:\n"
                                          "    def collect(self, namespace, name, calls_path, answer_path):\n"
                                          "        calls = torch.load(calls_path, weights_only=True)\n"
                                          "        buffer = io.BytesIO()\n"
                                          "        torch.serialization.save({'calls': len(calls)}, buffer)\n"
                                          "        torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)"
                                          ".numpy().tofile(answer_path)\n\n\n"
                                          "def __import__(*args, **kwargs):\n    return Forger()"),
                      "a name the grader uses"),
    "array-interface": (L00, ("00.padding_mask", "class Window:\n    __array_interface__ = {}"), "memory by address"),
    # torch attributes named after the hidden inputs, for the feedback to print them back
    "leak-attribute": (L01, {"01.softmax": "import torch\n\n\ndef my_softmax(x):\n"
                                            "    torch.__dict__['leak_' + str(x.shape[0])] = 1\n"
                                            "    e = (x - x.max(-1, keepdim=True).values).exp()\n"
                                            "    return e / e.sum(-1, keepdim=True)"}, "torch.__dict__"),
}
#: Reference functions under other names (issue 37, 3): the exercise scores 0, FORBIDDEN, naming it.
OTHER_NAMES = {  # label: (lesson notebook, exercise, its cell's new text, the name the feedback gives)
    "online-softmax": (L01, "01.softmax", "from course_utils import tiled\n\n\ndef my_softmax(x):\n"
                                          "    return tiled.online_softmax(x, ())", "course_utils.tiled.online_softmax"),
    "special-softmax": (L01, "01.softmax", "import torch\n\n\ndef my_softmax(x):\n"
                                           "    return torch.special.softmax(x, -1)", "torch.special.softmax"),
    "sdpa-softmax": (L01, "01.softmax", "import torch\nimport torch.nn.functional as F\n\n\ndef my_softmax(x):\n"
                                        "    eye = torch.eye(x.shape[-1], dtype=x.dtype)\n"
                                        "    return F.scaled_dot_product_attention(x, eye, eye, scale=1)",
                     "F.scaled_dot_product_attention"),
    "special-logsumexp": (L08, "08.tiled_forward", "import torch\n\n\n"
                                                   "def my_tiled_attention(query, key, value, block_q, block_k):\n"
                                                   "    s = query @ key.mT * query.shape[-1] ** -0.5\n"
                                                   "    lse = torch.special.logsumexp(s, -1)\n"
                                                   "    return (s - lse[..., None]).exp() @ value, lse",
                          "torch.special.logsumexp"),
}


def _attack(folder, label, table=ATTACKS):
    lesson, change, _ = table[label]
    notebook = solved(lesson, "en")
    if isinstance(change, dict):
        for exercise, source in change.items():
            answer(notebook, exercise, source)
    else:
        insert(notebook, *change)
    save(notebook, folder / lesson)


def _nested(folder):
    notebook = solved(L00, "en")
    insert(notebook, "00.padding_mask", "".join("    " * i + f"class C{i}:\n" for i in range(34)) + "    " * 34 + "x = 1")
    save(notebook, folder / L00)


def _leaky(folder):
    """01.softmax right on the notebook's cases, and on the grader's own it raises with their inputs."""
    from course_utils.exercises import public

    shapes = sorted({tuple(case.args[0].shape) for case in public.load("01.softmax").cases})
    notebook = solved(L01, "en")
    answer(notebook, "01.softmax", f"def my_softmax(x):\n    if tuple(x.shape) not in {shapes!r}:\n"
                                   "        raise ValueError(f'SEEN {x.flatten().tolist()[:3]}')\n"
                                   "    e = (x - x.max(-1, keepdim=True).values).exp()\n"
                                   "    return e / e.sum(-1, keepdim=True)")
    save(notebook, folder / L01)


HONEST = (("honest-00", L00), ("honest-08", L08))  # (student, lesson): solved, graded beside the attacks and alone

#: An honest 00.padding_mask whose helper is a class of the learner's named ``check``, as the course's check is, and
#: whose course check cells stay as they are (issue 37: the scan read it as course_utils.check, FORBIDDEN).
OWN_CHECK = (L00, "00.padding_mask", padding_mask_copies.HONEST_CLASS_CHECK)


def _honest(folder, lesson):
    save(solved(lesson, "zh"), folder / lesson)


def _grade(root, out):
    code = grader.main([str(root), "--out", str(out), *OPTIONS])
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    return code, files


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not sandbox.available()[0]:
        pytest.skip("no sandbox here")
    root = tmp_path_factory.mktemp("class")
    for label in ATTACKS:
        _attack(root / label, label)
    for label in ATTACKS_MORE:
        _attack(root / label, label, ATTACKS_MORE)
    for label, (lesson, exercise, source, _) in OTHER_NAMES.items():
        save(answer(solved(lesson, "en"), exercise, source), root / label / lesson)
    _nested(root / "nested")
    _leaky(root / "leaky")
    for student, lesson in HONEST:
        _honest(root / student, lesson)
    lesson, exercise, source = OWN_CHECK
    save(answer(solved(lesson, "en"), exercise, source), root / "own-check" / lesson)
    code, files = _grade(root, tmp_path_factory.mktemp("out"))
    # The honest submissions graded again with no attacker among them: one run for both (each has a
    # sandbox and a kernel of its own in any run, so an honest neighbour can change nothing; one run
    # saves a grader's start and grades the two side by side, as test_grade_hostile.py's `alone` does).
    by_themselves = tmp_path_factory.mktemp("alone")
    for student, lesson in HONEST:
        _honest(by_themselves / student, lesson)
    _, alone_files = _grade(by_themselves, tmp_path_factory.mktemp("alone-out"))
    return code, files, {student: alone_files for student, _ in HONEST}


def _rows(files, student):
    import csv
    import io

    return [row for row in csv.DictReader(io.StringIO(files["grades.csv"].decode())) if row["student"] == student]


@pytest.mark.parametrize("label", sorted(ATTACKS))
def test_each_attack_scores_0_for_review_with_its_reason(graded, label):
    _, files, _ = graded
    rows = _rows(files, label)
    reason = ATTACKS[label][2]
    assert rows and all(row["points"] == "0" for row in rows if row["exercise"] in ATTACKS[label][1]
                        or not isinstance(ATTACKS[label][1], dict)), rows
    feedback = files[f"{label}/{ATTACKS[label][0][:-len('.ipynb')]}/feedback.md"].decode()
    if label.startswith("copy"):
        # the copy imports the course's own argument checks (validation), which an exercise that asks for a course
        # function written again refuses by itself (rules.OWN_CODE: FORBIDDEN, naming the course code it calls)
        assert any(row["mistake"] in ("REVIEW", "FORBIDDEN") for row in rows), rows
        assert (reason in feedback and "copy" in feedback) or "course_utils." in feedback
        return
    assert any(row["mistake"] == "REVIEW" for row in rows), rows
    assert "🔎" in feedback
    assert any(row["review"] for row in rows), rows


def test_the_nested_classes_are_graded_in_time_and_the_run_completes(graded):
    code, files, _ = graded
    rows = _rows(files, "nested")
    assert [row["points"] for row in rows] == ["1", "1", "1", "1"], rows
    assert code == 0 and json.loads(files[".gradebook.json"])["complete"] is True


def test_a_hidden_cases_inputs_never_reach_the_feedback(graded):
    _, files, _ = graded
    feedback = files["leaky/01_attention_basics/feedback.md"].decode()
    rows = {row["exercise"]: row for row in _rows(files, "leaky")}
    assert rows["01.softmax"]["points"] == "0" and "ValueError" in feedback
    assert "SEEN" not in feedback and "SEEN" not in files["grades.csv"].decode()


def test_honest_grades_are_the_same_bytes_beside_the_attacks(graded):
    _, files, alone = graded
    for student, by_itself in alone.items():
        mine = {name: data for name, data in files.items() if name.startswith(f"{student}/")}
        assert mine and mine == {name: data for name, data in by_itself.items() if name.startswith(f"{student}/")}
        assert all(row["points"] == row["max_points"] for row in _rows(files, student)), _rows(files, student)


@pytest.mark.parametrize("label", sorted(OTHER_NAMES))
def test_a_reference_under_another_name_scores_0_naming_it(graded, label):
    _, files, _ = graded
    lesson, exercise, _, name = OTHER_NAMES[label]
    rows = {row["exercise"]: row for row in _rows(files, label)}
    assert rows[exercise]["points"] == "0" and rows[exercise]["mistake"] == "FORBIDDEN", rows[exercise]
    assert name in files[f"{label}/{lesson[:-len('.ipynb')]}/feedback.md"].decode()


@pytest.mark.parametrize("label", sorted(ATTACKS_MORE))
def test_each_route_an_independent_review_found_scores_0_with_its_reason(graded, label):
    """tests/attacks_more.py: refused while the learner's function runs (not sent to review), each attacked exercise
    scores 0 with the refusal's reason in the feedback. (The notebook's other exercises are the lesson's solutions,
    not judged here: lesson 09's, run by Triton's interpreter, can pass this run's 2 s per call only on a quiet
    machine.)"""
    _, files, _ = graded
    lesson, change, reason = ATTACKS_MORE[label]
    rows = {row["exercise"]: row for row in _rows(files, label)}
    assert set(change) <= set(rows), rows
    for exercise in change:
        assert rows[exercise]["points"] == "0" and rows[exercise]["mistake"] not in ("", "REVIEW"), rows[exercise]
    assert reason in files[f"{label}/{lesson[:-len('.ipynb')]}/feedback.md"].decode()


def test_no_torch_attribute_the_learner_named_reaches_the_feedback(graded):
    _, files, _ = graded
    written = b"".join(data for name, data in files.items() if name.startswith("leak-attribute/") or name == "grades.csv")
    assert b"leak_" not in written


def test_a_copy_with_its_checks_written_again_goes_to_review_naming_its_source(graded):
    _, files, _ = graded
    rows = {row["exercise"]: row for row in _rows(files, "copy-own-checks")}
    assert rows["00.padding_mask"]["points"] == "0" and rows["00.padding_mask"]["mistake"] == "REVIEW", rows
    feedback = files["copy-own-checks/00_tensor_shapes/feedback.md"].decode()
    assert "course_utils.masks.padding_mask" in feedback and "copy" in feedback
    assert "course_utils.masks.padding_mask" in rows["00.padding_mask"]["review"], rows["00.padding_mask"]


def test_an_honest_answer_with_a_class_named_check_gets_full_marks(graded):
    """The learner's own ``class check`` is theirs; the course's check cells, which the grader does not run, change
    nothing (issue 37: the scan read the class as course_utils.check and gave FORBIDDEN)."""
    _, files, _ = graded
    rows = _rows(files, "own-check")
    assert len(rows) == 4 and all(row["points"] == row["max_points"] and not row["mistake"] for row in rows), rows
