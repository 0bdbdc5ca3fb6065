"""Files written whole: through a file beside the target, moved over it, so that a process stopped mid-write
leaves the old file as it was. The learner's work folder is written this way (course_utils.learner: copies,
progress, homes; course_utils.launch: JupyterLab's workspaces)."""

import os
import tempfile
from pathlib import Path

# the process's umask, read once (the only way to read it is to set it)
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def write(path, data):
    """Write `data` (str or bytes) to `path` through a file beside it, moved over it: a process
    stopped mid-write leaves the old file whole."""
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o7777  # a file rewritten keeps its permissions
    except OSError:
        mode = 0o666 & ~_UMASK  # a new one gets what open() would give it (mkstemp's are private)
    handle, partial = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(partial, mode)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
