"""Reading the learner's code in the grader's process: which exercises score 0, and why.

The kernel's watcher (course_utils/exercises/sandbox.py) records the forbidden calls a learner's
function makes, but it runs beside the learner's code, which can switch it off. This module reads
the code instead, as text, in the grader's own process, where no notebook can change what it sees.
It is pure: no kernel, no file, no code of the notebook's run, nothing imported that the notebook
names (only what an exercise's forbidden names name, as the registry imports them).

    exercises = targets(submission, plan(lesson, lang)[0])  # [Target(id, cell index, forbidden, function)]
    findings = scan(submission.cells, plan(lesson, lang)[1], exercises)
    findings.verdict("02.causal_mask")  # None, or Verdict("FORBIDDEN" | "REVIEW", (Hit, ...))

A Hit is (cell number from 1, its first line, the forbidden name as the exercise lists it or the
construct, the code that does it).

Which code
----------
The learner's cells are the code cells whose text (stripped) is not one of the course's own cells'
texts; within them, a top-level statement that is word for word one of the course's own top-level
statements (same syntax tree) is the course's too: a learner who changes one number in a cell of
the lesson does not make its other lines theirs. The course's code is read only for the names it
binds (``from course_utils import masks``, ``import torch.nn.functional as F``); the learner's is
read for everything below. Cells are parsed as ``submission.parse`` does (IPython's magics turned
into Python first); a cell that does not parse is skipped (it fails in the kernel as well).

Names are followed through every cell in notebook order: imports (``import a.b as c``, ``from a
import b as c``, ``from a import *``), simple re-bindings (``f = masks.causal_mask``, ``m2 = m``,
``x = a if c else b``, ``a, b = m, n``), ``getattr(obj, "constant")``, the items of lists, tuples
and dicts, for-loop and with targets, and the function scopes of Python (a parameter or a local
variable hides a global one; ``global`` is followed). A function's body reads the global names as
they are when it runs: the scan takes every value the name has from the function's definition on.
A module reached through a package (``course_utils.masks``, ``torch.sys``) is known by its own
name; a name in a module the grader's process has loaded is compared by identity with the
forbidden object, so a re-export (``torch._C._nn.scaled_dot_product_attention``, a course module
importing another's function) is the same function. Nothing is imported for that: modules that are
not loaded are compared by name.

Forbidden references (``FORBIDDEN``, for the exercise that forbids the name)
---------------------------------------------------------------------------
Any reference counts, a call or not: ``masks.causal_mask(...)``, ``f = masks.causal_mask``,
``getattr(masks, "causal_mask")``, ``from course_utils.masks import causal_mask``, ``from
course_utils.masks import *`` (a star import from a module holding a forbidden name), an import in
one cell and a use in another. A call at a cell's top level counts as well, even one whose result
is only data: a table of results computed there (``causal_mask`` for every size) passes an exercise
without a forbidden call during the check, where the kernel's watcher would see it. The one
exemption is a *look* (below); the lines of a changed course cell the learner left as they were do
not count either. Beyond the names the imports give:

- a method of a class (``course_utils.transformer.EncoderLayer.forward``,
  ``torch.nn.TransformerEncoderLayer.forward``) is also reached by its class, and by a subclass that
  does not override it: an instance calls it;
- an attribute named like a forbidden function or class (``x.causal_mask``, ``x.EncoderLayer``) read
  from an object the scan cannot name (a parameter, a call's result, an item of a list) counts: the
  scan does not follow values through calls, so it judges such an attribute by its name (``self`` in
  a method of the learner's class deriving from their own classes, ``object`` or ``nn.Module`` is
  theirs: ``self.sinusoidal_encoding`` there is no course function);
- ``Tensor.x`` names (methods and properties) are matched by attribute name on any object
  (``k.mT``, ``x.transpose(...)``, ``torch.Tensor.transpose``, ``getattr(k, "mT")``).

Where: a course function (``course_utils...``) or a torch function that is a whole solution
(``F.scaled_dot_product_attention``, ``nn.TransformerEncoderLayer.forward``: every forbidden name
that is no tensor operation) is looked for in every learner cell. A tensor operation (``Tensor.x``,
and a ``torch.x`` / ``F.x`` whose name is also a method of ``torch.Tensor``: the transposes of
``TRANSPOSES``, softmax) is looked for only in the exercise's own cell and in the learner's
top-level statements that bind a global name the exercise's function needs: its own name (every
name its cell binds, when the exercise does not give the function's name), then every global name a
statement so reached reads (in a function's body, a default, a lambda, ``h = partial(...)``), and
on. ``k.T`` in an unrelated scratch cell is harmless, and so is a scratch ``k = x.transpose(1, 2)``
that a test line of the exercise cell uses; in a helper the function calls it is not. (For these
names the rule by attribute name on an unknown object does not apply: ``x.t`` is only ``Tensor.t``.)

A look: re-running a demonstration with other numbers
-----------------------------------------------------
A learner who re-runs a line of the lesson to see another output (``mask_picture(causal_mask(3, 7),
ax=axes[0])``, a bare ``masks.causal_mask(4, 6)``, ``print(causal_mask(3, L))``) makes no finding. An
exercise's forbidden references in a learner's top-level statement do not count when the statement
is a *look* for it:

- an expression statement at the cell's top level (not in a def, class, loop, with, if or try; not
  code a magic runs, ``%time f(x)``), with no walrus anywhere in it;
- every reference to the exercise's forbidden names in it is the function of a call (the function
  is passed as a value nowhere in it: ``map(masks.causal_mask, ...)`` counts), given only constants
  and names, attributes, subscripts, tuples and arithmetic of them: no call (of a learner's function
  or any other), no lambda, comprehension, starred or ``**`` argument, no name the notebook defines
  as a function or class;
- the call's result goes, directly or through arithmetic, comparisons, subscripts, tuples, f-strings
  and its own Tensor methods and properties (``.float()``, ``.T``, ``[-3:]``), only to calls that show
  it: a course function (``course_utils...``, ``course_utils.exercises`` aside), a public function of
  ``LOOK_MODULES`` (torch, ``F``, ``torch.linalg`` / ``special`` / ``fft``, pyplot: none in place,
  ``name_``; not ``torch.save``; no ``out=``), ``print`` (without ``file=``), ``repr``, ``str``, ``len`` and
  IPython's ``display``; with no lambda or function or class of the notebook's given beside it. Never
  a learner's function or method (``keep(causal_mask(4, 6))``), a method of an object the scan cannot
  name (``table.append(...)``, ``d.update(...)``, ``x.__setitem__(...)``, ``x.copy_(...)``,
  ``ax.imshow(...)``), a method of a class (``nn.Module.register_buffer``).

Why it is safe: the hidden cases differ from the arguments a learner writes only as long as the
learner cannot loop over them, and a look cannot loop (its arguments are written in the line), cannot
keep its result (no assignment, no walrus, no learner code receives it), and its output cache is out
of reach (reading ``Out``, ``_``, ... is for review, below). What remains is what any shown result
leaves: a picture keeps its data in the figure (``ax=`` of the learner's choosing), a tensor of the
learner's class given beside the result may see it. Reading those back needs one look per case,
written out by hand, and the hidden cases are drawn from the teacher's seed, unknown to the learner.

Code the scan cannot read (``REVIEW``: every exercise of the notebook scores 0, for the teacher)
-----------------------------------------------------------------------------------------------
``DYNAMIC``, by qualified name (a module stands for everything in it), ``DYNAMIC_ATTRIBUTES`` by
attribute name on any object, and:

- ``getattr`` / ``setattr`` / ``delattr`` / ``hasattr`` with a name that is not a string constant,
  or used other than by a call (``map(getattr, ...)``);
- an assignment or deletion of an attribute of a module, a class or a function the notebook imported
  (``torch.softmax = ...``, ``setattr(F, "softmax", ...)``, ``EncoderLayer.forward = ...``);
- ``torch.load`` without ``weights_only=True`` (spelt out: an environment variable can change the
  default) and ``numpy.load`` with ``allow_pickle`` other than ``False``: unpickling runs code, and
  an earlier cell can write the file, so a constant path proves nothing; ``timeit`` given code as
  text (a lambda or a function is fine);
- an import of a module that is neither in Python's standard library nor in ``KNOWN_PACKAGES``: it
  may be a file the notebook wrote;
- IPython: ``!cmd`` and every magic but ``SAFE_MAGICS``; ``%time``, ``%timeit``, ``%prun`` and
  ``%%capture`` (``CODE_MAGICS``) run Python code, which is read as code (and is ``REVIEW`` when it
  cannot be); ``get_ipython()`` otherwise;
- ``HISTORY``, reading IPython's output history (where a look's result stays): a load of ``Out``,
  ``_oh``, ``_``, ``__``, ``___``, ``_<n>`` and of the input history ``In``, ``_ih``, ``_i``, ``_ii``,
  ``_iii``, ``_i<n>``, anywhere in a learner's cell (``for _ in range(3)``, ``x, _ = f()`` store it: fine);
- a cell that nests deeper than ``MAX_DEPTH`` (construct ``nesting``).

Ordinary code stays clear: ``import math``, ``torch.randn``, f-strings, comprehensions, einsum
strings, ``getattr(x, "shape")``, ``torch.load(path, weights_only=True)``, ``%timeit f(x)``,
``%matplotlib inline``, ``from IPython.display import display``.

What it does not see (the kernel's watcher still catches the honest use of these): a forbidden
function called by another function (``nn.MultiheadAttention`` calls
``F.multi_head_attention_forward``; a course helper, or a function an unchanged course cell
defines, may call a forbidden one), an instance the course's own code built (a trained model's
layer, whose class the learner never names), a module the notebook wrote under a standard library
module's name, and a course cell that passes a forbidden function to a name the learner redefined.
"""

import ast
import builtins
import contextlib
import functools
import inspect
import re
import sys
import types
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from .submission import parse

FORBIDDEN = "FORBIDDEN"
REVIEW = "REVIEW"

#: What the scan cannot read, by qualified name. A name stands for itself and everything under it
#: (``importlib`` for ``importlib.util.find_spec``); a name ending in ``*`` for every name that starts
#: so (``os.exec*``: ``os.execv``, ...). ``builtins.x`` entries are the builtin functions however they
#: are reached; ``builtins`` itself is the module, imported by name.
DYNAMIC = (
    # code from text
    "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "builtins.breakpoint",
    "importlib", "imp", "runpy", "code", "codeop", "pdb", "bdb", "pkgutil", "zipimport", "pydoc",
    "marshal", "pickle", "_pickle", "cPickle", "dill", "cloudpickle", "joblib", "shelve", "copyreg",
    "multiprocessing", "torch.multiprocessing", "pandas.read_pickle", "numpy.lib.format", "torch.serialization._*",
    "torch.jit.load", "torch.package", "torch.hub", "torch.utils.cpp_extension", "torch.ops.load_library",
    # text that names an object: the object
    "unittest.mock", "logging.config", "typing.get_type_hints", "typing.ForwardRef", "typing._*",
    "typing_extensions.get_type_hints",
    # namespaces as data, names computed
    "builtins.globals", "builtins.locals", "builtins.vars", "builtins", "operator.attrgetter",
    "operator.methodcaller", "string.Formatter", "sys.modules", "sys.meta_path", "sys.path_hooks",
    "sys.path_importer_cache",
    # where imports come from: a module the notebook wrote (the sandbox's working directory is
    # read-only, but its HOME and /tmp are not) must not become importable
    "sys.path", "site", "os.chdir", "os.fchdir",
    # frames, code objects, the interpreter's insides
    "inspect", "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace",
    "sys.setprofile", "sys.call_tracing", "sys.monitoring", "threading.settrace", "threading.setprofile",
    "threading.settrace_all_threads", "threading.setprofile_all_threads", "gc.get_referrers",
    "gc.get_referents", "gc.get_objects", "types.FunctionType", "types.LambdaType", "types.CodeType",
    "types.CellType", "ctypes", "_ctypes", "cffi",
    # other processes
    "subprocess", "_posixsubprocess", "pty", "posix", "nt", "os.system", "os.popen", "os.fork", "os.forkpty",
    "os.startfile", "os.exec*", "os.spawn*", "os.posix_spawn*",
    # IPython's shell and the grading machinery (the bounds checks of Triton's interpreter among it)
    "IPython", "ipykernel", "course_utils.exercises", "course_teacher", "course_utils.triton_bounds",
    "torch.overrides.TorchFunctionMode", "torch.utils._python_dispatch.TorchDispatchMode",
    # allowed in some calls only (see CALLS)
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.hasattr", "torch.load",
    "torch.serialization.load", "numpy.load", "timeit",
)
#: The entries of DYNAMIC that some calls may use (getattr with a constant attribute name,
#: torch.load with weights_only=True, timeit given a function): importing them is no finding, a use
#: other than those calls is. The module ``timeit`` itself is no finding, its functions are.
CALLS = frozenset({"getattr", "setattr", "delattr", "hasattr", "torch.load", "torch.serialization.load", "numpy.load",
                   "timeit"})
#: Under DYNAMIC's "IPython", what a notebook may use.
IPYTHON_ALLOWED = ("IPython.display", "IPython.core.display")
#: Attributes that reach code objects, namespaces or frames (on any object), and the names the
#: grader's review note named already (the grading machinery, tracers).
DYNAMIC_ATTRIBUTES = frozenset({
    "__dict__", "__code__", "__globals__", "__builtins__", "__closure__", "__defaults__", "__kwdefaults__",
    "__subclasses__", "__getattribute__", "__getattr__", "__self__", "__loader__", "__spec__", "__import__",
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
    "gi_code", "cr_code",
    "settrace", "setprofile", "_getframe", "get_referrers", "EXERCISES", "Sandbox", "_Watch",
    "TorchFunctionMode", "TorchDispatchMode",
})
#: Bare names that reach the interpreter's namespaces whatever they are bound to.
DYNAMIC_NAMES = frozenset({"__builtins__", "__loader__", "__spec__"})
#: Packages a notebook may import besides the standard library (anything else may be a file the
#: notebook wrote: REVIEW).
KNOWN_PACKAGES = frozenset({
    "torch", "torchvision", "torchaudio", "functorch", "numpy", "scipy", "pandas", "matplotlib", "mpl_toolkits",
    "mplfonts", "seaborn", "sklearn", "sympy", "einops", "opt_einsum", "tqdm", "PIL", "IPython", "ipywidgets",
    "ipykernel", "course_utils", "course_teacher", "jupytext", "nbformat", "typing_extensions", "triton",
})
#: Magics that run no code of the notebook's (or only in the browser).
SAFE_MAGICS = frozenset({
    "matplotlib", "config", "precision", "pwd", "who", "whos", "who_ls", "lsmagic", "magic", "quickref",
    "history", "xmode", "colors", "pprint", "pinfo", "pinfo2", "pdef", "pdoc", "psource", "page", "autoreload",
    "html", "markdown", "latex", "svg", "javascript", "js",
})
#: Magics whose text is Python code: read as code.
CODE_MAGICS = frozenset({"time", "timeit", "prun", "capture"})

#: The review's name for reading IPython's history (what a look displayed stays in ``Out``, ``_``, ...).
HISTORY = "IPython's output history (`Out`, `_`)"
#: The names IPython binds to its output and input history: ``Out``, ``_oh``, ``_``, ``__``, ``___``,
#: ``_<n>``; ``In``, ``_ih``, ``_i``, ``_ii``, ``_iii``, ``_i<n>``. Reading one is HISTORY.
_HISTORY_NAMES = re.compile(r"Out|In|_oh|_ih|_{1,3}|_i{1,3}|_i?[0-9]+")

#: What may receive a look's result, besides a course function and the result's own Tensor methods:
#: these builtins (``print`` without ``file=``), IPython's ``display``, the public functions of these
#: torch modules (none in place, ``name_``; no ``out=``; not ``save`` / ``load``) and of pyplot.
LOOK_BUILTINS = frozenset({"builtins.print", "builtins.repr", "builtins.str", "builtins.len"})
LOOK_DISPLAY = frozenset({"IPython.display.display", "IPython.core.display.display",
                          "IPython.core.display_functions.display"})
LOOK_MODULES = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft",
                          "matplotlib.pyplot"})

#: The allow-list: everything a learner's own code names must be on it, or the notebook goes to the
#: teacher's review ("not allowed"), whether DYNAMIC names it or not: code the scan was never told
#: about is not trusted. A qualified name is on it when it falls under ALLOWED (a module stands for
#: everything in it), under no DENIED entry, and none of its parts after the first is private (``_x``,
#: or a dunder but SAFE_DUNDERS): ``torch._softmax``, ``torch._C.DisableTorchFunction``,
#: ``torch.ops.aten._scaled_dot_product_attention_math``, ``threading.Thread`` are not. A builtin is on
#: it when it is in SAFE_BUILTINS (or is ``getattr``/``hasattr``/``setattr``/``delattr`` with a
#: constant name, whose attribute is then judged as any other). An attribute of an object the scan
#: cannot name (a call's result, a parameter) is on it unless it is private; of the learner's own
#: objects (``self`` in their classes' methods, their functions) any attribute is theirs. A ``match``
#: statement's class pattern reads attributes by name, out of sight: never on it.
ALLOWED = (
    "torch", "numpy", "math", "cmath", "random", "statistics", "itertools", "functools", "operator", "collections",
    "typing", "dataclasses", "enum", "abc", "numbers", "fractions", "decimal", "copy", "string", "re", "json",
    "textwrap", "pprint", "time", "timeit", "warnings", "contextlib", "io", "matplotlib", "mpl_toolkits", "mplfonts", "einops",
    "ipywidgets", "IPython.display", "IPython.core.display", "course_utils", "tqdm", "PIL", "scipy", "pandas",
    "seaborn", "sklearn", "sympy", "opt_einsum",
    # Triton, for lesson 09's kernels: only what writing a kernel needs. Why that is safe, and only so:
    # the grader's sandbox has no GPU, so a kernel runs only in Triton's interpreter, and only
    # course_utils.triton_setup.load() can switch that on (lesson 09's setup cell and course_utils.
    # flash_triton call it; os.environ, %env and triton.knobs are not on this list). The interpreter
    # turns pointers into raw addresses of the kernel's process: unchecked, a tl.load at a computed
    # address would read any of its memory and a tl.store overwrite the results being collected, as
    # ctypes would. load() installs course_utils.triton_bounds whenever it switches the interpreter
    # on: every address a load, store or atomic operation leaves unmasked is checked against the
    # tensors passed to that launch, and the rest refused before any memory is touched. What stays out, by ALLOWED_EXACT and DENIED below: the
    # compiler, the runtime (the interpreter itself and its C module, the launcher, the autotuner's
    # benchmarks), triton.tools, triton.knobs, inline assembly and external (libdevice) calls, the
    # language's submodules (core and semantic build any operation by hand) and every private name.
    "triton.jit", "triton.cdiv", "triton.next_power_of_2", "triton.language",
)
#: Names allowed themselves but not what is under them: ``import triton`` binds the package, from
#: which only ALLOWED's ``triton.*`` entries may be read.
ALLOWED_EXACT = frozenset({"triton"})
#: Under ALLOWED, what is not: operators by their registered names and the machinery that defines
#: them or compiles Python out of the watcher's sight, threads and processes, C.
DENIED = (
    "torch.ops", "torch.library", "torch.overrides", "torch.jit", "torch.compile", "torch.compiler", "torch.export",
    "torch.fx", "torch.package", "torch.hub", "torch.multiprocessing", "torch.distributed", "torch.utils.cpp_extension",
    "torch.cuda.jiterator", "numpy.ctypeslib", "numpy.f2py",
    "triton.language.core", "triton.language.semantic", "triton.language.standard", "triton.language.math",
    "triton.language.random", "triton.language.extra", "triton.language.target_info",
    "triton.language.inline_asm_elementwise", "triton.language.map_elementwise", "triton.language.tensor",
    "triton.language.aggregate_replace",
)
#: Dunders a learner's code may name on any object (``super().__init__()``, a module's ``__version__``).
SAFE_DUNDERS = frozenset({"__init__", "__name__", "__doc__", "__version__", "__len__", "__call__", "__repr__",
                          "__str__", "__iter__", "__next__", "__getitem__", "__contains__", "__eq__", "__hash__"})
#: The builtins a learner's code may name: none reaches code, a namespace or another thread.
SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod", "complex",
    "dict", "dir", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "id", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "open", "ord",
    "pow", "print", "property", "range", "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod", "str",
    "sum", "super", "tuple", "type", "zip", "None", "True", "False", "NotImplemented", "Ellipsis", "__name__",
    "__doc__", *(name for name, value in vars(builtins).items() if isinstance(value, type)
                  and issubclass(value, BaseException)),  # the exceptions, to raise and to catch
})

#: How much work reading a notebook may take: VISITS_PER_NODE visits of each node of its syntax trees
#: (and VISITS_BASE), in all. The course's own notebooks take at most 0.72 a node; past the limit it is
#: for the teacher's review ("too complex"), so that no cell can make the scan run for long.
VISITS_PER_NODE, VISITS_BASE = 40, 100_000

#: How deeply a cell's syntax tree may nest (a long ``a + b + ...`` nests once per term): deeper is
#: no code a learner writes, and the scan, which recurses, reads no deeper (REVIEW: "nesting").
MAX_DEPTH = 100

UNKNOWN = "?"  # a value the scan cannot name: a call's result, a parameter, a constant
OWN = "<own>"  # a function or class the notebook defines, or something of it
_MARKERS = frozenset({UNKNOWN, OWN})
_MISSING = object()
_BUILTINS = frozenset(dir(builtins))
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SPLICED = "_scan_spliced"  # set on a statement a magic's code gave (%time, %timeit, ...)


# ----------------------------------------------------------------------------- the result

class Hit(NamedTuple):
    cell: int  # the cell's number in the notebook, from 1
    line: str  # its first line
    name: str  # the forbidden name as the exercise lists it, or the construct (a DYNAMIC entry, ...)
    code: str  # the code that reaches it, shortened


class Verdict(NamedTuple):
    mistake: str  # FORBIDDEN or REVIEW
    hits: tuple  # the Hits that say why


@dataclass(frozen=True)
class Findings:
    """What scores 0: per exercise, its forbidden references; for the whole notebook, the code the
    scan cannot read. Hits are sorted by cell, name, code; one per cell and name."""

    forbidden: dict = field(default_factory=dict)  # {exercise id: (Hit, ...)}, only those with a hit
    review: tuple = ()  # (Hit, ...)

    def verdict(self, exercise):
        """Verdict(FORBIDDEN, its hits) when `exercise` reaches a forbidden name, else
        Verdict(REVIEW, the notebook's review hits) when there are any, else None."""
        if self.forbidden.get(exercise):
            return Verdict(FORBIDDEN, self.forbidden[exercise])
        if self.review:
            return Verdict(REVIEW, self.review)
        return None

    def __bool__(self):
        return bool(self.forbidden or self.review)


class Target(NamedTuple):
    """An exercise as the scan sees it."""

    id: str
    cell: int  # the Cell.index of its exercise cell in the submission, or None
    forbidden: tuple  # the names it forbids, as the registry writes them
    function: str = None  # the name of the learner's function (else: every name its cell binds)


def targets(submission, exercises):
    """[Target] for a read Submission and its lesson's exercises (key.Exercise: the answer key's
    plan): where each exercise's cell is, and what it forbids."""
    from .submission import exercise_cell

    found = []
    for exercise in exercises:
        cell, _ = exercise_cell(submission, exercise)
        found.append(Target(exercise.id, cell.index if cell is not None else None, tuple(exercise.forbidden),
                            exercise.function))
    return found


# ----------------------------------------------------------------------------- names and objects

class _Objects:
    """Qualified names → the objects of modules already loaded in this process, read with
    ``inspect.getattr_static`` (no property, no ``__getattr__``, nothing imported, no code run)."""

    def __init__(self):
        self._cache = {}

    def lookup(self, name):
        """(object or _MISSING, canonical name: each module reached is named by its own name)."""
        if name not in self._cache:
            self._cache[name] = self._lookup(name)
        return self._cache[name]

    @staticmethod
    def _lookup(name):
        parts = name.split(".")
        if not all(part.isidentifier() for part in parts):
            return _MISSING, name
        for split in range(len(parts), 0, -1):
            found = sys.modules.get(".".join(parts[:split]))
            if found is not None:
                break
        else:
            return _MISSING, name
        canonical = _module_name(found, ".".join(parts[:split]))
        for at, part in enumerate(parts[split:], start=split):
            try:
                found = inspect.getattr_static(found, part, _MISSING)
            except Exception:  # noqa: BLE001 (an odd object: then it is not known)
                found = _MISSING
            if found is _MISSING:
                return _MISSING, ".".join([canonical] + parts[at:])
            canonical = _module_name(found, None) or f"{canonical}.{part}"
        return found, canonical


def _module_name(found, default):
    if isinstance(found, types.ModuleType):
        name = vars(found).get("__name__")
        return name if isinstance(name, str) else default
    return default


def _under(name, prefix):
    if prefix.endswith("*"):
        return name.startswith(prefix[:-1])
    return name == prefix or name.startswith(prefix + ".")


class _Rule:
    """One forbidden name of one exercise."""

    def __init__(self, exercise, name, objects):
        self.exercise, self.name = exercise, name
        head, _, rest = name.partition(".")
        self.method = rest if head == "Tensor" else None  # Tensor.x: matched by attribute name
        head = {"Tensor": "torch.Tensor", "F": "torch.nn.functional"}.get(head, head)
        self.qual = f"{head}.{rest}" if rest else head
        # the registry resolved it already; for a hand-made list, import what it names (trusted);
        # a name that names nothing is matched by its text
        with contextlib.suppress(Exception):
            from course_utils.exercises.sandbox import resolve

            resolve(name)
        self.obj, self.canonical = objects.lookup(self.qual)
        parent, _, self.last = self.qual.rpartition(".")
        parent_obj, _ = objects.lookup(parent) if parent else (_MISSING, "")
        if parent_obj is not _MISSING:
            is_class = inspect.isclass(parent_obj)
        else:  # a module not loaded: a class is Capitalised
            is_class = parent.rpartition(".")[2][:1].isupper()
        self.owner = parent if is_class and not self.method else None  # a method of a class: the class
        torch = sys.modules.get("torch")
        tensor_op = (self.qual.startswith("torch.") and self.owner is None and torch is not None
                     and inspect.getattr_static(torch.Tensor, self.last, _MISSING) is not _MISSING)
        self.generic = bool(self.method) or tensor_op
        # the name an attribute on an unknown object is judged by (none for tensor operations)
        self.word = None if self.generic else (self.owner.rpartition(".")[2] if self.owner else self.last)
        self.module = None if self.owner else parent  # the module a star import would take it from
        self.usable = self.obj is not _MISSING and (callable(self.obj) or inspect.isclass(self.obj))

    def matches(self, name, objects):
        """Whether the qualified name `name` is (or reaches) this forbidden name."""
        obj, canonical = objects.lookup(name)
        if {name, canonical} & {self.qual, self.canonical}:
            return True
        if self.owner and {name, canonical} & {self.owner, objects.lookup(self.owner)[1]}:
            return True
        if obj is _MISSING or not self.usable:
            return False
        if obj is self.obj:
            return True
        if self.owner and inspect.isclass(obj):  # a subclass that inherits the method
            try:
                return inspect.getattr_static(obj, self.last, _MISSING) is self.obj
            except Exception:  # noqa: BLE001
                return False
        return False

    def star(self, module, objects):
        """Whether ``from module import *`` takes this forbidden name (or its class)."""
        if self.method:
            return False
        wanted = self.owner or self.qual
        home = wanted.rpartition(".")[0]
        found, canonical = objects.lookup(module)
        if {module, canonical} & {home, objects.lookup(home)[1]}:
            return True
        if not isinstance(found, types.ModuleType) or not self.usable:
            return False
        target = objects.lookup(wanted)[0]
        exported = vars(found).get("__all__")
        names = exported if isinstance(exported, (list, tuple)) else [n for n in vars(found) if not n.startswith("_")]
        return any(isinstance(n, str) and vars(found).get(n, _MISSING) is target for n in names)


# ----------------------------------------------------------------------------- IPython's magics

def _magic(call):
    """(method, [constant string arguments or None]) when `call` is IPython's rewrite of a magic or a
    shell escape, ``get_ipython().run_line_magic("timeit", "...")``; else None."""
    if not isinstance(call, ast.Call):
        return None
    function = call.func
    if (isinstance(function, ast.Attribute) and isinstance(function.value, ast.Call)
            and isinstance(function.value.func, ast.Name) and function.value.func.id == "get_ipython"
            and not function.value.args and not function.value.keywords):
        arguments = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in call.args]
        return function.attr, arguments
    return None


def _magic_name(method, arguments):
    """("%name" / "%%name" / "!", name) of a magic call, or (None, None) for another method."""
    if method in ("system", "getoutput"):
        return "!", None
    if method == "run_line_magic" and arguments and arguments[0]:
        return "%" + arguments[0], arguments[0]
    if method == "run_cell_magic" and arguments and arguments[0]:
        return "%%" + arguments[0], arguments[0]
    if method == "magic" and arguments and arguments[0]:
        name = arguments[0].lstrip("%").split(" ", 1)[0]
        return "%" + name, name
    return None, None


_OPTION_VALUE = re.compile(r"[\w.:/-]+")


def _after_options(line):
    """The code after a magic's leading options (``-n 10 -r 3 f(x)``: ``f(x)``), or None when the
    options hold anything but plain words."""
    rest = line.strip()
    while rest.startswith("-"):
        option, _, rest = rest.partition(" ")
        rest = rest.strip()
        if not _OPTION_VALUE.fullmatch(option):
            return None
        if rest.startswith("-") or _parses(rest):
            continue
        value, _, rest = rest.partition(" ")  # the option's value
        rest = rest.strip()
        if not _OPTION_VALUE.fullmatch(value):
            return None
    return rest


def _parses(text):
    return isinstance(parse(text), ast.AST)


def _magic_code(call):
    """The parsed code a CODE_MAGICS call runs (an ast.Module), or None (another call, or code that
    does not parse)."""
    found = _magic(call)
    if not found:
        return None
    method, arguments = found
    _, name = _magic_name(method, arguments)
    if name not in CODE_MAGICS or method not in ("run_line_magic", "run_cell_magic") or None in arguments[:3]:
        return None
    line = arguments[1] if len(arguments) > 1 else ""
    if method == "run_line_magic":
        texts = [_after_options(line) if name in ("timeit", "prun") else line]
    elif name == "capture":  # the line is options and a variable's name
        texts = [None if not re.fullmatch(r"[\w\s-]*", line) else "", arguments[2] if len(arguments) > 2 else ""]
    else:
        setup = _after_options(line) if name in ("timeit", "prun") else line
        texts = [setup, arguments[2] if len(arguments) > 2 else ""]
    if None in texts:
        return None
    trees = [parse(text) for text in texts]
    if not all(isinstance(tree, ast.AST) and _depth(tree) <= MAX_DEPTH for tree in trees):
        return None
    return ast.Module(body=[s for tree in trees for s in _copy(tree).body], type_ignores=[])


class _Splice(ast.NodeTransformer):
    """Put the code of %time, %timeit, %prun and %%capture in place of the magic's call."""

    def visit_Expr(self, node):
        code = _magic_code(node.value)
        if code is None:
            return self.generic_visit(node)
        body = []
        for statement in code.body:
            done = self.visit(statement)
            body.extend(done if isinstance(done, list) else [done] if done is not None else [])
        for statement in body:
            setattr(statement, _SPLICED, True)  # the magic runs it, not the cell: never a look
        return body or ast.Pass()

    def visit_Call(self, node):
        code = _magic_code(node)
        if code is not None and len(code.body) == 1 and isinstance(code.body[0], ast.Expr):
            return self.visit(code.body[0].value)
        return self.generic_visit(node)


def _tree(source):
    """The cell's syntax tree with the magics' code spliced in (None when it does not parse, or nests
    deeper than MAX_DEPTH): parse's own tree, shared and never changed, unless there was code to splice."""
    tree = parse(source)
    if not isinstance(tree, ast.AST) or _depth(tree) > MAX_DEPTH:
        return None
    if "%" in source and any(_magic_code(node) is not None for node in ast.walk(tree)):
        return _Splice().visit(_copy(tree))
    return tree


def _depth(tree):
    """How deeply the tree nests (counted without recursing)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _copy(tree):
    """A copy of a syntax tree (made without recursing)."""
    root = type(tree)()
    stack = [(tree, root)]
    while stack:
        old, new = stack.pop()
        for name in old._attributes + (_SPLICED,):
            if hasattr(old, name):
                setattr(new, name, getattr(old, name))
        for name, value in ast.iter_fields(old):
            if isinstance(value, list):
                copied = []
                for item in value:
                    if isinstance(item, ast.AST):
                        copied.append(type(item)())
                        stack.append((item, copied[-1]))
                    else:
                        copied.append(item)
                setattr(new, name, copied)
            elif isinstance(value, ast.AST):
                setattr(new, name, type(value)())
                stack.append((value, getattr(new, name)))
            else:
                setattr(new, name, value)
    return root


@functools.lru_cache(maxsize=4096)
def _keys(source):
    """What tells a top-level statement of the cell from another: its syntax tree, without positions."""
    tree = _tree(source)
    return tuple(ast.dump(statement) for statement in tree.body) if tree is not None else ()


# ----------------------------------------------------------------------------- following names

class _Now:
    """The notebook's global names as its cells run, statement after statement."""

    kind = "module"

    def __init__(self, analysis):
        self.a = analysis

    @property
    def pos(self):
        return self.a.module.pos

    def lookup(self, name):
        self.a.used(name)
        return self.a.module.now(name)

    def bind(self, name, values, strong):
        self.a.module.bind(name, values, strong)
        self.a.binders[name].add(id(self.a.top))


class _From:
    """The global names as a function defined at `pos` sees them when it runs: any value bound from
    `pos` on."""

    kind = "module"

    def __init__(self, analysis, pos):
        self.a, self.pos = analysis, pos

    def lookup(self, name):
        self.a.used(name)
        return self.a.module.since(name, self.pos)

    def bind(self, name, values, strong):  # `global name` in a function, a walrus in a generator
        self.a.sticky[name] |= values
        self.a.binders[name].add(id(self.a.top))


class _Local:
    """A function's, class's or comprehension's names: every value each one is bound to, anywhere
    in the body (a function runs in any order)."""

    def __init__(self, analysis, parent, kind, names=(), globals_=(), nonlocals=()):
        self.a, self.parent, self.kind = analysis, parent, kind
        self.names, self.globals, self.nonlocals = set(names), set(globals_), set(nonlocals)
        self.values = defaultdict(set)
        self.plain = False  # a class deriving from the learner's own classes, object or nn.Module only

    @property
    def pos(self):
        return self.parent.pos

    def lookup(self, name):
        if name in self.globals:
            return _From(self.a, self.pos).lookup(name)
        if name in self.names and name not in self.nonlocals:
            return frozenset(self.values.get(name) or {UNKNOWN})
        return self.parent.lookup(name)

    def bind(self, name, values, strong):
        if name in self.globals:
            _From(self.a, self.pos).bind(name, values, strong)
        elif name in self.nonlocals:
            scope = self.parent
            while isinstance(scope, _Local) and (scope.kind != "function" or name not in scope.names):
                scope = scope.parent
            if isinstance(scope, _Local):
                scope.bind(name, values, strong)
        else:
            self.values[name] |= values


class _ModuleState:
    def __init__(self, analysis, star):
        self.a = analysis
        self.pos = 0
        self.current = {}
        self.events = defaultdict(list)  # name -> [(pos, values bound then)]
        self.star = star  # modules star-imported anywhere

    def _fallback(self, name):
        values = {f"{module}.{name}" for module in self.star}
        if name in _BUILTINS:
            values.add(f"builtins.{name}")
        return values or {UNKNOWN}

    def _extra(self, name):
        return self.a.sticky.get(name, set()) | {f"{module}.{name}" for module in self.star}

    def now(self, name):
        values = self.current.get(name)
        return frozenset((values if values is not None else self._fallback(name)) | self._extra(name))

    def since(self, name, pos):
        then, later = None, set()
        for at, values in self.events.get(name, ()):
            if at <= pos:
                then = values
            else:
                later |= values
        return frozenset((then if then is not None else self._fallback(name)) | later | self._extra(name))

    def bind(self, name, values, strong):
        values = frozenset(values)
        if not strong:
            values |= self.current.get(name) or frozenset(self._fallback(name))
        self.current[name] = values
        self.events[name].append((self.pos, values))


def _join(base, attribute):
    return base if base in _MARKERS else f"{base}.{attribute}"


def _bound(body):
    """(names a function's or class's body binds, its global names, its nonlocal names)."""
    names, globals_, nonlocals = set(), set(), set()
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, _COMPREHENSIONS):
            names.update(n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr)
                         and isinstance(n.target, ast.Name))
            continue
        if isinstance(node, ast.Global):
            globals_.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            nonlocals.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        stack.extend(ast.iter_child_nodes(node))
    return names - globals_ - nonlocals, globals_, nonlocals


class _TooComplex(Exception):
    """Reading the notebook would take more than its budget (_Analysis.budget)."""


class _Analysis:
    """Every Name, Attribute and ``getattr(x, "constant")`` of the notebook, with the qualified names
    it may stand for; what each top-level statement binds and reads at the global level."""

    def __init__(self, statements, objects):
        self.objects = objects
        # work done, counted: linear in the notebook's size by construction, and bounded here
        self.visits = 0
        self.budget = VISITS_PER_NODE * sum(1 for s in statements for _ in ast.walk(s)) + VISITS_BASE
        star = set()
        for statement in statements:
            for node in ast.walk(statement):
                if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) and not node.level:
                    star.add(node.module)
        self.sticky = defaultdict(set)
        for _ in range(3):  # again while a function's `global` adds values the last round did not know
            before = {k: set(v) for k, v in self.sticky.items()}
            self._round(statements, frozenset(star))
            if {k: v for k, v in self.sticky.items() if v} == {k: v for k, v in before.items() if v}:
                break

    def _round(self, statements, star):
        self.refs = defaultdict(set)  # id(node) -> qualified names (and markers) it may stand for
        self.bases = {}  # id(node) -> the values of the object an attribute is read from
        self.attrs = {}  # id(node) -> the attribute's name (Attribute, getattr/setattr/... with a constant)
        self.stores = []  # (id(top), node, base values): attributes assigned or deleted
        self.safe = set()  # id(function node) of the calls a DYNAMIC entry allows
        self.uses = defaultdict(set)  # id(top) -> global names it reads
        self.binders = defaultdict(set)  # name -> id(top) of the statements binding it at the global level
        self.pending = []
        self.module = _ModuleState(self, star)
        self.final = True
        for statement in statements:
            self.top = statement
            self.module.pos += 1
            self._statement(statement, _Now(self), strong=True)
        while self.pending:
            node, parent, top, method = self.pending.pop(0)
            self.top = top
            self._function(node, parent, method)

    def used(self, name):
        self.uses[id(self.top)].add(name)

    # ------------------------------------------------------------------ statements

    def _statements(self, body, scope, strong=False):
        for statement in body:
            self._statement(statement, scope, strong)

    def _count(self):
        self.visits += 1
        if self.visits > self.budget:
            raise _TooComplex()

    def _statement(self, node, scope, strong):  # one case per kind of statement
        self._count()
        expr = self._expr
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                expr(d, scope)
            self._arguments(node.args, scope)
            expr(node.returns, scope)
            scope.bind(node.name, {OWN}, strong)
            self._defer(node, scope)
        elif isinstance(node, ast.ClassDef):
            for e in node.decorator_list + [k.value for k in node.keywords]:
                expr(e, scope)
            bases = [expr(b, scope) for b in node.bases]
            self._class(node, scope, all(self._plain(b) for b in bases) and not node.keywords)
            scope.bind(node.name, {OWN}, strong)
        elif isinstance(node, ast.Assign):
            values, items = self._value(node.value, scope)
            for target in node.targets:
                self._assign(target, values, scope, strong, items)
        elif isinstance(node, ast.AugAssign):
            values = expr(node.value, scope)
            if isinstance(node.target, ast.Name):
                scope.lookup(node.target.id)
                scope.bind(node.target.id, values | {UNKNOWN}, False)
            else:
                expr(node.target, scope)
        elif isinstance(node, ast.AnnAssign):
            expr(node.annotation, scope)
            if node.value is not None:
                values, items = self._value(node.value, scope)
                self._assign(node.target, values, scope, strong, items)
            elif not isinstance(node.target, ast.Name):
                expr(node.target, scope)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._assign(node.target, expr(node.iter, scope) | {UNKNOWN}, scope, False)
            self._statements(node.body + node.orelse, scope)
        elif isinstance(node, (ast.While, ast.If)):
            expr(node.test, scope)
            self._statements(node.body + node.orelse, scope)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                values = expr(item.context_expr, scope)
                if item.optional_vars is not None:
                    self._assign(item.optional_vars, values | {UNKNOWN}, scope, False)
            self._statements(node.body, scope)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._statements(node.body, scope)
            for handler in node.handlers:
                expr(handler.type, scope)
                if handler.name:
                    scope.bind(handler.name, {UNKNOWN}, False)
                self._statements(handler.body, scope)
            self._statements(node.orelse + node.finalbody, scope)
        elif isinstance(node, ast.Match):
            expr(node.subject, scope)
            for case in node.cases:
                self._pattern(case.pattern, scope)
                expr(case.guard, scope)
                self._statements(case.body, scope)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope.bind(alias.asname, {alias.name}, strong)
                else:
                    top = alias.name.split(".")[0]
                    scope.bind(top, {top}, strong)
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name != "*":
                    scope.bind(alias.asname or alias.name, {f"{module}.{alias.name}"}, strong)
        elif isinstance(node, (ast.Global, ast.Nonlocal, ast.Pass, ast.Break, ast.Continue)):
            pass
        else:  # Expr, Return, Delete, Raise, Assert, ...
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    expr(child, scope)
                elif isinstance(child, ast.stmt):
                    self._statement(child, scope, False)

    def _pattern(self, pattern, scope):
        for node in ast.walk(pattern):
            if isinstance(node, ast.MatchValue):
                self._expr(node.value, scope)
            elif isinstance(node, ast.MatchClass):
                self._expr(node.cls, scope)
            elif isinstance(node, ast.MatchMapping):
                for key in node.keys:
                    self._expr(key, scope)
                if node.rest:
                    scope.bind(node.rest, {UNKNOWN}, False)
            if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                scope.bind(node.name, {UNKNOWN}, False)

    def _value(self, node, scope):
        """(values, [values of each item] for a tuple or list display, else None)."""
        if isinstance(node, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in node.elts):
            items = [self._expr(e, scope) for e in node.elts]
            return frozenset().union(*items) | {UNKNOWN}, items
        return self._expr(node, scope), None

    def _assign(self, target, values, scope, strong, items=None):
        if isinstance(target, ast.Name):
            scope.bind(target.id, values, strong)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if items is not None and len(items) == len(target.elts) and not any(
                    isinstance(e, ast.Starred) for e in target.elts):
                for element, item in zip(target.elts, items):
                    self._assign(element, item, scope, strong)
            else:
                for element in target.elts:
                    self._assign(element, values | {UNKNOWN}, scope, strong)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, values | {UNKNOWN}, scope, strong)
        else:  # an attribute or an item: read what it belongs to
            self._expr(target, scope)

    def _arguments(self, arguments, scope):
        for default in arguments.defaults + [d for d in arguments.kw_defaults if d is not None]:
            self._expr(default, scope)
        for argument in self._parameters(arguments):
            self._expr(argument.annotation, scope)

    @staticmethod
    def _parameters(arguments):
        found = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
        return found + [a for a in (arguments.vararg, arguments.kwarg) if a is not None]

    def _function_parent(self, scope):
        while isinstance(scope, _Local) and scope.kind == "class":
            scope = scope.parent
        return _From(self, scope.pos) if isinstance(scope, _Now) else scope

    def _defer(self, node, scope):
        if self.final:
            method = isinstance(scope, _Local) and scope.kind == "class" and scope.plain
            self.pending.append((node, self._function_parent(scope), self.top, method))

    def _plain(self, values):
        """Whether a base class is the learner's own, object or nn.Module: then `self` in its methods
        is the learner's object (an attribute of it is no course function)."""
        torch = sys.modules.get("torch")
        plain = (object,) + ((torch.nn.Module,) if torch is not None else ())
        return all(v == OWN or (v != UNKNOWN and self.objects.lookup(v)[0] in plain) for v in values)

    def _function(self, node, parent, method=False):
        parameters = [a.arg for a in self._parameters(node.args)]
        if isinstance(node, ast.Lambda):
            names, globals_, nonlocals = set(parameters), set(), set()
        else:
            names, globals_, nonlocals = _bound(node.body)
            names |= set(parameters)
        scope = _Local(self, parent, "function", names, globals_, nonlocals)
        for name in parameters:
            scope.values[name].add(UNKNOWN)
        plain_first = method and not isinstance(node, ast.Lambda) and not node.decorator_list
        if plain_first and (node.args.posonlyargs or node.args.args):
            first = (node.args.posonlyargs + node.args.args)[0].arg
            scope.values[first] = {OWN}  # self: the learner's own object
        outer = self.final
        for round_ in (0, 1):  # twice: a name's values may come from a line further down
            self.final = outer and round_ == 1
            if isinstance(node, ast.Lambda):
                self._expr(node.body, scope)
            else:
                self._statements(node.body, scope)
        self.final = outer

    def _class(self, node, scope, plain=False):
        # Once, in order, as a class body runs (its methods are deferred: they run in any order). Twice
        # at every level, nested classes cost 2**depth: 34 of them stalled the grader.
        names, globals_, nonlocals = _bound(node.body)
        inside = _Local(self, scope, "class", names, globals_, nonlocals)
        inside.plain = plain
        self._statements(node.body, inside)

    # ------------------------------------------------------------------ expressions

    def _ref(self, node, values):
        self.refs[id(node)] |= values

    def _expr(self, node, scope):  # one case per kind of expression
        self._count()
        if node is None:
            return frozenset({UNKNOWN})
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                values = scope.lookup(node.id)
                self._ref(node, values)
                return values
            return frozenset({UNKNOWN})
        if isinstance(node, ast.Attribute):
            base = self._expr(node.value, scope)
            values = frozenset(_join(b, node.attr) for b in base)
            self.bases[id(node)], self.attrs[id(node)] = base, node.attr
            if isinstance(node.ctx, ast.Load):
                self._ref(node, values)
            else:
                self.stores.append((id(self.top), node, base))
            return values
        if isinstance(node, ast.Call):
            function = self._expr(node.func, scope)
            arguments = [self._expr(a, scope) for a in node.args]
            keywords = {k.arg: self._expr(k.value, scope) for k in node.keywords}
            return self._call(node, function, arguments, keywords)
        if isinstance(node, ast.IfExp):
            self._expr(node.test, scope)
            return self._expr(node.body, scope) | self._expr(node.orelse, scope)
        if isinstance(node, ast.BoolOp):
            return frozenset().union(*(self._expr(v, scope) for v in node.values))
        if isinstance(node, ast.NamedExpr):
            values = self._expr(node.value, scope)
            target = scope
            while isinstance(target, _Local) and target.kind == "comprehension":
                target = target.parent
            target.bind(node.target.id, values, False)
            return values
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return frozenset().union(*(self._expr(e, scope) for e in node.elts)) | {UNKNOWN}
        if isinstance(node, ast.Dict):
            parts = [self._expr(e, scope) for e in node.keys + node.values if e is not None]
            return frozenset().union(*parts) | {UNKNOWN}
        if isinstance(node, ast.Subscript):
            base = self._expr(node.value, scope)
            self._expr(node.slice, scope)
            return base | {UNKNOWN}
        if isinstance(node, ast.Starred):
            return self._expr(node.value, scope)
        if isinstance(node, ast.Lambda):
            self._arguments(node.args, scope)
            self._defer(node, scope)
            return frozenset({OWN})
        if isinstance(node, _COMPREHENSIONS):
            return self._comprehension(node, scope) | {UNKNOWN}
        if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
            return self._expr(node.value, scope) | {UNKNOWN}
        for child in ast.iter_child_nodes(node):  # constants, operators, f-strings, slices, ...
            if isinstance(child, ast.expr):
                self._expr(child, scope)
        return frozenset({UNKNOWN})

    def _comprehension(self, node, scope):
        generators = node.generators
        first = self._expr(generators[0].iter, scope)
        parent = _From(self, scope.pos) if isinstance(node, ast.GeneratorExp) and isinstance(scope, _Now) else scope
        names = {n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        inside = _Local(self, parent, "comprehension", names)
        for at, generator in enumerate(generators):
            values = first if at == 0 else self._expr(generator.iter, inside)
            self._assign(generator.target, values | {UNKNOWN}, inside, False)
            for condition in generator.ifs:
                self._expr(condition, inside)
        if isinstance(node, ast.DictComp):
            return self._expr(node.key, inside) | self._expr(node.value, inside)
        return self._expr(node.elt, inside)

    def _canonical(self, values):
        return {self.objects.lookup(v)[1] for v in values if v not in _MARKERS}

    def _call(self, node, function, arguments, keywords):
        names = self._canonical(function)
        accessors = names & {"builtins.getattr", "builtins.hasattr", "builtins.setattr", "builtins.delattr"}
        if (accessors and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and not any(isinstance(a, ast.Starred) for a in node.args[:2])):
            self.safe.add(id(node.func))
            attribute, base = node.args[1].value, arguments[0]
            self.attrs[id(node)], self.bases[id(node)] = attribute, base
            values = frozenset(_join(b, attribute) for b in base)
            if accessors & {"builtins.setattr", "builtins.delattr"}:
                self.stores.append((id(self.top), node, base))
            if "builtins.getattr" in accessors:
                self._ref(node, values)
                return values | (arguments[2] if len(arguments) > 2 else frozenset())
            return frozenset({UNKNOWN})
        if names and all(n in ("torch.load", "torch.serialization.load") for n in names):
            weights_only = next((k for k in node.keywords if k.arg == "weights_only"), None)
            value = weights_only.value if weights_only is not None else None
            if isinstance(value, ast.Constant) and value.value is True:
                self.safe.add(id(node.func))
        elif names and all(n == "numpy.load" for n in names):
            pickle = next((k for k in node.keywords if k.arg == "allow_pickle"), None)
            if not any(k.arg is None for k in node.keywords) and len(node.args) < 3 and (
                    pickle is None or (isinstance(pickle.value, ast.Constant) and pickle.value.value is False)):
                self.safe.add(id(node.func))
        elif names and all(n in ("timeit.timeit", "timeit.repeat", "timeit.Timer") for n in names):
            given = [(node.args[i] if i < len(node.args) else None, i) for i in (0, 1)]
            given = [a if a is not None else next((k.value for k in node.keywords if k.arg == key), None)
                     for (a, _), key in zip(given, ("stmt", "setup"))]
            plain = not any(isinstance(a, ast.Starred) for a in node.args) and all(k.arg for k in node.keywords)
            if plain and all(a is None or self._callable(a) for a in given):
                self.safe.add(id(node.func))
        return frozenset({UNKNOWN})

    def _callable(self, node):
        """Whether timeit's stmt or setup is a function (not text to run)."""
        if isinstance(node, ast.Lambda):
            return True
        values = self.refs.get(id(node))
        return bool(values) and UNKNOWN not in values and isinstance(node, (ast.Name, ast.Attribute))


# ----------------------------------------------------------------------------- the scan

@dataclass
class _Cell:
    cell: object  # submission.Cell
    tree: ast.Module
    learner: bool
    own: list  # its top-level statements that are the learner's (not word for word the course's)

    @property
    def where(self):
        return self.cell.where


def scan(cells, course_cells, exercises):
    """Findings for a submission's code `cells` (submission.Cell: index, source), the course's own
    code cells' texts `course_cells` (stripped, as ``submission.plan`` gives them) and the lesson's
    `exercises`: Targets, or tuples (exercise id, the Cell.index of its exercise cell or None, its
    forbidden names[, its function's name])."""
    objects = _Objects()
    course_cells = {text.strip() for text in course_cells}
    course_statements = {key for text in course_cells for key in _keys(text)}

    read, seen, deep = [], set(), []
    for cell in sorted(cells, key=lambda c: c.index):
        tree = _tree(cell.source)
        if tree is None:
            parsed = parse(cell.source)
            if isinstance(parsed, ast.AST) and cell.source.strip() not in course_cells:
                deep.append(cell)  # it parses, but nests too deeply to read
            continue
        if id(tree) in seen:  # a cell of the same text: a tree of its own (the scan tells nodes by id)
            tree = _copy(tree)
        seen.add(id(tree))
        learner = cell.source.strip() not in course_cells
        keys = _keys(cell.source) if learner else ()
        own = [s for s, key in zip(tree.body, keys) if key not in course_statements]
        read.append(_Cell(cell, tree, learner, own))
    statements = [s for c in read for s in c.tree.body]
    try:
        analysis = _Analysis(statements, objects)
    except _TooComplex:  # code written to make reading it slow: the teacher reads it
        first = next((c for c in read if c.own), None) or (read[0] if read else None)
        if first is None:
            return Findings()
        number, line = first.where
        return Findings(review=(Hit(number, line, "too complex", "more work to read than any lesson's code "
                                                                 f"({VISITS_PER_NODE}× its size)"),))
    owner = {id(s): c for c in read for s in c.tree.body}
    own_statements = [s for c in read for s in c.own]

    exercises = [Target(*e) for e in exercises]
    rules = [_Rule(e.id, name, objects) for e in exercises for name in e.forbidden]
    everywhere = [r for r in rules if not r.generic]

    forbidden = defaultdict(dict)  # exercise -> {(cell number, name): Hit}

    def hit(rule, statement, code):
        c = owner[id(statement)]
        number, line = c.where
        forbidden[rule.exercise].setdefault((number, rule.name), Hit(number, line, rule.name, code))

    references = {id(s): list(_references(s, analysis)) for s in own_statements}
    looks = {id(s): _Look(s, analysis, objects) for s in own_statements}
    for statement in own_statements:
        _match(everywhere, statement, references[id(statement)], analysis, objects, hit, looks[id(statement)])
    for exercise in exercises:
        generic = [r for r in rules if r.generic and r.exercise == exercise.id]
        if generic:
            for statement in _reached(exercise, read, analysis):
                _match(generic, statement, references[id(statement)], analysis, objects, hit, looks[id(statement)])

    review = {}
    for cell in deep:
        number, line = cell.where
        review[(number, "nesting")] = Hit(number, line, "nesting", f"deeper than {MAX_DEPTH} levels")
    for statement in own_statements:
        c = owner[id(statement)]
        number, line = c.where
        for name, code in _dynamic(statement, references[id(statement)], analysis, objects):
            review.setdefault((number, name), Hit(number, line, name, code))

    return Findings(
        forbidden={e: tuple(sorted(hits.values())) for e, hits in sorted(forbidden.items()) if hits},
        review=tuple(sorted(review.values())),
    )


def _callees(statement):
    """{id(function node): its call}, to show a call whole."""
    return {id(node.func): node for node in ast.walk(statement) if isinstance(node, ast.Call)}


def _short(node, callees=None):
    node = (callees or {}).get(id(node), node)
    try:
        text = " ".join(ast.unparse(node).split())
    except Exception:  # noqa: BLE001
        text = type(node).__name__
    return text if len(text) <= 60 else text[:59] + "…"


def _position(node):
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _references(statement, analysis):
    """(node, values, attribute name, base values) for every reference in a statement, in source order."""
    found = []
    for node in ast.walk(statement):
        key = id(node)
        if key in analysis.refs or key in analysis.attrs:
            found.append((node, analysis.refs.get(key, frozenset()), analysis.attrs.get(key), analysis.bases.get(key)))
    found.sort(key=lambda item: _position(item[0]))
    return found


def _imports(statement):
    """(import node, qualified name imported, is a star import) for every import in a statement."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name, False
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                yield node, node.module if alias.name == "*" else f"{node.module}.{alias.name}", alias.name == "*"


_PLAIN = (ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List,
          ast.expr_context, ast.operator, ast.unaryop)  # with ast.Name: what a look's call may be given
_SHOWN = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Tuple, ast.List, ast.FormattedValue,
          ast.JoinedStr)  # what a look's result may go through on its way (arithmetic, displays, f-strings)


class _Look:
    """A learner's top-level statement that may be a *look*: an expression statement at the cell's
    top level (not from a magic's code), with no walrus in it. `only_looks(reference)` says whether a
    forbidden reference in it is the function of a call that only shows its result (see the
    module's docstring)."""

    def __init__(self, statement, analysis, objects):
        self.statement, self.a, self.objects = statement, analysis, objects
        self.parents = {}
        self.ok = (isinstance(statement, ast.Expr) and not getattr(statement, _SPLICED, False)
                   and not any(isinstance(n, ast.NamedExpr) for n in ast.walk(statement)))
        if self.ok:
            for node in ast.walk(statement):
                for child in ast.iter_child_nodes(node):
                    self.parents[id(child)] = node

    def only_looks(self, reference):
        """Whether `reference` (a forbidden name's node in the statement) is the function of a call
        given only constants, names, attributes, subscripts and arithmetic of them, whose result goes
        only to calls that show it (through arithmetic, subscripts, the result's Tensor methods)."""
        call = self.parents.get(id(reference))
        if not self.ok or not isinstance(call, ast.Call) or call.func is not reference:
            return False
        given = [reference] + call.args + [k.value for k in call.keywords]
        if any(k.arg is None for k in call.keywords) or not all(self._plain(node) for node in given):
            return False
        child, parent = call, self.parents.get(id(call))
        while parent is not self.statement:
            if isinstance(parent, ast.Subscript) and parent.value is child:
                pass  # an item of the result
            elif isinstance(parent, ast.Attribute) and parent.value is child:
                if not _tensor_attribute(parent.attr):
                    return False
                above = self.parents.get(id(parent))
                if isinstance(above, ast.Call) and above.func is parent:  # a method of the result's
                    if not self._beside(above) or any(k.arg is None or k.arg == "out" for k in above.keywords):
                        return False
                    parent = above
            elif isinstance(parent, ast.keyword):
                if parent.arg is None:
                    return False
            elif isinstance(parent, ast.Call) and parent.func is not child:
                if not self._receives(parent):
                    return False
            elif not isinstance(parent, _SHOWN):
                return False
            child, parent = parent, self.parents.get(id(parent))
        return True

    def _own(self, node):
        """Whether a name stands for something the notebook defines (a function, a class)."""
        return isinstance(node, ast.Name) and OWN in self.a.refs.get(id(node), ())

    def _plain(self, node):
        return all((isinstance(n, ast.Name) and not self._own(n)) or isinstance(n, _PLAIN) for n in ast.walk(node))

    def _beside(self, call):
        """Whether nothing given to a call the result goes to is a lambda or the notebook's own
        function or class (which the call could hand the result to)."""
        given = call.args + [k.value for k in call.keywords]
        return not any(isinstance(n, ast.Lambda) or self._own(n) for node in given for n in ast.walk(node))

    def _receives(self, call):
        """Whether a call the result is given to only shows it: every value its function may have is
        a course function, a public function of LOOK_MODULES (none in place, no ``out=``, not
        ``save`` / ``load``), LOOK_BUILTINS (``print`` without ``file=``) or IPython's ``display``."""
        values = self.a.refs.get(id(call.func))
        keywords = {k.arg for k in call.keywords}
        if not values or not self._beside(call) or None in keywords or "out" in keywords:
            return False
        for value in values:
            if value == UNKNOWN and isinstance(call.func, ast.Name) and call.func.id == "display" and (
                    "display" not in self.a.binders):
                continue  # the display IPython gives every notebook (the learner binds no name display)
            if value in _MARKERS:
                return False
            name = self.objects.lookup(value)[1]
            if name in LOOK_BUILTINS or name in LOOK_DISPLAY:
                if name == "builtins.print" and "file" in keywords:
                    return False
                continue
            module, _, last = name.rpartition(".")
            if last.startswith("_") or last.endswith("_") or not self._module(module):
                return False
            if _under(name, "course_utils") and not _under(name, "course_utils.exercises"):
                continue
            if module not in LOOK_MODULES or name in ("torch.save", "torch.load"):
                return False
        return True

    def _module(self, name):
        """Whether `name` is a module (not a class: ``EncoderLayer.register_buffer`` may store what it
        is given); a name not loaded is a module unless Capitalised."""
        found = self.objects.lookup(name)[0]
        if found is not _MISSING:
            return isinstance(found, types.ModuleType)
        return not name.rpartition(".")[2][:1].isupper()


def _tensor_attribute(name):
    """Whether `name` is a public attribute of torch.Tensor (a method or a property)."""
    torch = sys.modules.get("torch")
    return (torch is not None and not name.startswith("_")
            and inspect.getattr_static(torch.Tensor, name, _MISSING) is not _MISSING)


def _match(rules, statement, references, analysis, objects, hit, look=None):
    """Hit every reference of `statement` to a name of `rules`; but an exercise's references in a
    look (`look`: the statement's _Look) that are all calls it only looks at are no hit."""
    callees = _callees(statement)
    for node, qualified, is_star in _imports(statement):
        for rule in rules:
            if rule.star(qualified, objects) if is_star else rule.matches(qualified, objects):
                hit(rule, statement, _short(node))
    counted = defaultdict(list)  # exercise -> [(rule, node)]
    for node, values, attribute, base in references:
        if id(node) not in analysis.refs:  # an attribute assigned, deleted or tested (hasattr): no read
            continue
        names = [v for v in values if v not in _MARKERS]
        named = False  # a node that is a forbidden function by name is not also a tensor method
        for rule in sorted(rules, key=lambda r: bool(r.method)):
            if rule.method:
                found = not named and (attribute == rule.method or rule.qual in names)
            else:
                found = any(rule.matches(n, objects) for n in names) or (
                    rule.word is not None and attribute == rule.word and base is not None and UNKNOWN in base)
                named |= found
            if found:
                counted[rule.exercise].append((rule, node))
    for items in counted.values():
        if look is not None and all(look.only_looks(node) for _, node in items):
            continue  # a look: its calls of the exercise's forbidden names only show a result
        for rule, node in items:
            hit(rule, statement, _short(node, callees))


def _reached(exercise, read, analysis):
    """The learner's statements a tensor-operation rule reads for an exercise: every statement of its
    own cell, and the statements binding a global name its function needs (its own name, when the
    exercise gives it, else every name its cell binds), then the names those statements read, and on."""
    cell = next((c for c in read if c.cell.index == exercise.cell), None)
    if cell is None:
        return []
    order = [s for c in read for s in c.own]  # notebook order
    own = {id(s) for s in order}
    binds = defaultdict(set)
    for name, keys in analysis.binders.items():
        for key in keys:
            binds[key].add(name)
    reached = {id(s) for s in cell.own}
    if exercise.function:
        needed = {exercise.function}
    else:
        needed = set().union(*(binds[id(s)] for s in cell.tree.body))
    done = set()
    while needed - done:
        name = min(needed - done)
        done.add(name)
        for key in analysis.binders.get(name, ()):
            if key in own:
                reached.add(key)
                needed |= analysis.uses.get(key, set())
    return [s for s in order if id(s) in reached]


def _label(name):
    """The DYNAMIC entry a canonical name falls under, as the review names it (None: not there)."""
    if _under(name, "IPython") and any(_under(name, allowed) for allowed in IPYTHON_ALLOWED):
        return None
    for entry in DYNAMIC:
        if entry == "builtins":
            if name == "builtins":
                return "builtins"
            continue
        if _under(name, entry):
            if entry == "timeit" and name == "timeit":
                continue
            if entry.endswith("*"):
                return ".".join(name.split(".")[:2])
            return entry.removeprefix("builtins.")
    return None


def _dynamic(statement, references, analysis, objects):
    """(construct, code) for what a learner's statement does that the scan cannot follow."""
    found = []
    callees = _callees(statement)
    exempt = set()  # get_ipython() calls of the magics already judged
    for node in ast.walk(statement):
        magic = _magic(node)
        if magic is None:
            continue
        exempt.add(id(node.func.value.func))
        label, name = _magic_name(*magic)
        if label is None:
            found.append((node, "get_ipython", _short(node)))
        elif name in SAFE_MAGICS or (name == "load_ext" and (magic[1][1:2] or [None])[0] == "autoreload"):
            continue
        else:
            arguments = magic[1]
            if label == "!":
                found.append((node, label, "!" + (arguments[0] or "")[:59] if arguments else "!"))
            else:
                text = arguments[1] if len(arguments) > 1 and arguments[1] is not None else ""
                found.append((node, label, (label + " " + text.split("\n")[0]).strip()[:60]))
    for node, qualified, is_star in _imports(statement):
        names = {qualified, objects.lookup(qualified)[1]}
        if isinstance(node, ast.ImportFrom):
            names |= {node.module, objects.lookup(node.module)[1]}
        labels = {_label(n) for n in names} - {None}
        labels = {label for label in labels if label not in CALLS or is_star}
        for label in sorted(labels):
            found.append((node, label, _short(node)))
        top = qualified.split(".")[0]
        if top not in sys.stdlib_module_names and top not in KNOWN_PACKAGES:
            found.append((node, "import", _short(node)))
    for node in ast.walk(statement):  # a Store or Del (``for _ in ...``, ``x, _ = ...``) is no read
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and _HISTORY_NAMES.fullmatch(node.id):
            found.append((node, HISTORY, _short(node)))
    for node, values, attribute, base in references:
        if isinstance(node, ast.Name):
            if node.id == "get_ipython" and id(node) not in exempt:
                found.append((node, "get_ipython", _short(node)))
            if node.id in DYNAMIC_NAMES:
                found.append((node, node.id, _short(node)))
        labels = set()
        if id(node) not in analysis.safe:
            for value in values:
                if value not in _MARKERS:
                    labels |= {_label(value), _label(objects.lookup(value)[1])}
            labels.discard(None)
        if not labels and attribute in DYNAMIC_ATTRIBUTES:
            labels = {attribute}
        for label in sorted(labels):
            found.append((node, label, _short(node, callees)))
    named = {id(node) for node, _, _ in found}
    found += [hit for hit in _unlisted(statement, references, analysis, objects) if id(hit[0]) not in named]
    named = {id(node) for node, _, _ in found}
    for top, node, base in analysis.stores:
        if top != id(statement) or id(node) in named:
            continue
        patched = [v for v in base if v not in _MARKERS and _patchable(objects.lookup(v)[0])]
        if patched:
            found.append((node, "assignment", _short(node)))
    found.sort(key=lambda item: _position(item[0]))
    return [(name, code) for _, name, code in found]


def _private(part):
    return part.startswith("_") and part not in SAFE_DUNDERS


def _unlisted_name(name):
    """The review's construct for a qualified name not on the allow-list (None: on it)."""
    parts = name.split(".")
    if parts[0] == "builtins":  # a safe builtin, or a public attribute of one (``dict.fromkeys``, ``str.join``)
        if len(parts) < 2 or parts[1] not in SAFE_BUILTINS:
            return f"builtin {parts[1] if len(parts) > 1 else 'builtins'}"
        return "private name" if any(_private(part) for part in parts[2:]) else None
    if any(_private(part) for part in parts[1:]) or _private(parts[0]):
        return "private name"
    if name in ALLOWED_EXACT:
        return None
    denied = next((entry for entry in DENIED if _under(name, entry)), None)
    if denied:
        return denied
    if not any(_under(name, entry) for entry in ALLOWED):
        return parts[0] if parts[0] else "relative import"
    return None


def _unlisted(statement, references, analysis, objects):
    """(node, construct, code) for what a learner's statement names that is not on the allow-list."""
    found = []
    callees = _callees(statement)
    for node, qualified, _ in _imports(statement):
        construct = _unlisted_name(qualified) or _unlisted_name(objects.lookup(qualified)[1])
        if construct:
            found.append((node, construct, _short(node)))
    for node in ast.walk(statement):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append((node, "relative import", _short(node)))
        elif isinstance(node, ast.MatchClass):
            found.append((node, "match class pattern", _short(node)))
    for node, values, attribute, base in references:
        constructs = set()
        if id(node) not in analysis.safe:  # getattr & co. with a constant name: judged by that name below
            for value in values - _MARKERS:
                constructs |= {_unlisted_name(value), _unlisted_name(objects.lookup(value)[1])}
        if attribute is not None and base and UNKNOWN in base and _private(attribute):
            constructs.add("private attribute")
        for construct in sorted(constructs - {None}):
            found.append((node, construct, _short(node, callees)))
    for top, node, base in analysis.stores:
        attribute = analysis.attrs.get(id(node))
        if top == id(statement) and attribute and UNKNOWN in base and _private(attribute):
            found.append((node, "private attribute", _short(node)))
    return found


def _patchable(found):
    """Whether assigning an attribute of this object changes code others call: a module, a class, a
    function (or something the scan cannot look into)."""
    return found is _MISSING or isinstance(found, (types.ModuleType, type)) or callable(found)
