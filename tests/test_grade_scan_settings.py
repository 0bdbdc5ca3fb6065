"""The grader's scan on settings that name code (course_teacher/grade/rcparams.py): matplotlib's rcParams keys
that load a module, call functions named as text or start programs (``backend``, ``figure.hooks``, ...), by
every spelling that writes them; IPython's ``%matplotlib`` and ``%config`` (whose text is executed); a class
that makes numpy read memory at an address. Each attack goes to review; beside each, the honest use of the
same thing stays clear. Nothing runs: the scan reads text."""

import pytest
from test_scan import L02, Lesson, constructs_of

from course_teacher.grade import rcparams, scan

PLT = "import matplotlib.pyplot as plt\n"

#: (source, the construct the review names)
ATTACKS = [
    (PLT + "plt.rcParams['backend'] = 'module://course_utils.exercises.kernel'", rcparams.SETTINGS),
    (PLT + "plt.rcParams.update({'backend': 'module://x'})", rcparams.SETTINGS),
    (PLT + "plt.rcParams.update(backend='module://x')", rcparams.SETTINGS),
    (PLT + "r = plt.rcParams\nr['figure.hooks'] = ['course_utils.tiled:online_softmax']", rcparams.SETTINGS),
    (PLT + "dict.update(plt.rcParams, {'backend': 'module://x'})", rcparams.SETTINGS),
    (PLT + "key = 'back' + 'end'\nplt.rcParams[key] = 'module://x'", rcparams.SETTINGS),
    (PLT + "plt.rcParams['figure.hooks'].append('m:f')", rcparams.SETTINGS),
    (PLT + "plt.rcParams.setdefault('axes.prop_cycle', 'cycler(color=[1])')", rcparams.SETTINGS),
    (PLT + "getattr(plt, 'rcParams')['backend'] = 'module://x'", rcparams.SETTINGS),
    (PLT + "def settings():\n    return plt.rcParams\n\n\nsettings()['backend'] = 'module://x'", rcparams.SETTINGS),
    (PLT + "plt.rcParamsDefault['figure.hooks'] = ['m:f']\nplt.rcdefaults()", rcparams.SETTINGS),
    (PLT + "saved = plt.rcParams.copy()", rcparams.SETTINGS),
    (PLT + "plt.rc('figure', hooks=['m:f'])", rcparams.SETTINGS),
    (PLT + "plt.rc('text', usetex=True)", rcparams.SETTINGS),
    (PLT + "options = {'figure.hooks': ['m:f']}\nplt.rc('figure', **options)", rcparams.SETTINGS),
    (PLT + "with plt.rc_context({'backend': 'module://x'}):\n    pass", rcparams.SETTINGS),
    (PLT + "with plt.rc_context(fname='settings.rc'):\n    pass", rcparams.SETTINGS),
    (PLT + "rc = plt.rc\nrc('figure', hooks=['m:f'])", rcparams.SETTINGS),
    ("%matplotlib module://course_utils.exercises.kernel", "%matplotlib"),
    ("%config InlineBackend.rc = {'backend': 'module://x'}", "%config"),
    ("%config A.b = globals().update(my_softmax=print)", "%config"),  # exec("cfg." + line) in the notebook
    ("%config InteractiveShell.displayhook_class = 'course_utils.exercises.kernel.X'", "%config"),
    ("%history -f /tmp/startup.py", "%history"),
    ("import numpy as np\n\n\nclass Window:\n    __array_interface__ = {'data': (id(1), False), 'shape': (8,), "
     "'typestr': '|u1', 'version': 3}\n\n\nnp.asarray(Window())", rcparams.MEMORY),
    ("class AnyName:\n    def __getattr__(self, name):\n        return {}", rcparams.MEMORY),
    ("Window = type('Window', (), {'__array_interface__': {}})", rcparams.MEMORY),
]

HONEST = [
    PLT + "plt.rcParams['figure.figsize'] = (4, 3)",
    PLT + "plt.rcParams.update({'font.size': 9, 'axes.grid': True})",
    PLT + "print(plt.rcParams['figure.dpi'])",
    PLT + "plt.rc('lines', linewidth=2)\nplt.rc(('xtick', 'ytick'), labelsize=8)",
    PLT + "with plt.rc_context({'figure.dpi': 60}):\n    plt.plot([1, 2])",
    PLT + "r = plt.rcParams\nr['axes.titlesize'] = 'large'\nprint(r.get('axes.titlesize'))",
    PLT + "plt.rcdefaults()",
    "%matplotlib inline",
    "%config InlineBackend.figure_format = 'retina'",
    "%config InlineBackend",
    "%history -n -l 3",
    "class Point:\n    def __init__(self, x):\n        self.x = x\n\n    def __repr__(self):\n        return f'Point({self.x})'",
]


@pytest.mark.parametrize("source, construct", ATTACKS, ids=[s.split("\n")[-1][:40] for s, _ in ATTACKS])
def test_a_setting_that_names_code_goes_to_review(source, construct):
    lesson = Lesson(L02).before("02.decoder_mask", source)
    findings = lesson.scan()
    number = lesson.number("02.decoder_mask") - 1
    assert (number, construct) in constructs_of(findings), findings.review
    assert findings.verdict("02.decoder_mask") == scan.Verdict(scan.REVIEW, findings.review)


@pytest.mark.parametrize("source", HONEST, ids=[s.split("\n")[-1][:40] for s in HONEST])
def test_the_honest_use_of_the_same_settings_is_no_finding(source):
    findings = Lesson(L02).before("02.decoder_mask", source).scan()
    assert not findings, findings


def test_the_keys_that_name_code_are_matplotlibs_own():
    """Every RC_CODE entry is a key (or a group of keys) the installed matplotlib has: the table is not stale."""
    matplotlib = pytest.importorskip("matplotlib")
    keys = list(matplotlib.RcParams.validate)
    from course_teacher.grade.policy import RC_CODE

    for entry in RC_CODE:
        assert any(key == entry or key.startswith(entry + ".") for key in keys), entry
    assert rcparams.names_code("backend") and rcparams.names_code("figure.hooks")
    assert not rcparams.names_code("figure.figsize") and not rcparams.names_code("font.size")


#: Bindings of the names the grader's own commands resolve in the notebook (a `def __import__` received the
#: grader's collect call, read the hidden cases from its path and wrote a forged answer: full marks for a stub),
#: and the file writers that forgery used; beside each, the honest code that stays clear.
GRADERS_NAMES = [
    ("def __import__(*args, **kwargs):\n    return None", scan.GRADERS_NAME),
    ("__builtins__ = {}", scan.GRADERS_NAME),
    ("def globals():\n    return {}", scan.GRADERS_NAME),
    ("for globals in range(2):\n    pass", scan.GRADERS_NAME),
    ("import math as globals", scan.GRADERS_NAME),
    ("import io\nimport torch\nb = io.BytesIO()\ntorch.serialization.save({'a': 1}, b)", "torch.serialization.save"),
    ("import torch\nx = torch.zeros(3)\nx.numpy().tofile('/tmp/answer.pt')", "tofile"),
    ("import numpy as np\nnp.zeros(2).dump('/tmp/x.pkl')", "dump"),
]
GRADERS_NAMES_HONEST = [
    "import io\nimport torch\nb = io.BytesIO()\nprint(torch.zeros(3).numpy().tolist(), b.getvalue())",
    "def my_globals():\n    return {'x': 1}\n\n\nprint(my_globals())",
]


@pytest.mark.parametrize("source, construct", GRADERS_NAMES, ids=[s.split("\n")[0][:40] for s, _ in GRADERS_NAMES])
def test_a_name_the_grader_uses_or_a_file_writer_goes_to_review(source, construct):
    lesson = Lesson(L02).before("02.decoder_mask", source)
    findings = lesson.scan()
    assert (lesson.number("02.decoder_mask") - 1, construct) in constructs_of(findings), findings.review


@pytest.mark.parametrize("source", GRADERS_NAMES_HONEST)
def test_names_like_the_graders_and_in_memory_buffers_are_no_finding(source):
    findings = Lesson(L02).before("02.decoder_mask", source).scan()
    assert not findings, findings
