"""Settings that name code, read in a learner's statement: matplotlib's rcParams, IPython's setting magics, and
classes that turn an address into memory. Each finding sends the notebook to review (scan.py's REVIEW).

matplotlib's ``rcParams`` is a dict of settings, and some of its keys name code (policy.RC_CODE: the backend
``"module://..."`` is imported, ``figure.hooks`` calls functions named as text). So the settings object may
appear in an exercise cell only where the scan reads the key it touches, whatever name reached it
(``plt.rcParams``, a name bound to it, ``getattr(plt, "rcParams")``):

- ``rcParams[KEY]`` read or written, ``rcParams.get(KEY)``, ``rcParams.setdefault(KEY, value)``,
  ``rcParams.update({KEY: value, ...})`` / ``update(KEY=value)``, with every KEY a string constant not under
  RC_CODE;
- ``name = rcParams`` (the name is followed like any other);
- ``plt.rc(GROUP, name=value, ...)`` and ``plt.rc_context({KEY: value})`` / ``rc_context(rc={...})``, whose
  keys (``GROUP.name``) are judged the same way (``rc_context``'s file, ``fname``, is for review).

Anywhere else (given to a function, ``dict.update(plt.rcParams, ...)``, returned, put in a list, a method
such as ``copy`` whose result shares the values, a key computed) it goes to review: its keys could be
written out of the scan's sight. The same for ``%matplotlib`` with anything but ``inline`` (a backend is
imported), ``%config`` but to show a setting or give CONFIG_TRAITS a constant (its text is executed), and
``%history -f`` (a file written).
"""

import ast
import re

from .names import MARKERS, MISSING
from .policy import ANY_ATTRIBUTE, CONFIG_TRAITS, MATPLOTLIB_MAGIC, MEMORY_PROTOCOLS, RC_CODE, RC_FUNCTIONS, \
    RC_PARAMS, under

SETTINGS = "matplotlib rcParams"  # the construct the review names
MEMORY = "memory by address"
_CONFIG_VIEW = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?")
_CONFIG_SET = re.compile(r"([A-Za-z_]\w*\.[A-Za-z_]\w*)\s*=(.*)", re.DOTALL)


def names_code(key):
    """Whether the rcParams key `key` names code to load, text to evaluate, a program or a file."""
    return any(under(key, entry) for entry in RC_CODE)


def _key(node):
    """The key a node spells (a string constant), or None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _keys_ok(keys):
    return all(key is not None and not names_code(key) for key in keys)


def _dict_keys(node):
    """The keys of a dict display (None for one that is not a constant string), or None for anything else."""
    if not isinstance(node, ast.Dict):
        return None
    return [_key(k) if k is not None else None for k in node.keys]


def findings(statement, references, objects):
    """(node, construct, code) for what a learner's statement does with the settings that it may not."""
    parents = {id(child): node for node in ast.walk(statement) for child in ast.iter_child_nodes(node)}
    found = []
    for node, values, _, _ in references:
        names = set()
        for value in values - MARKERS:
            looked, canonical = objects.lookup(value)
            names |= {value, canonical}
            if looked is not MISSING and type(looked).__name__ == "RcParams" and \
                    type(looked).__module__.partition(".")[0] == "matplotlib":
                names.add("matplotlib.rcParams")
        if names & RC_PARAMS and not _params_ok(node, parents):
            found.append((node, SETTINGS))
        elif names & RC_FUNCTIONS and not _function_ok(node, parents, names & RC_FUNCTIONS):
            found.append((node, SETTINGS))
    for node in ast.walk(statement):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                bound = _bound_names(item)
                if bound & (MEMORY_PROTOCOLS | ANY_ATTRIBUTE):
                    found.append((item, MEMORY))
        elif _key(node) in MEMORY_PROTOCOLS:
            found.append((node, MEMORY))
    return found


def _bound_names(item):
    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {item.name}
    targets = item.targets if isinstance(item, ast.Assign) else [item.target] if isinstance(
        item, (ast.AnnAssign, ast.AugAssign)) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _params_ok(node, parents):
    """Whether a reference to the settings object is used where the scan reads every key it touches."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return not isinstance(parent.ctx, ast.Del) and _keys_ok([_key(parent.slice)])
    if isinstance(parent, ast.Assign) and parent.value is node:
        return all(isinstance(target, ast.Name) for target in parent.targets)
    if isinstance(parent, ast.Expr):
        return True  # shown
    if isinstance(parent, ast.Attribute) and parent.value is node:
        call = parents.get(id(parent))
        if not isinstance(call, ast.Call) or call.func is not parent:
            return False
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return False
        if parent.attr in ("get", "setdefault"):
            return bool(call.args) and not call.keywords and _keys_ok([_key(call.args[0])])
        if parent.attr == "update":
            if len(call.args) > 1:
                return False
            keys = [k.arg for k in call.keywords]
            if call.args:
                given = _dict_keys(call.args[0])
                if given is None:
                    return False
                keys += given
            return _keys_ok(keys)
    return False


def _function_ok(node, parents, names):
    """Whether a call of plt.rc / plt.rc_context writes only keys it spells out."""
    call = parents.get(id(node))
    if not isinstance(call, ast.Call) or call.func is not node:
        return False
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return False
    if any(name.endswith(".rc") for name in names):
        if len(call.args) != 1:
            return False
        group = call.args[0]
        groups = [_key(e) for e in group.elts] if isinstance(group, (ast.Tuple, ast.List)) else [_key(group)]
        if None in groups:
            return False
        return _keys_ok([f"{g}.{k.arg}" for g in groups for k in call.keywords] + groups)
    # rc_context(rc=None, fname=None): only a dict display of constant keys
    given = list(call.args) + [k.value for k in call.keywords if k.arg == "rc"]
    if len(call.args) > 1 or any(k.arg != "rc" for k in call.keywords) or len(given) > 1:
        return False
    if not given:
        return True
    keys = _dict_keys(given[0])
    return keys is not None and _keys_ok(keys)


def magic_ok(name, method, arguments):
    """Whether a setting magic's text (``%matplotlib``, ``%config``, ``%history``) loads, runs or writes nothing."""
    if name not in ("matplotlib", "config", "history"):
        return True
    if method != "run_line_magic" or len(arguments) < 2 or arguments[1] is None:
        return False
    line = arguments[1].strip()
    if name == "matplotlib":
        return line in MATPLOTLIB_MAGIC
    if name == "history":
        return not any(part.startswith("-") and "f" in part for part in line.split())
    if _CONFIG_VIEW.fullmatch(line) or not line:
        return True
    setting = _CONFIG_SET.fullmatch(line)
    if setting is None or setting.group(1) not in CONFIG_TRAITS:
        return False
    try:
        value = ast.literal_eval(setting.group(2).strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    items = value if isinstance(value, (list, tuple, set)) else [value]
    return all(type(item) in (str, int, float, bool) for item in items)
