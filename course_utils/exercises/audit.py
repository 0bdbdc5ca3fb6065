"""One thread, no text evaluators, no processes: what a learner's function may not do while a check runs it.

Python raises an audit event before it turns text into code (``compile``: ``eval``, ``exec`` and every
library that parses text into Python on top of them), starts a process, loads a C library, opens a socket,
changes the tracer or imports a module; one hook (``sys.addaudithook``, installed when this module is
imported, and which nothing can remove) sees them all, whatever name reached them. While no check runs
it returns at its first line. While a ``Guard`` is entered, the events that rules.REFUSED_EVENTS lists are
refused in the check's thread (and in any thread that was not alive when the guard was entered): the hook
records the refusal, then raises ``Refused`` (a BaseException, so an ``except Exception`` does not hide it;
the record stays even when a bare ``except`` catches it).

Triton's interpreter and the GPU compiler's front end compile a kernel's source themselves: an event is let
through when the first frame that raised it, past the standard library's, is Triton's own code (a code
object of a loaded ``triton`` module or of the course's ``triton_*`` modules, known by identity).

Python 3.11 raises no audit event when a thread starts, so the guard replaces ``_thread.start_new_thread``
(and ``threading``'s copy of it) for the call, and after the call compares the threads and child processes
alive with those before: one more fails the check (THREAD, PROCESS).
"""

import _thread
import os
import sys
import sysconfig
import threading
import types

from . import rules

_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_HERE = __file__
_get_ident, _getframe, _current_frames = _thread.get_ident, sys._getframe, sys._current_frames
_start_new_thread, _start_new = _thread.start_new_thread, _thread.start_new
_threading_start = threading._start_new_thread
_TRITON_MODULES = ("course_utils.triton_bounds", "course_utils.triton_compile", "course_utils.triton_launches",
                   "course_utils.triton_setup")
_BOOTSTRAP = "<frozen importlib._bootstrap>"
_IMPORTERS = ("torch", "numpy", "triton", "course_utils")  # whose code may load a module on first use

_decided = {}  # event name -> its refusal code (rules.event_code) or None
_UNDECIDED = object()
_active = [None]  # the Guard entered now, or None: the hook's first (and, outside a check, only) read


class Refused(BaseException):
    """What a refused operation raises inside the learner's function (the check's verdict names it)."""


class ThreadRefused(RuntimeError):
    """What starting a thread raises: an Exception, which threading.Thread.start cleans up after (its
    bookkeeping would keep a thread that never started); the refusal is recorded all the same."""


class Guard:
    """``with Guard(found): function(*args)``: refusals recorded in `found` as [code, detail] pairs."""

    def __init__(self, found, stop=None):
        self.found, self.stop = found, stop  # stop: the code of the frame that calls the learner's function
        self.thread = None
        self.before = frozenset()
        self.children = frozenset()

    def __enter__(self):
        self.thread, self.before, self.children = _get_ident(), frozenset(_current_frames()), _children()
        _first_finder()
        _thread.start_new_thread = _thread.start_new = threading._start_new_thread = self._thread
        _active[0] = self
        return self

    def __exit__(self, *exc):
        _active[0] = None
        if self.thread is None:  # never entered
            return False
        _thread.start_new_thread, _thread.start_new, threading._start_new_thread = \
            _start_new_thread, _start_new, _threading_start
        if sys.meta_path[:1] != [_FINDER]:  # the learner's code moved or removed it: put back, and refused
            self.refuse("UNWATCHED", "meta_path")
            _first_finder()
        if frozenset(_current_frames()) - self.before:
            self.refuse("THREAD", "threading")
        if _children() - self.children:
            self.refuse("PROCESS", "child")
        return False

    def refuse(self, code, detail):
        if [code, detail] not in self.found:
            self.found.append([code, detail])

    def _thread(self, *args, **kwargs):
        self.refuse("THREAD", "threading")
        raise ThreadRefused("thread")

    def applies(self):
        """Whether the running thread is watched: the check's, or one that started during the call."""
        ident = _get_ident()
        return ident == self.thread or ident not in self.before


def attribute_writes():
    """How many ``object.__setattr__`` audit events Python has raised since import: CPython raises one
    whenever a function's ``__code__``, ``__defaults__`` or ``__kwdefaults__`` is set, by whatever route
    (the sandbox reads the course's functions again only when this changed)."""
    return _writes[0]


_writes = [0]


def _hook(event, args, _active=_active, _writes=_writes):  # (bound now: at exit, the module's globals are gone)
    if event == "object.__setattr__":
        _writes[0] += 1
    guard = _active[0]
    if guard is None:
        return
    code = _decided.get(event, _UNDECIDED)
    if code is _UNDECIDED:  # decided once per event name: trace functions raise events by the thousand
        code = _decided[event] = rules.event_code(event) if type(event) is str else None
    if code is None or not guard.applies():
        return
    if code == "IMPORT" and (rules.importable(str(args[0])) or _origin(guard, importer=True)):
        return
    if code != "IMPORT" and _origin(guard):
        return
    prefix = next(prefix for prefix, c in rules.REFUSED_EVENTS if c == code and (
        event == prefix or event.startswith(prefix)))
    guard.refuse(code, prefix)
    raise Refused(prefix)


def _importing(frame, stop):
    """Whether the import system is loading a module between `frame` and the call of the learner's function
    (`stop`): a frame of importlib's ``_find_and_load``, which every import passes (the ``import`` statement,
    ``__import__``, ``importlib.import_module``) and where the finder below decided on the module. A loader
    called directly (``spec_from_file_location`` then ``exec_module``, ``importlib.reload``) does not pass it:
    that is a file turned into code, refused as ``exec`` is."""
    while frame is not None and frame.f_code is not stop:
        if frame.f_code.co_name == "_find_and_load" and frame.f_code.co_filename == _BOOTSTRAP:
            return True
        frame = frame.f_back
    return False


class _Finder:
    """First on ``sys.meta_path``: the import system asks it before loading any module, whatever route asked
    for it (``importlib.import_module`` raises no audit event). It finds nothing; while a guard applies, it
    refuses a module outside rules.IMPORTS that the learner's code (not a library's) asked for."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        guard = _active[0]
        if guard is None or not guard.applies() or rules.importable(name):
            return None
        frame = _getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            frame = frame.f_back  # from the frame that asked for the import, as the audit event sees it
        if _origin(guard, importer=True, frame=frame):
            return None
        guard.refuse("IMPORT", "import")
        raise Refused("import")


_FINDER = _Finder()


def _origin(guard, importer=False, frame=None):
    """Whether the code that raised the event is Triton's own (or, for an import, a library's that loads its
    modules on first use): the first frame past the standard library's and this module's decides."""
    frame = _getframe(2) if frame is None else frame
    if _importing(frame, guard.stop):
        return True  # a module being loaded (its .pyc read, its code run): the import event decided on it
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if name != _HERE and not name.startswith(_STDLIB) and not name.startswith("<frozen"):
            break
        frame = frame.f_back
    if frame is None:
        return False
    if importer:
        module = frame.f_globals.get("__name__")
        return type(module) is str and module.partition(".")[0] in _IMPORTERS and _defined_in(frame, module)
    return is_triton(frame)


def _defined_in(frame, module):
    """The frame runs code of `module` with that module's own globals (not a function made to look so)."""
    loaded = sys.modules.get(module)
    return loaded is not None and vars(loaded) is frame.f_globals


def is_triton(frame):
    """Whether `frame` runs Triton's own code (or the course's triton_* modules'): one of their code objects, or
    (for a function the course wrapped, whose code only a closure still holds) code from one of their files
    run with that module's own globals."""
    if id(frame.f_code) in _triton_codes():
        return True
    module = frame.f_globals.get("__name__")
    if type(module) is not str or not (module.partition(".")[0] == "triton" or module in _TRITON_MODULES):
        return False
    loaded = sys.modules.get(module)
    return loaded is not None and vars(loaded) is frame.f_globals and \
        getattr(loaded, "__file__", None) == frame.f_code.co_filename


_codes = [0, {}, -1]  # (how many Triton modules were walked, {id(code): code}, len(sys.modules) then)


def _triton_codes():
    """{id: code} of every code object of Triton's loaded modules and the course's triton_* modules."""
    # asked at every torch operation inside a launch: the modules are listed again only when their count moved
    # (one module swapped for another at the same count leaves codes out: fewer frames are Triton's, fail closed)
    if len(sys.modules) == _codes[2]:
        return _codes[1]
    names = [n for n in list(sys.modules) if n == "triton" or n.startswith("triton.") or n in _TRITON_MODULES]
    if len(names) != _codes[0]:
        found = {}
        for name in names:
            module = sys.modules.get(name)
            if module is not None:
                for value in list(vars(module).values()):
                    _walk(value, found, 0)
        _codes[:2] = [len(names), found]
    _codes[2] = len(sys.modules)
    return _codes[1]


def _walk(value, found, depth):
    if depth > 3:
        return
    if isinstance(value, types.CodeType):
        if id(value) not in found:
            found[id(value)] = value
            for const in value.co_consts:
                if isinstance(const, types.CodeType):
                    _walk(const, found, depth)
        return
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        for part in (value.fget, value.fset, value.fdel):
            _walk(part, found, depth + 1)
        return
    if isinstance(value, types.FunctionType):
        _walk(value.__code__, found, depth)
        wrapped = getattr(value, "__wrapped__", None)
        if wrapped is not None:
            _walk(wrapped, found, depth + 1)
        return
    if isinstance(value, type) and value.__module__.startswith(("triton", "course_utils.triton_")):
        for item in list(vars(value).values()):
            _walk(item, found, depth + 1)


def _children():
    """The process ids of this process's children (Linux; elsewhere nothing, and no child is seen)."""
    found = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children", encoding="ascii") as file:
                found.update(file.read().split())
    except OSError:
        pass
    return frozenset(found)


def _first_finder():
    while _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    sys.meta_path.insert(0, _FINDER)


sys.addaudithook(_hook)
_first_finder()
