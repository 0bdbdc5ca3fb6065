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
they are when it runs: the scan takes every value the name has from the function's definition on, as
the grader runs the notebook: a cell it never runs (a check cell, ``check("00.padding_mask", ...)``,
but for an exercise's own cell) binds its names for its own lines only, so a learner's own ``class
check`` that their function calls stays theirs after the course's check cell imports the course's.
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
- an import of a module that is neither in Python's standard library nor a root of policy.ALLOWED: it
  may be a file the notebook wrote;
- IPython: ``!cmd`` and every magic but ``SAFE_MAGICS``; ``%time``, ``%timeit``, ``%prun`` and
  ``%%capture`` (``CODE_MAGICS``) run Python code, which is read as code (and is ``REVIEW`` when it
  cannot be); ``get_ipython()`` otherwise;
- ``HISTORY``, reading IPython's output history (where a look's result stays): a load of ``Out``,
  ``_oh``, ``_``, ``__``, ``___``, ``_<n>`` and of the input history ``In``, ``_ih``, ``_i``, ``_ii``,
  ``_iii``, ``_i<n>``, anywhere in a learner's cell (``for _ in range(3)``, ``x, _ = f()`` store it: fine);
- a cell that nests deeper than ``MAX_DEPTH`` (construct ``nesting``);
- settings that name code (rcparams.py): matplotlib's ``rcParams`` touched where the key is not read
  (``dict.update(plt.rcParams, ...)``, a computed key) or at a key of ``RC_CODE`` (``backend``,
  ``figure.hooks``), ``%matplotlib`` with a backend, ``%config`` but to show a setting or give
  ``CONFIG_TRAITS`` a constant, ``%history -f``; a class binding numpy's ``__array_interface__`` (memory by
  address) or ``__getattr__``;
- a binding of a name the grader's own commands resolve in the notebook (``GRADER_NAMES``: ``def
  __import__``, ``globals = ...``): it would receive the grader's call, with the hidden cases' path.

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

import ast
import contextlib
import inspect
import sys
import types
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from .names import MARKERS, MISSING, OWN, SPLICED, UNKNOWN, Analysis, Objects, TooComplex, copy_tree, magic_call, \
    magic_name, read_tree, statement_keys
from .policy import (CALLS, DYNAMIC_ATTRIBUTES, DYNAMIC_NAMES, GRADER_NAMES, HISTORY, HISTORY_NAMES, LOOK_BUILTINS,
                     LOOK_DISPLAY, LOOK_MODULES, MAX_DEPTH, SAFE_MAGICS, VISITS_BASE, VISITS_PER_NODE, also_forbidden, importable,
                     named_construct, private, refusal, under)
from course_utils.exercises import rules as run_time_rules

from . import rcparams
from .submission import checked, parse

FORBIDDEN = "FORBIDDEN"
REVIEW = "REVIEW"

__all__ = ["FORBIDDEN", "REVIEW", "HISTORY", "MAX_DEPTH", "VISITS_BASE", "Findings", "Hit", "Target", "Verdict",
           "scan", "targets"]


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
        parent_obj, _ = objects.lookup(parent) if parent else (MISSING, "")
        if parent_obj is not MISSING:
            is_class = inspect.isclass(parent_obj)
        else:  # a module not loaded: a class is Capitalised
            is_class = parent.rpartition(".")[2][:1].isupper()
        self.owner = parent if is_class and not self.method else None  # a method of a class: the class
        torch = sys.modules.get("torch")
        tensor_op = (self.qual.startswith("torch.") and self.owner is None and torch is not None
                     and inspect.getattr_static(torch.Tensor, self.last, MISSING) is not MISSING)
        self.generic = bool(self.method) or tensor_op
        # the name an attribute on an unknown object is judged by (none for tensor operations)
        self.word = None if self.generic else (self.owner.rpartition(".")[2] if self.owner else self.last)
        if self.word is not None and _tensor_attribute(self.word):  # ``a.device`` is the tensor's, not
            self.word = None  # course_utils.triton_setup.device: a tensor's attribute is no course function
        self.module = None if self.owner else parent  # the module a star import would take it from
        self.usable = self.obj is not MISSING and (callable(self.obj) or inspect.isclass(self.obj))

    def matches(self, name, objects):
        """Whether the qualified name `name` is (or reaches) this forbidden name."""
        obj, canonical = objects.lookup(name)
        if {name, canonical} & {self.qual, self.canonical}:
            return True
        if self.owner and {name, canonical} & {self.owner, objects.lookup(self.owner)[1]}:
            return True
        if obj is MISSING or not self.usable:
            return False
        if obj is self.obj:
            return True
        if self.owner and inspect.isclass(obj):  # a subclass that inherits the method
            try:
                return inspect.getattr_static(obj, self.last, MISSING) is self.obj
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
        return any(isinstance(n, str) and vars(found).get(n, MISSING) is target for n in names)


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
    objects = Objects()
    course_cells = {text.strip() for text in course_cells}
    course_statements = {key for text in course_cells for key in statement_keys(text)}

    read, seen, deep = [], set(), []
    for cell in sorted(cells, key=lambda c: c.index):
        tree = read_tree(cell.source)
        if tree is None:
            parsed = parse(cell.source)
            if isinstance(parsed, ast.AST) and cell.source.strip() not in course_cells:
                deep.append(cell)  # it parses, but nests too deeply to read
            continue
        if id(tree) in seen:  # a cell of the same text: a tree of its own (the scan tells nodes by id)
            tree = copy_tree(tree)
        seen.add(id(tree))
        learner = cell.source.strip() not in course_cells
        keys = statement_keys(cell.source) if learner else ()
        own = [s for s, key in zip(tree.body, keys) if key not in course_statements]
        read.append(_Cell(cell, tree, learner, own))
    statements = [s for c in read for s in c.tree.body]
    exercises = [Target(*e) for e in exercises]
    # the cells the grader never runs (grader.cells_to_run): check cells, but for an exercise's own
    exercise_cells = {e.cell for e in exercises}
    unrun = {id(s) for c in read if c.cell.index not in exercise_cells and checked(c.cell.source) for s in c.tree.body}
    try:
        analysis = Analysis(statements, objects, VISITS_PER_NODE, VISITS_BASE, unrun)  # read here: a test lowers them
    except TooComplex:  # code written to make reading it slow: the teacher reads it
        first = next((c for c in read if c.own), None) or (read[0] if read else None)
        if first is None:
            return Findings()
        number, line = first.where
        return Findings(review=(Hit(number, line, "too complex", "more work to read than any lesson's code "
                                                                 f"({VISITS_PER_NODE}× its size)"),))
    owner = {id(s): c for c in read for s in c.tree.body}
    own_statements = [s for c in read for s in c.own]

    rules = [_Rule(e.id, name, objects) for e in exercises for name in also_forbidden(e.forbidden)]
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
        own_code = run_time_rules.own_code(exercise.id)
        if generic or own_code:
            for statement in _reached(exercise, read, analysis):
                if generic:
                    _match(generic, statement, references[id(statement)], analysis, objects, hit, looks[id(statement)])
                if own_code:
                    for node, name in _course_references(references[id(statement)], objects):
                        if looks[id(statement)].only_shown(node):
                            continue  # a look: its result is only shown, kept nowhere the function reads
                        c = owner[id(statement)]
                        number, line = c.where
                        forbidden[exercise.id].setdefault((number, name), Hit(number, line, name, _short(node)))

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


def _course_references(references, objects):
    """(node, qualified name) of the references to course code (a function or class of a module that
    run_time_rules.course_module calls the course's, not the check's) among a statement's: what an exercise of
    run_time_rules.OWN_CODE may not use anywhere its function reaches, a table computed at a cell's top level by
    another course function (``tiled.keep_of(256, 256, causal=True)``, sliced by the answer) included, as the
    kernel's tracer refuses any course function that runs during the call."""
    found = []
    for node, values, _, _ in references:
        for value in sorted(values - MARKERS):
            obj, canonical = objects.lookup(value)
            if isinstance(obj, types.ModuleType):
                continue  # a module named is no code run (``from course_utils import tiled``)
            module = getattr(obj, "__module__", None) if obj is not MISSING else canonical.rpartition(".")[0]
            if run_time_rules.course_module(module if isinstance(module, str) else None):
                found.append((node, canonical))
                break
    return found


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
        self.ok = (isinstance(statement, ast.Expr) and not getattr(statement, SPLICED, False)
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
        return self.only_shown(reference)

    def only_shown(self, reference):
        """Whether `reference` is the function of a call whose result goes only to calls that show it (only_looks
        without its rule on what the call is given): a course function drawing the learner's result
        (``mask_picture(my_causal_mask(3, 7))``) keeps nothing an exercise's function could read."""
        call = self.parents.get(id(reference))
        if not self.ok or not isinstance(call, ast.Call) or call.func is not reference:
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
            if value in MARKERS:
                return False
            name = self.objects.lookup(value)[1]
            if name in LOOK_BUILTINS or name in LOOK_DISPLAY:
                if name == "builtins.print" and "file" in keywords:
                    return False
                continue
            module, _, last = name.rpartition(".")
            if last.startswith("_") or last.endswith("_") or not self._module(module):
                return False
            if under(name, "course_utils") and not under(name, "course_utils.exercises"):
                continue
            if module not in LOOK_MODULES or name in ("torch.save", "torch.load"):
                return False
        return True

    def _module(self, name):
        """Whether `name` is a module (not a class: ``EncoderLayer.register_buffer`` may store what it
        is given); a name not loaded is a module unless Capitalised."""
        found = self.objects.lookup(name)[0]
        if found is not MISSING:
            return isinstance(found, types.ModuleType)
        return not name.rpartition(".")[2][:1].isupper()


def _tensor_attribute(name):
    """Whether `name` is a public attribute of torch.Tensor (a method or a property)."""
    torch = sys.modules.get("torch")
    return (torch is not None and not name.startswith("_")
            and inspect.getattr_static(torch.Tensor, name, MISSING) is not MISSING)


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
        names = [v for v in values if v not in MARKERS]
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


def _dynamic(statement, references, analysis, objects):
    """(construct, code) for what a learner's statement does that the scan cannot follow."""
    found = []
    callees = _callees(statement)
    exempt = set()  # get_ipython() calls of the magics already judged
    for node in ast.walk(statement):
        magic = magic_call(node)
        if magic is None:
            continue
        exempt.add(id(node.func.value.func))
        shown, name = magic_name(*magic)
        if shown is None:
            found.append((node, "get_ipython", _short(node)))
        elif (name in SAFE_MAGICS and rcparams.magic_ok(name, *magic)) or (
                name == "load_ext" and (magic[1][1:2] or [None])[0] == "autoreload"):
            continue
        else:
            arguments = magic[1]
            if shown == "!":
                found.append((node, shown, "!" + (arguments[0] or "")[:59] if arguments else "!"))
            else:
                text = arguments[1] if len(arguments) > 1 and arguments[1] is not None else ""
                found.append((node, shown, (shown + " " + text.split("\n")[0]).strip()[:60]))
    for node, qualified, is_star in _imports(statement):
        names = {qualified, objects.lookup(qualified)[1]}
        if isinstance(node, ast.ImportFrom):
            names |= {node.module, objects.lookup(node.module)[1]}
        labels = {named_construct(n) for n in names} - {None}
        labels = {label for label in labels if label not in CALLS or is_star}
        for label in sorted(labels):
            found.append((node, label, _short(node)))
        if not importable(qualified.split(".")[0]):
            found.append((node, "import", _short(node)))
    for node in ast.walk(statement):  # a Store or Del (``for _ in ...``, ``x, _ = ...``) is no read
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and HISTORY_NAMES.fullmatch(node.id):
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
                if value not in MARKERS:
                    labels |= {named_construct(value), named_construct(objects.lookup(value)[1])}
            labels.discard(None)
        if not labels and attribute in DYNAMIC_ATTRIBUTES:
            labels = {attribute}
        for label in sorted(labels):
            found.append((node, label, _short(node, callees)))
    named = {id(node) for node, _, _ in found}
    found += [hit for hit in _unlisted(statement, references, analysis, objects) if id(hit[0]) not in named]
    named = {id(node) for node, _, _ in found}
    found += [(node, construct, _short(node, callees)) for node, construct in
              rcparams.findings(statement, references, objects) if id(node) not in named]
    found += [(node, GRADERS_NAME, _short(node)) for node in _grader_names(statement)]
    named = {id(node) for node, _, _ in found}
    for top, node, base in analysis.stores:
        if top != id(statement) or id(node) in named:
            continue
        patched = [v for v in base if v not in MARKERS and _patchable(objects.lookup(v)[0])]
        if patched:
            found.append((node, "assignment", _short(node)))
    found.sort(key=lambda item: _position(item[0]))
    return [(name, code) for _, name, code in found]


GRADERS_NAME = "a name the grader uses"  # the review's word for a binding of policy.GRADER_NAMES


def _grader_names(statement):
    """The nodes of a statement that bind one of policy.GRADER_NAMES (a def, a class, an assignment, an import,
    a loop or with target, an except or match name, a global declaration)."""
    found = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names = [node.id]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.alias):
            names = [node.asname or node.name.partition(".")[0]]
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            names = [node.name]
        elif isinstance(node, ast.MatchMapping):
            names = [node.rest]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names = node.names
        else:
            continue
        if any(name in GRADER_NAMES for name in names):
            found.append(node)
    return found


def _unlisted(statement, references, analysis, objects):
    """(node, construct, code) for what a learner's statement names that is not on the allow-list."""
    found = []
    callees = _callees(statement)
    for node, qualified, _ in _imports(statement):
        construct = refusal(qualified) or refusal(objects.lookup(qualified)[1])
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
            for value in values - MARKERS:
                constructs |= {refusal(value), refusal(objects.lookup(value)[1])}
        if attribute is not None and base and UNKNOWN in base and private(attribute):
            constructs.add("private attribute")
        for construct in sorted(constructs - {None}):
            found.append((node, construct, _short(node, callees)))
    for top, node, base in analysis.stores:
        attribute = analysis.attrs.get(id(node))
        if top == id(statement) and attribute and UNKNOWN in base and private(attribute):
            found.append((node, "private attribute", _short(node)))
    return found


def _patchable(found):
    """Whether assigning an attribute of this object changes code others call: a module, a class, a
    function (or something the scan cannot look into)."""
    return found is MISSING or isinstance(found, (types.ModuleType, type)) or callable(found)
