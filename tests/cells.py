"""Running a lesson's cell in a test as a notebook runs it."""

import linecache


def run_cell(source, namespace):
    """exec `source` in `namespace` with its text in linecache, as IPython does for a cell: Triton reads each
    kernel's source from there (the interpreter rewrites it, the compiler's front end parses it), and a
    kernel made from text that no cache holds is refused as a notebook would never make it."""
    name = f"<cell-{abs(hash(source))}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), namespace)
