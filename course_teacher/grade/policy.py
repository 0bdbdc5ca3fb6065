"""What a learner's exercise cell may reach, as tables a reviewer checks line by line, and `allowed`.

Threat model
------------
A submission is written by someone who wants full marks without solving. Whatever its cells name
runs in the grader's kernel, beside the check that calls the learner's function on hidden cases;
the kernel's watcher there (course_utils.exercises.sandbox) sees what a function calls, but runs
in the same process as the learner's code. Three routes to full marks without solving have been
walked by every red team, and each table below closes one of them:

- **Code the grader never reads.** Anything that turns text into code (``exec``, ``eval``,
  ``sympy.parse_expr``, ``PIL.ImageMath.unsafe_eval``, ``torch.utils.benchmark.Timer(stmt=...)``,
  ``pandas.eval``), loads a module by name (``plt.switch_backend("module://...")``, a backend
  named in ``rcParams``, ``opt_einsum``'s backends, unpickling), starts another process or thread
  (``torch.utils.collect_env.run``, ``matplotlib.testing``'s helpers, ``DataLoader(num_workers=...)``,
  ``threading``), or opens a file (``open``, numpy's loaders, ``torch.utils.model_zoo``) runs code
  that the scan did not read, out of the watcher's sight. A package is a bag of such entries, so
  the list is of modules and callables a lesson teaches, never of packages as a whole: ALLOWED,
  with DENIED carving out what sits inside an allowed module.
- **The reference under another name.** An exercise names what it forbids (``torch.softmax``); the
  same operation is reachable as another object (``torch.special.softmax``), inside a larger one
  (``F.scaled_dot_product_attention`` computes a softmax), or as the course's own function
  (``course_utils.tiled.online_softmax``). COMPUTES lists, for each forbidden operation, what else
  computes it: forbidding one forbids them all. (At run time the kernel refuses the aten
  operations themselves; this is the check a kernel cannot forge.)
- **Settings that name code.** A setting whose value is a module, a callable by name, text to evaluate or a
  program (matplotlib's ``rcParams["backend"] = "module://..."``, ``figure.hooks``; IPython's ``%config``, whose
  text is executed) loads code as surely as an import: RC_CODE, MATPLOTLIB_MAGIC and CONFIG_TRAITS say which
  settings an exercise cell may write, and only with a constant. A class that answers numpy's
  ``__array_interface__`` turns any address into an array (MEMORY_PROTOCOLS), as ctypes would.
- **Reading the hidden cases back.** The feedback carries the grader's words only: what the
  kernel reports about the world it changed is named from FIXED_CHANGES or generically.

Anything not on the list sends the notebook to the teacher (REVIEW): code the scan was never told
about is not trusted.
"""

import builtins
import re
import sys

#: What an exercise cell may name: a module stands for everything in it, unless DENIED says
#: otherwise; a name that is not a module (``io.StringIO``) for itself. Each line says why it is there.
ALLOWED = (
    "torch",  # the tensor API the lessons teach (DENIED below takes out what loads, compiles or runs code)
    "numpy",  # arrays beside tensors (not its file loaders: DENIED)
    "math", "cmath", "random", "statistics", "fractions", "decimal", "numbers",  # arithmetic
    "itertools", "functools", "operator", "collections", "copy",  # plain data and functions
    "typing", "dataclasses", "enum", "abc",  # the learner's own classes and annotations
    "string", "re", "textwrap", "pprint", "json", "warnings", "contextlib",  # text the learner formats
    "io.StringIO", "io.BytesIO",  # in-memory buffers only (not io.open, io.FileIO)
    "time", "timeit",  # timing (timeit only given a function: CALLS)
    "einops",  # rearrange(x, "b l (h d) -> b h l d"): its strings are patterns, never code
    "matplotlib.pyplot", "matplotlib.colors", "matplotlib.cm", "matplotlib.ticker", "matplotlib.patches",
    "matplotlib.figure", "matplotlib.axes", "mpl_toolkits.mplot3d",  # pictures (not backends: DENIED)
    "IPython.display.display", "IPython.display.Markdown", "IPython.display.HTML", "IPython.display.Math",
    "IPython.display.Latex", "IPython.core.display.display", "IPython.core.display_functions.display",
    "tqdm.tqdm", "tqdm.trange", "tqdm.auto.tqdm", "tqdm.auto.trange", "tqdm.notebook.tqdm",  # progress bars
    "course_utils",  # the course functions a lesson hands out (not the grading machinery: DENIED)
    # Triton, for lesson 09's kernels: only what writing a kernel needs. Why that is safe, and only so:
    # the grader's sandbox has no GPU, so a kernel runs only in Triton's interpreter, and only
    # course_utils.triton_setup.load() can switch that on (lesson 09's setup cell and course_utils.
    # flash_triton call it; os.environ, %env and triton.knobs are not on this list). The interpreter
    # turns pointers into raw addresses of the kernel's process: unchecked, a tl.load at a computed
    # address would read any of its memory and a tl.store overwrite the results being collected, as
    # ctypes would. load() installs course_utils.triton_bounds whenever it switches the interpreter
    # on: every address a load, store or atomic operation leaves unmasked is checked against the
    # tensors passed to that launch, and the rest refused before any memory is touched. What stays
    # out, by ALLOWED_EXACT and DENIED below: the compiler, the runtime (the interpreter itself and its
    # C module, the launcher, the autotuner's benchmarks), triton.tools, triton.knobs, inline assembly
    # and external (libdevice) calls, the language's submodules (core and semantic build any
    # operation by hand) and every private name.
    "triton.jit", "triton.cdiv", "triton.next_power_of_2", "triton.language",
)
#: Names allowed themselves but not what is under them: ``import triton`` binds the package, from
#: which only ALLOWED's ``triton.*`` entries may be read; ``import io`` / ``import tqdm`` the same.
ALLOWED_EXACT = frozenset({"triton", "io", "tqdm", "tqdm.auto", "tqdm.notebook", "matplotlib", "mpl_toolkits",
                           "IPython", "IPython.display", "IPython.core", "IPython.core.display",
                           "IPython.core.display_functions"})
#: Under ALLOWED, what is not. Each entry: what it would run that the scan never reads.
DENIED = (
    # operators by their registered names, and the machinery that defines them or compiles Python
    # out of the watcher's sight
    "torch.ops", "torch.library", "torch.overrides", "torch.jit", "torch.compile", "torch.compiler", "torch.export",
    "torch.fx", "torch.package", "torch.hub", "torch.utils.cpp_extension", "torch.cuda.jiterator",
    "torch.onnx", "torch.ao", "torch.quantization", "torch.classes", "torch.utils.bundled_inputs",
    "torch.utils.mobile_optimizer", "torch.utils.jit", "torch.utils.backend_registration",
    # profilers: their traces are files (lesson 07's FlopCounterMode, which writes none, stays)
    "torch.profiler", "torch.autograd.profiler",
    # other processes and threads
    "torch.multiprocessing", "torch.distributed", "torch.utils.collect_env", "torch.utils.data",
    "torch.utils.bottleneck", "torch.utils.benchmark",  # Timer(stmt="text") compiles its text
    "torch.utils.throughput_benchmark",
    # memory by address, out of any tensor's bounds (as ctypes)
    "numpy.lib.stride_tricks.as_strided",
    # files and the network (a file an earlier cell wrote, unpickled, runs code)
    "torch.utils.model_zoo", "torch.utils.tensorboard", "torch.utils.hipify", "torch.utils.show_pickle",
    "torch.utils.file_baton", "torch.save", "torch.serialization.save", "torch.from_file", "torch.UntypedStorage.from_file",
    "torch.TypedStorage.from_file", "torch.serialization.add_safe_globals", "torch.serialization.safe_globals",
    "torch.serialization.register_package",
    "numpy.ma.load", "numpy.ma.loads", "numpy.ma.dump", "numpy.ma.dumps", "numpy.rec.fromfile",
    "numpy.lookfor",  # imports every module it walks
    "numpy.lib.npyio", "numpy.lib.format", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile", "numpy.fromregex",
    "numpy.memmap", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "numpy.DataSource",
    "numpy.testing", "numpy.distutils", "numpy.ctypeslib", "numpy.f2py",
    # a backend or style named by text is a module imported
    "matplotlib.pyplot.switch_backend", "matplotlib.pyplot.savefig", "matplotlib.pyplot.imread",
    "matplotlib.pyplot.imsave", "matplotlib.figure.Figure.savefig",
    # the grading machinery, and the bounds checks of Triton's interpreter
    "course_utils.exercises", "course_utils.triton_bounds",
    # Triton's language submodules build any operation by hand
    "triton.language.core", "triton.language.semantic", "triton.language.standard", "triton.language.math",
    "triton.language.random", "triton.language.extra", "triton.language.target_info",
    "triton.language.inline_asm_elementwise", "triton.language.map_elementwise", "triton.language.tensor",
    "triton.language.aggregate_replace",
)
#: matplotlib's settings (``rcParams``) whose value names code to load, Python text to evaluate, a program to
#: start or a file: a module (``backend``: ``"module://..."``), callables by name (``figure.hooks``:
#: ``"module:function"``), text evaluated (``axes.prop_cycle``), LaTeX and Ghostscript runs (``text.usetex``,
#: ``pgf``, ``ps.usedistiller``), the animation writers' programs, the files of ``savefig``, a web server, GUI
#: toolkits. A key stands for itself and every key under it. An exercise cell writes (and reads) only keys named
#: by a constant and not here (``rcParams["figure.figsize"] = (4, 3)``); the rest goes to review (rcparams.py).
RC_CODE = ("backend", "backend_fallback", "figure.hooks", "axes.prop_cycle", "text.usetex", "text.latex", "pgf",
           "ps.usedistiller", "animation", "savefig", "webagg", "toolbar", "tk", "macosx")
#: The settings themselves (what ``plt.rcParams`` is, and the defaults ``plt.rcdefaults()`` puts back).
RC_PARAMS = frozenset({"matplotlib.rcParams", "matplotlib.rcParamsDefault", "matplotlib.rcParamsOrig",
                       "matplotlib.pyplot.rcParams", "matplotlib.pyplot.rcParamsDefault"})
#: The functions that write them from their arguments: read as the keys they write.
RC_FUNCTIONS = frozenset({"matplotlib.pyplot.rc", "matplotlib.pyplot.rc_context", "matplotlib.rc",
                          "matplotlib.rc_context"})
#: What a line magic's text may be, for the magics that run what their text names: ``%matplotlib module://x``
#: imports a module, ``%config`` executes its text (``exec("cfg." + line)``) in the notebook's namespace.
MATPLOTLIB_MAGIC = frozenset({"", "inline"})
CONFIG_TRAITS = frozenset({"InlineBackend.figure_format", "InlineBackend.figure_formats",
                           "InlineBackend.close_figures"})  # set only to a constant (str, number, bool, or a list of them)
#: Names that make an object a window on raw memory (numpy reads or writes the address such an attribute gives,
#: as ctypes would), and the hooks that answer any attribute name: a class of the learner's that binds one, or
#: a string constant that spells one, goes to review.
MEMORY_PROTOCOLS = frozenset({"__array_interface__", "__array_struct__", "__cuda_array_interface__"})
ANY_ATTRIBUTE = frozenset({"__getattr__", "__getattribute__"})

#: The names the grader's own commands in the notebook's kernel resolve there (``globals()``, the import machinery,
#: ``__builtins__``): a learner who binds one (``def __import__(...)``) would receive the grader's call, with the
#: path of the hidden cases and of the answer to forge. Any binding of one, anywhere, goes to review.
GRADER_NAMES = frozenset({"__import__", "globals", "__builtins__"})

#: Dunders a learner's code may name on any object (``super().__init__()``, a module's ``__version__``).
SAFE_DUNDERS = frozenset({"__init__", "__name__", "__doc__", "__version__", "__len__", "__call__", "__repr__",
                          "__str__", "__iter__", "__next__", "__getitem__", "__contains__", "__eq__", "__hash__"})
#: The builtins a learner's code may name: none reaches code, a namespace, a file or another thread
#: (``open`` is not here: a file an earlier cell wrote is data the scan never read).
SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod", "complex",
    "dict", "dir", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "id", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "ord",
    "pow", "print", "property", "range", "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod", "str",
    "sum", "super", "tuple", "type", "zip", "None", "True", "False", "NotImplemented", "Ellipsis", "__name__",
    "__doc__", *(name for name, value in vars(builtins).items() if isinstance(value, type)
                  and issubclass(value, BaseException)),  # the exceptions, to raise and to catch
})

#: What computes a forbidden operation under another name (another object, a larger operation that
#: contains it, the course's own function): an exercise that forbids any name of a group's first
#: tuple forbids every name of its second too. Spelt as the exercises spell their forbidden names.
_ATTENTION = ("F.scaled_dot_product_attention", "F.multi_head_attention_forward", "torch.nn.MultiheadAttention",
              "torch.nn.Transformer", "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
              "course_utils.attention.scaled_dot_product_attention")
COMPUTES = (
    (("torch.softmax", "F.softmax", "Tensor.softmax", "torch.special.softmax"),
     ("torch.softmax", "F.softmax", "Tensor.softmax", "torch.special.softmax", "torch.nn.Softmax", "F.softmin",
      "torch.nn.Softmin", "course_utils.tiled.online_softmax", "course_utils.masks.masked_softmax",
      "course_utils.flash_triton.softmax_rows", *_ATTENTION)),
    (("torch.log_softmax", "F.log_softmax", "Tensor.log_softmax", "torch.special.log_softmax"),
     ("torch.log_softmax", "F.log_softmax", "Tensor.log_softmax", "torch.special.log_softmax", "torch.nn.LogSoftmax")),
    (("torch.logsumexp", "Tensor.logsumexp", "torch.special.logsumexp"),
     ("torch.logsumexp", "Tensor.logsumexp", "torch.special.logsumexp")),
    (("F.scaled_dot_product_attention", "course_utils.attention.scaled_dot_product_attention"), _ATTENTION),
)


def also_forbidden(names):
    """The forbidden names `names` (an exercise's, as the registry spells them) with everything
    COMPUTES says computes one of them, in order, each once."""
    found = list(names)
    for spelt, others in COMPUTES:
        if set(spelt) & set(names):
            found += others
    return tuple(dict.fromkeys(found))


#: The only names a verdict may give for what the learner's code changed in the kernel (the
#: watcher restored it): anything else is "a torch attribute", so that no name the learner's code
#: chose (``torch.leak_<a hidden input>``) reaches the feedback.
FIXED_CHANGES = frozenset({
    f"torch.{name}" for name in ("softmax", "log_softmax", "logsumexp", "exp", "matmul", "bmm", "mm", "einsum",
                                 "tensordot", "transpose", "permute", "reshape", "cat", "stack", "where",
                                 "tril", "triu", "ones", "zeros", "arange", "randn", "sum", "max", "Tensor")
} | {f"torch.nn.functional.{name}" for name in ("softmax", "log_softmax", "scaled_dot_product_attention", "linear",
                                                 "layer_norm", "multi_head_attention_forward", "dropout")}
  | {f"torch.Tensor.{name}" for name in ("softmax", "log_softmax", "logsumexp", "exp", "matmul", "__matmul__",
                                          "transpose", "permute", "reshape", "view", "T", "mT", "t", "sum", "max")})

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
    # the grading machinery (the bounds checks of Triton's interpreter among it)
    "course_utils.exercises", "course_teacher", "course_utils.triton_bounds",
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
#: Attributes that reach code objects, namespaces or frames (on any object), and the names the
#: grader's review note named already (the grading machinery, tracers).
DYNAMIC_ATTRIBUTES = frozenset({
    "__dict__", "__code__", "__globals__", "__builtins__", "__closure__", "__defaults__", "__kwdefaults__",
    "__subclasses__", "__getattribute__", "__getattr__", "__self__", "__loader__", "__spec__", "__import__",
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
    "gi_code", "cr_code",
    "settrace", "setprofile", "_getframe", "get_referrers", "EXERCISES", "Sandbox", "_Watch",
    "tofile", "dump",  # numpy's ndarray.tofile and .dump (a pickle) write files, on any array however it was made
    "TorchFunctionMode", "TorchDispatchMode",
})
#: Bare names that reach the interpreter's namespaces whatever they are bound to.
DYNAMIC_NAMES = frozenset({"__builtins__", "__loader__", "__spec__"})
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
HISTORY_NAMES = re.compile(r"Out|In|_oh|_ih|_{1,3}|_i{1,3}|_i?[0-9]+")

#: What may receive a look's result, besides a course function and the result's own Tensor methods:
#: these builtins (``print`` without ``file=``), IPython's ``display``, the public functions of these
#: torch modules (none in place, ``name_``; no ``out=``; not ``save`` / ``load``) and of pyplot.
LOOK_BUILTINS = frozenset({"builtins.print", "builtins.repr", "builtins.str", "builtins.len"})
LOOK_DISPLAY = frozenset({"IPython.display.display", "IPython.core.display.display",
                          "IPython.core.display_functions.display"})
LOOK_MODULES = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft",
                          "matplotlib.pyplot"})

#: How much work reading a notebook may take: VISITS_PER_NODE visits of each node of its syntax trees
#: (and VISITS_BASE), in all. The course's own notebooks take at most 0.72 a node; past the limit it is
#: for the teacher's review ("too complex"), so that no cell can make the scan run for long.
VISITS_PER_NODE, VISITS_BASE = 40, 100_000

#: How deeply a cell's syntax tree may nest (a long ``a + b + ...`` nests once per term): deeper is
#: no code a learner writes, and the scan, which recurses, reads no deeper (REVIEW: "nesting").
MAX_DEPTH = 100

def under(name, prefix):
    """Whether the qualified name `name` is `prefix` or under it (``prefix*``: starts so)."""
    if prefix.endswith("*"):
        return name.startswith(prefix[:-1])
    return name == prefix or name.startswith(prefix + ".")


def private(part):
    """Whether one part of a qualified name is private (``_x``, a dunder not in SAFE_DUNDERS)."""
    return part.startswith("_") and part not in SAFE_DUNDERS


def named_construct(name):
    """The DYNAMIC entry a canonical name falls under, as the review names it (None: not there)."""
    for entry in DYNAMIC:
        if entry == "builtins":
            if name == "builtins":
                return "builtins"
            continue
        if under(name, entry):
            if entry == "timeit" and name == "timeit":
                continue
            if entry.endswith("*"):
                return ".".join(name.split(".")[:2])
            return entry.removeprefix("builtins.")
    return None


def refusal(name):
    """Why the qualified name `name` is not on the allow-list, as the review names it (None: it is)."""
    parts = name.split(".")
    if parts[0] == "builtins":  # a safe builtin, or a public attribute of one (``dict.fromkeys``, ``str.join``)
        if len(parts) < 2 or parts[1] not in SAFE_BUILTINS:
            return f"builtin {parts[1] if len(parts) > 1 else 'builtins'}"
        return "private name" if any(private(part) for part in parts[2:]) else None
    if any(private(part) for part in parts[1:]) or private(parts[0]):
        return "private name"
    if name in ALLOWED_EXACT:
        return None
    denied = next((entry for entry in DENIED if under(name, entry)), None)
    if denied:
        return denied
    if not any(under(name, entry) for entry in ALLOWED):
        return parts[0] if parts[0] else "relative import"
    return None


def allowed(name):
    """Whether an exercise cell may name the qualified name `name` (``torch.nn.functional.softmax``,
    ``builtins.len``)."""
    return refusal(name) is None


def importable(top):
    """Whether a top-level module may be imported at all: Python's own, or a root of ALLOWED (any
    other may be a file the notebook wrote)."""
    return top in sys.stdlib_module_names or top in {entry.split(".")[0] for entry in ALLOWED}
