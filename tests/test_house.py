"""The house rules a reader of the code relies on, read from the source's syntax trees (nothing imported):

1. No import circle among the modules of ``course_utils`` and ``course_teacher``. Every import counts, the
   ones inside functions too: an import moved into a function to dodge a circle still says that the two
   modules need each other, which is the sign that one of them holds two things (DESIGN.md, "Style to
   follow"). A circle is listed module by module.
2. No private name used outside its module: ``module._name``, ``from module import _name`` or a string a call
   is given (``monkeypatch.setattr(module, "_name", ...)``) of a name that another module defines, assigns or
   imports with a leading underscore (a module of the course, or a helper beside the tests or the benchmarks),
   in the packages, the benchmarks and the tests. Dunders are public by Python's own convention. What a test
   must truly reach inside is in ``REACHES_INSIDE``, each with the reason.

An edge goes to the module an import names (``from a.b import c`` names ``a.b.c`` when that is a module, else
``a.b``), not to the packages above it that Python runs first: those always run before their submodules, so
counting them would make every ``from . import sibling`` a circle through the package's ``__init__``.
"""

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("course_utils", "course_teacher")
#: Where a private name of the packages may be reached for: the packages themselves, and what reads them.
READERS = PACKAGES + ("benchmarks", "tests")

#: (reader's path, "module._name"): the few places a test truly must reach inside, each with why.
REACHES_INSIDE = {
    # the widgets' redraws are fast because each caches what it computes: no public API shows a cache's hits
    ("tests/test_widget_redraw.py", "course_utils.widgets.attention._scaling_scores"),
    ("tests/test_widget_redraw.py", "course_utils.widgets.models._heads_run"),
    ("tests/test_widget_redraw.py", "course_utils.widgets.seq2seq._decoded"),
    # the gathered scores' memory bound (block_bytes), down to one query per block: sampled_scores takes none
    ("tests/test_probsparse.py", "course_utils.probsparse._gathered_scores"),
}


def _module_name(path):
    """The dotted name of the module at `path` (a package's ``__init__.py`` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(roots):
    """{dotted name: path} of every Python file under `roots` (folders of ROOT)."""
    found = {}
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            found[_module_name(path)] = path
    return found


COURSE = _modules(PACKAGES)


@functools.cache
def parsed(path):
    """The syntax tree of the file at `path` (each file read once per run)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _base(module, node):
    """The absolute module an ``ImportFrom`` reads from, resolving ``from . import x`` against `module`."""
    if not node.level:
        return node.module
    package = module.split(".") if COURSE.get(module, Path()).name == "__init__.py" else module.split(".")[:-1]
    package = package[:len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def imports(module, tree):
    """[(name imported from, [names], line)] of every import in `tree`, at any depth: ``import a.b`` gives
    ("a.b", [], line), ``from a import b, c`` gives ("a", ["b", "c"], line)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((_base(module, node), [alias.name for alias in node.names], node.lineno))
    return found


def import_graph():
    """{module: {module it imports: first line}} over the course's packages, function-level imports included."""
    graph = {}
    for module, path in COURSE.items():
        edges = graph.setdefault(module, {})
        for base, names, line in imports(module, parsed(path)):
            targets = [f"{base}.{name}" if f"{base}.{name}" in COURSE else base for name in names] or [base]
            for target in targets:
                if target in COURSE and target != module:
                    edges.setdefault(target, line)
    return graph


def tangles(graph):
    """The strongly connected components of `graph` with more than one module (Tarjan): the groups of modules
    each of which imports, through the others, every other. Sorted lists, sorted."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while node not in component:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def one_circle(graph, tangle):
    """A shortest circle through the first module of `tangle` (breadth first, inside it): [a, b, ..., a]."""
    start = tangle[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node]):
                if target == start:
                    return paths[node] + [start]
                if target in tangle and target not in paths:
                    paths[target] = paths[node] + [target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no circle through {start} in {tangle}")


def _described(graph, tangle):
    """One circle of a tangle, then every import between its modules (function-level ones are the dodges)."""
    inside = [f"    {a} -> {b} (line {graph[a][b]})" for a in tangle for b in sorted(graph[a]) if b in tangle]
    return "  circle: " + " -> ".join(one_circle(graph, tangle)) + "\n" + "\n".join(inside)


def test_no_import_circles():
    graph = import_graph()
    found = tangles(graph)
    assert not found, "import circles (function-level imports included):\n" + "\n".join(
        _described(graph, tangle) for tangle in found)


def test_the_import_graph_sees_what_it_must():
    """The scan itself: function-level and relative imports are edges, and a made-up circle is found."""
    tree = ast.parse("from . import links\n"
                     "def f():\n    from .exercises import EXERCISES\n    import course_utils.i18n\n")
    assert imports("course_teacher.build", tree) == [
        ("course_teacher", ["links"], 1), ("course_teacher.exercises", ["EXERCISES"], 3), ("course_utils.i18n", [], 4)]
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "b": 1, "d": 1}, "d": {}, "e": {"d": 1}}
    assert tangles(graph) == [["a", "b", "c"]]
    assert one_circle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert tangles({"a": {"b": 1}, "b": {}}) == []


EVERYTHING = _modules(READERS)


def _private_names():
    """{module: its private top-level names}: functions, classes, assigned and imported names starting with one
    "_"."""
    private = {}
    for module, path in EVERYTHING.items():
        names = set()
        for node in parsed(path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.ImportFrom):  # a private name another module's import binds here
                names |= {alias.asname or alias.name for alias in node.names}
        private[module] = {name for name in names if name.startswith("_") and not name.endswith("__")}
    return private


def _resolve(reader, name):
    """The module `name` means when `reader` imports it: a module of the course, or a helper beside a test or a
    benchmark (tests/ and benchmarks/ are on the path of what runs there, so ``import cells`` is tests/cells.py)."""
    if name in COURSE:
        return name
    folder = reader.split(".")[0]
    if folder in ("tests", "benchmarks") and f"{folder}.{name}" in EVERYTHING:
        return f"{folder}.{name}"
    return None


def _bound_modules(module, tree):
    """{local name: module} for every name `tree` binds to a module of the course (or a test's helper)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and _resolve(module, alias.name):
                    bound[alias.asname] = _resolve(module, alias.name)
                elif _resolve(module, alias.name.split(".")[0]):
                    bound[alias.name.split(".")[0]] = _resolve(module, alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            for alias in node.names:
                if _resolve(module, f"{base}.{alias.name}"):
                    bound[alias.asname or alias.name] = _resolve(module, f"{base}.{alias.name}")
    return bound


def _dotted(node, bound):
    """The dotted name an expression spells from a bound module (``grading.public`` -> the module's name plus
    ".public"), or None."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bound:
        return None
    return ".".join([bound[node.id]] + chain[::-1])


@functools.cache
def private_uses():
    """[(reader's path, line, "module._name")] of every private name of a course module (or of a test's or a
    benchmark's helper) used outside it: imported by name, read as an attribute, or reached by a string a call is
    given (``monkeypatch.setattr(module, "_name", ...)``, ``getattr(module, "_name")``,
    ``monkeypatch.setattr("package.module._name", ...)``). A dotted name merely listed (a sweep's exclusions) is
    not a use."""
    private = _private_names()

    def is_private(owner, name):
        return name in private.get(owner, ())

    found = []
    for module, path in EVERYTHING.items():
        tree = parsed(path)
        where = str(path.relative_to(ROOT))
        bound = _bound_modules(module, tree)
        for node in ast.walk(tree):
            uses = []
            if isinstance(node, ast.ImportFrom):
                base = _resolve(module, _base(module, node))
                uses = [(base, alias.name) for alias in node.names]
            elif isinstance(node, ast.Attribute):
                uses = [(_dotted(node.value, bound), node.attr)]
            elif isinstance(node, ast.Call) and node.args:
                first = node.args[0]
                if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):  # setattr(module, "_name", ...)
                    uses = [(_dotted(first, bound), node.args[1].value)]
                elif isinstance(first, ast.Constant) and isinstance(first.value, str) and \
                        re.fullmatch(r"[\w.]+\._\w+", first.value):  # monkeypatch.setattr("package.module._name", ...)
                    uses = [tuple(first.value.rsplit(".", 1))]
            found += [(where, node.lineno, f"{owner}.{name}") for owner, name in uses
                      if owner and owner != module and isinstance(name, str) and is_private(owner, name)]
    return tuple(sorted(set(found)))


def test_no_private_name_used_outside_its_module():
    found = [use for use in private_uses() if (use[0], use[2]) not in REACHES_INSIDE]
    assert not found, "private names used outside their module:\n" + "\n".join(
        f"{where}:{line}: {name}" for where, line, name in found)


def test_the_exceptions_are_still_needed():
    """An exception nobody takes any more goes: the list only ever says where a test reaches inside today."""
    taken = {(where, name) for where, _, name in private_uses()}
    assert not set(REACHES_INSIDE) - taken, f"exceptions no longer taken: {sorted(set(REACHES_INSIDE) - taken)}"
