"""A function's fingerprint, to tell a copy of the course's own code: the student package holds
working functions that later lessons need (``masks.padding_mask``, ``multihead.split_heads``, ...),
and the references are in the course's public repository. A learner who pastes one as an exercise's
answer, renamed, reformatted or with its docstring dropped, solved nothing; the grader (grader.py)
gives the exercise 0 for the teacher's review, naming the source. (The solution notebooks' answers
are not fingerprinted: they are the lessons' worked solutions, handed out once the work is in.)

The fingerprint is a hash of the function's syntax tree with what a copy changes for free made
uniform: its docstring and type annotations dropped, its name, its parameters and every name it
reads or binds renamed in the order they first appear, its strings emptied (comments and layout
are not in the tree). Attribute names, numbers and the code's shape stay. Functions smaller than MIN_NODES (a one-line
wrapper, ``return tiled_attention(q, k, v)``) are not fingerprinted: there an independent answer and
the course's code meet by necessity. The answer key carries the fingerprints of the course's code
(course_teacher.publish writes them), never the code.
"""

import ast
import hashlib

#: The least syntax-tree nodes a function needs (after normalising) to be fingerprinted.
MIN_NODES = 40


def fingerprint(function):
    """The fingerprint of a function's syntax tree (ast.FunctionDef), or None when it is too small."""
    function = ast.parse(ast.unparse(function)).body[0]  # a copy, positions and all, to rename freely
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:] or [ast.Pass()]
    function.body, function.returns, function.decorator_list = body, None, []
    names = {}

    def rename(name):
        return names.setdefault(name, f"v{len(names)}")

    function.name = rename(function.name)
    for node in ast.walk(function):
        if isinstance(node, ast.arg):
            node.arg, node.annotation = rename(node.arg), None
        elif isinstance(node, ast.Name):
            node.id = rename(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not function:
            node.name = rename(node.name)
            if not isinstance(node, ast.ClassDef):
                node.returns = None
        elif isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""  # messages and argument names in strings: a copier edits them freely
    if sum(1 for _ in ast.walk(function)) < MIN_NODES:
        return None
    return hashlib.sha256(ast.dump(function).encode()).hexdigest()


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
