"""A function's fingerprint, to tell a copy of the course's own code: the student package holds
working functions that later lessons need (``masks.padding_mask``, ``multihead.split_heads``, ...),
and the references are in the course's public repository. A learner who pastes one as an exercise's
answer, renamed, reformatted, commented, with statements added or reordered or its docstring dropped,
solved nothing; the grader (grader.py) gives the exercise 0 for the teacher's review, naming the
source. (The solution notebooks' answers are not fingerprinted: they are the lessons' worked
solutions, handed out once the work is in.)

The fingerprint is the set of the function's statements, each normalised and hashed, with what a
copy changes for free made uniform (`normalise`):

- what runs nothing is dropped: docstrings and other bare constants, ``pass``, annotations, and a
  store to a local name nothing reads (``unused = 0``), again until none is left; a local name given
  one constant once (``function = "padding_mask"``), or one value once and read once (``keep = ...``
  then ``return keep[:, None]``), is that value where it is read;
- what the function reaches is named by what it is, not by where it lives or what it is called: a
  name it does not bind as a variable, or a chain of attributes read from one, is its last part
  when that is a name of the tensor API the lessons teach or of Python (``torch.nn.functional.softmax``,
  ``F.softmax`` and ``t.softmax`` are ``softmax``; ``isinstance`` stays), and a helper (``·h``)
  otherwise: ``check.fail`` (the course's module alias), ``checks.fail`` (a class of the learner's),
  ``fail`` and ``my_fail`` (functions of the cell's) are one thing, and so are the helpers the function
  defines itself (a def, a class, a name given a lambda, whatever their names), whose own statements are
  only more statements;
- the other names become positions and definitions: a parameter is its position (``p0``, ``p1``, ...),
  and a local name is named by what is assigned to it (``n`` and a hash of every value it is given,
  with the names in those values named the same way), so that renaming a variable or moving the
  statement that binds it changes nothing;
- comparisons are written one way (``a > b`` is ``b < a``), the parts of every ``and`` and ``or`` in
  one order, and an ``if``'s condition is the same whichever way round its branches are (``not``
  pushed down by De Morgan, then the condition or its negation, whichever reads first);
- strings are emptied (messages and argument names in them: a copier edits them freely), numbers
  and attribute names kept, comments and layout are not in the syntax tree at all.

Each statement, at any depth, is hashed on its own (a compound one, ``for`` or ``if``, by its header
without its body), so that added statements, inside a loop or anywhere, and a changed order leave the
others' hashes as they were. A learner's function is a copy (`copy_of`) when every statement of a
course function is among its own, or all but one of a course function of TOLERANT_FROM statements or
more, all but a fifth from ten on (checks deleted, a helper's calls written out). What still escapes:
a copy shorter than that, a changed value of a name read several times (``ok = bool(...)``: the name
is named by its value, so every statement reading it changes), helpers outside the function renamed to
names of the tensor API (``def clone(...)`` in the cell), code rewritten beyond these rules.
Functions smaller than MIN_NODES (a one-line wrapper, ``return tiled_attention(q, k, v)``) are not
fingerprinted: there an independent answer and the course's code meet by necessity. The answer key
carries the fingerprints of the course's code (course_teacher.publish writes them), never the code;
the names of the tensor API are read from the installed torch, so a key is written and read by the
same installation (publish again after an upgrade).
"""

import ast
import builtins
import copy
import functools
import hashlib
import types
from collections import Counter

#: The least syntax-tree nodes a function needs (after normalising) to be fingerprinted.
MIN_NODES = 40
#: The least statements a course function needs for a copy of it to be told with some of them changed or dropped
#: (a check deleted, a helper's call written out): one, and a fifth of them from ten on (`tolerated`). No
#: independent answer comes nearer to a function of eight or nine statements than six short, no worked solution
#: nearer than three; to one of ten or more, nothing comes nearer than two thirds short (tests/test_copies.py and
#: test_copies_edits.py hold them); to smaller ones, one short.
TOLERANT_FROM = 8
#: Where a fingerprint's text starts: a fingerprint of another kind (an older key's: "statements:", helpers named as
#: written) is never read as one.
PREFIX = "statements2:"
#: A function larger than this (syntax-tree nodes) is not read: no course function comes close.
MAX_NODES = 20_000
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")
#: What starts a name that stands for what the function reaches, not for one of its variables (no identifier does).
HELPER = "·"


def _digest(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _bound_names(function):
    """{name: [(kind, node)]}: every way the function binds a local name (not its parameters)."""
    bound = {}

    def add(target, kind, value):
        if isinstance(target, ast.Name):
            bound.setdefault(target.id, []).append((kind, value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for at, element in enumerate(target.elts):
                add(element, f"{kind}[{at}]", value)
        elif isinstance(target, ast.Starred):
            add(target.value, f"{kind}*", value)

    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                add(target, "=", node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            add(node.target, "=", node.value)
        elif isinstance(node, ast.AugAssign):
            add(node.target, type(node.op).__name__ + "=", node.value)
        elif isinstance(node, ast.NamedExpr):
            add(node.target, ":=", node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            add(node.target, "for", node.iter)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    add(item.optional_vars, "with", item.context_expr)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.setdefault(node.name, []).append(("except", node.type or ast.Constant(None)))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)) and node is not function:
            if not isinstance(node, ast.Lambda):
                bound.setdefault(node.name, []).append(("def", ast.Constant(len(node.body))))
            if not isinstance(node, ast.ClassDef):
                arguments = node.args
                for at, arg in enumerate(arguments.posonlyargs + arguments.args + arguments.kwonlyargs
                                         + [a for a in (arguments.vararg, arguments.kwarg) if a]):
                    bound.setdefault(arg.arg, []).append((f"arg{at}", ast.Constant(None)))
    return bound


def _drop_dead(function):
    """Drop, again until none is left, what runs nothing: bare constants (docstrings), ``pass``, and a
    store of a plain value (a constant, a name) to a local name nothing reads."""
    while True:
        loaded = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
        dropped = False
        for node in ast.walk(function):
            for field in _BODIES:
                body = getattr(node, field, None)
                if not isinstance(body, list) or not body or not isinstance(body[0], ast.AST):
                    continue
                kept = [s for s in body if not _no_op(s, loaded)]
                if len(kept) < len(body):
                    dropped = True
                    setattr(node, field, kept or ([ast.Pass()] if field == "body" else []))
        if not dropped:
            return function


def _no_op(statement, loaded):
    if isinstance(statement, ast.Pass):
        return False  # kept where it is the only statement; dropped from the hash below
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        plain = statement.value is None or all(isinstance(n, (ast.Constant, ast.Name, ast.Load, ast.Tuple, ast.List))
                                               for n in ast.walk(statement.value))
        return plain and all(isinstance(t, ast.Name) and t.id not in loaded for t in targets)
    return False


@functools.cache
def _api():
    """The names of what the lessons teach, which a copier keeps: Python's builtins, ``math``, and the functions,
    classes and attributes of ``torch``, ``torch.Tensor``, ``torch.nn`` and ``torch.nn.functional`` (not private
    ones, ``F._pair``, nor modules: which of torch's are loaded depends on what ran before). Any other name a
    function reaches is a helper."""
    import math

    import torch
    import torch.nn.functional

    spaces = (builtins, math, torch, torch.nn, torch.nn.functional)
    names = {name for space in spaces for name, value in vars(space).items() if not isinstance(value, types.ModuleType)}
    names |= set(dir(torch.Tensor))  # its methods, those of its C base included
    return frozenset(name for name in names if not name.startswith("_"))


def _helper(name):
    """What a name the function does not bind as a variable is in a fingerprint: ``·`` and the name when it is the
    tensor API's or Python's (``·arange``, ``·isinstance``), ``·h`` for any other (a helper)."""
    return HELPER + (name if name in _api() else "h")


def _reached(node, variables, own):
    """`node` as what it reaches, when it is a name the function does not bind as a variable or a chain of
    attributes read from one (``torch.nn.functional.softmax``, ``check.fail``): a Name, `_helper` of its last
    part, or ``·h`` from a helper the function defines itself (in `own`: its name, whatever it is, is the
    learner's); else None (``lengths.device`` is the parameter's)."""
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or root.id in variables or root.id.startswith(HELPER):
        return None
    return ast.Name(id=HELPER + "h" if root.id in own else _helper(node.attr if isinstance(node, ast.Attribute)
                                                                    else node.id), ctx=ast.Load())


class _Helpers(ast.NodeTransformer):
    """Every name and chain of attributes the function does not bind as a variable, as `_reached` names it; the
    helpers the function defines itself (a def, a class, a name given a lambda: `own`) all ``·h``."""

    def __init__(self, variables, own):
        self.variables, self.own = variables, own

    def visit_Attribute(self, node):
        return _reached(node, self.variables, self.own) or self.generic_visit(node)

    def visit_Name(self, node):
        found = _reached(node, self.variables, self.own)
        if found is not None:
            found.ctx = node.ctx
        return found or node

    def _defined(self, node):
        if node.name not in self.variables:
            node.name = HELPER + "h"
        return self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _defined


def _own_scope(function):
    """The nodes of `function`'s own scope: not those of the functions, lambdas and classes it defines."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _inline(function, params):
    """A local name the function's own scope binds once, by a plain ``=``, and reads once (``keep = a < b`` then
    ``return keep[:, None]``), or binds once to a constant and reads anywhere (``function = "padding_mask"``):
    its value where it is read, so that a copier who writes the value out, or names it, changes nothing; the store
    then reads nothing, and `_drop_dead` drops it. Once over: a value inlined is not looked at again."""
    nodes = list(_own_scope(function))
    stores = Counter(n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    stores.update(name for n in nodes if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names)
    loads = Counter(n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    values = {}
    for n in nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            name = n.targets[0].id
            if stores[name] == 1 and name not in params and (isinstance(n.value, ast.Constant) or (
                    loads[name] == 1 and name not in {m.id for m in ast.walk(n.value) if isinstance(m, ast.Name)})):
                values[name] = n.value
    if not values:
        return function
    for node in [function] + nodes:
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.Name) and isinstance(value.ctx, ast.Load) and value.id in values:
                setattr(node, field, copy.deepcopy(values[value.id]))
            elif isinstance(value, list):
                value[:] = [copy.deepcopy(values[v.id]) if isinstance(v, ast.Name) and isinstance(v.ctx, ast.Load)
                            and v.id in values else v for v in value]
    return function


_FLIPPED = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}
_NEGATED = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
            ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def _compare(node):
    """A comparison written one way: ``a > b`` as ``b < a`` (and ``>=`` as ``<=``)."""
    if isinstance(node, ast.Compare) and all(type(op) in _FLIPPED for op in node.ops):
        operands = [node.left] + node.comparators
        return ast.Compare(left=operands[-1], ops=[_FLIPPED[type(op)]() for op in reversed(node.ops)],
                           comparators=operands[-2::-1])
    return node


def _condition(node, negate=False):
    """A condition (negated when `negate`) with its ``not`` pushed down to what it tests (De Morgan, comparisons
    turned: ``not (a or b < 0)`` is ``not a and b >= 0``), the parts of ``and`` / ``or`` in one order."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _condition(node.operand, not negate)
    if isinstance(node, ast.BoolOp):
        op = node.op if not negate else (ast.Or() if isinstance(node.op, ast.And) else ast.And())
        return ast.BoolOp(op=op, values=sorted((_condition(v, negate) for v in node.values), key=ast.dump))
    if negate and isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _NEGATED:
        return _compare(ast.Compare(left=node.left, ops=[_NEGATED[type(node.ops[0])]()], comparators=node.comparators))
    return ast.UnaryOp(op=ast.Not(), operand=node) if negate else node


def _shape(node):
    """`node`'s syntax tree without its names: an order that renaming cannot change."""
    node = copy.deepcopy(node)
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            child.id = ""
    return ast.dump(node)


def _comparisons(function):
    """Every comparison written one way, and the parts of every ``and`` / ``or`` in one order, by their shape
    (before names are given: what a name is given depends on them)."""
    for node in ast.walk(function):
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.Compare):
                setattr(node, field, _compare(value))
            elif isinstance(value, list):
                value[:] = [_compare(v) for v in value]
    for node in ast.walk(function):
        if isinstance(node, ast.BoolOp):
            node.values.sort(key=_shape)
    return function


def _conditions(function):
    """An ``if``'s condition the same whichever way round its branches are: the condition or its negation,
    whichever reads first (after names are given: the order of ``and`` / ``or`` parts must not depend on them);
    its header is hashed without its bodies."""
    for node in ast.walk(function):
        if isinstance(node, ast.If):
            node.test = min(_condition(node.test), _condition(node.test, True), key=ast.dump)
    return function


def normalise(function):
    """A copy of a function's syntax tree (ast.FunctionDef) made uniform as the module's docstring says:
    what runs nothing dropped, constants inlined, helpers by what they are, names as positions and definitions,
    comparisons and conditions one way round, strings emptied."""
    function = copy.deepcopy(function)
    function.returns, function.decorator_list, function.name = None, [], "f"
    function = _drop_dead(function)
    arguments = function.args
    params = {a.arg: f"p{at}" for at, a in enumerate(arguments.posonlyargs + arguments.args + arguments.kwonlyargs
                                                     + [a for a in (arguments.vararg, arguments.kwarg) if a])}
    function = _drop_dead(_inline(function, params))
    ways = _bound_names(function)
    own = {name for name, found in ways.items() if name not in params
           and all(kind == "def" or (kind == "=" and isinstance(value, ast.Lambda)) for kind, value in found)}
    variables = set(params) | (set(ways) - own)
    function.body = [_Helpers(variables, own).visit(statement) for statement in function.body]
    function = _comparisons(function)
    bound = {name: ways for name, ways in _bound_names(function).items()
             if name not in params and not name.startswith(HELPER)}
    memo = {}

    def name_of(name, stack):
        if name in params:
            return params[name]
        if name not in bound:
            return name
        if name in stack:
            return "@"  # bound from itself (in a loop): the same in every copy
        if name in memo:
            return memo[name]
        cyclic = [False]
        parts = sorted(f"{kind}:{ast.dump(renamed(value, stack | {name}, cyclic))}" for kind, value in bound[name])
        found = "n" + _digest("|".join(parts))
        if not cyclic[0]:
            memo[name] = found
        return found

    def renamed(node, stack, cyclic):
        node = copy.deepcopy(node)
        for child in ast.walk(node):
            if isinstance(child, ast.Name):
                if child.id in stack:
                    cyclic[0] = True
                child.id = name_of(child.id, stack)
            elif isinstance(child, ast.Constant) and isinstance(child.value, str):
                child.value = ""
        return node

    # every name's new name first, from the tree as it is, then the tree renamed (in any order)
    nodes = list(ast.walk(function))
    given = {name: name_of(name, frozenset()) for name in sorted(
        {n.arg for n in nodes if isinstance(n, ast.arg)} | {n.id for n in nodes if isinstance(n, ast.Name)}
        | {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                   ast.ExceptHandler)) and n.name and n is not function})}
    for node in nodes:
        if isinstance(node, ast.arg):
            node.arg, node.annotation = given[node.arg], None
        elif isinstance(node, ast.Name):
            node.id = given[node.id]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not function:
            node.name = given[node.name]
            if not isinstance(node, ast.ClassDef):
                node.returns, node.decorator_list = None, []
        elif isinstance(node, ast.ExceptHandler) and node.name:
            node.name = given[node.name]
        elif isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return _conditions(function)


def statements(function):
    """Counter of the hashes of a function's statements (normalised), each at any depth on its own (a
    compound statement by its header); None when the function is too small to tell or too large to read."""
    size = sum(1 for _ in ast.walk(function))
    if size > MAX_NODES:
        return None
    function = normalise(function)
    if sum(1 for _ in ast.walk(function)) < MIN_NODES:
        return None
    found = Counter()
    for node in ast.walk(function):
        if not isinstance(node, ast.stmt) or node is function or isinstance(node, ast.Pass):
            continue
        header = copy.copy(node)
        for field in _BODIES:
            if isinstance(getattr(header, field, None), list):
                setattr(header, field, [])
        found[_digest(ast.dump(header))] += 1
    return found or None


def fingerprint(function):
    """The fingerprint of a function's syntax tree (ast.FunctionDef): its statements' hashes as text,
    or None when it is too small."""
    found = statements(function)
    if not found:
        return None
    return PREFIX + ",".join(sorted(found.elements()))


def _read(print_):
    if not isinstance(print_, str) or not print_.startswith(PREFIX):
        return None
    return Counter(print_[len(PREFIX):].split(","))


def tolerated(size):
    """How many of a course function's `size` statements a copy of it may lack."""
    return 0 if size < TOLERANT_FROM else max(1, size // 5)


def copy_of(function, table):
    """What `function` (ast.FunctionDef) copies: the label of the table's ({fingerprint: label}) largest
    fingerprint whose every statement is among the function's own, else of the one it lacks the fewest
    statements of, within what `tolerated` allows; or None."""
    mine = statements(function) if function is not None else None
    if not mine:
        return None
    found = []
    for print_, label in table.items():
        theirs = _read(print_)
        if not theirs:
            continue
        size, missing = sum(theirs.values()), sum((theirs - mine).values())
        if missing <= tolerated(size):
            found.append((missing, -size, label))
    return min(found)[2] if found else None


def functions(source):
    """{name: ast.FunctionDef} of every function a piece of code defines, at any depth (the first of
    a name), or {} when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, node)
    return found


def fingerprints(source, label):
    """{fingerprint: `label` and the function's name} of every function of `source` big enough."""
    found = {}
    for name, function in functions(source).items():
        print_ = fingerprint(function)
        if print_:
            found.setdefault(print_, f"{label}{name}")
    return found
