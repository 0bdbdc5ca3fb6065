"""The course's JupyterLab: ``python -m course_utils lab work --lang en``, what ``make lab`` runs.

    python -m course_utils lab work                       the course in the locale's language
    python -m course_utils lab work --lang zh --no-browser --ip 0.0.0.0 --port 8890

1. ``learner.prepare``: the learner's copies (what is missing), the diagrams and glossary the lessons
   link, the homes' progress brought up to date from progress.json; it says which lessons the course
   changed since they were copied (``make update`` brings them in).
2. ``trim_workspace``: JupyterLab reopens what was open when it last closed, and starts a kernel for
   every notebook it reopens. The saved layout is cut to the home and the lesson the learner worked
   in last, so a relaunch starts two kernels, not one per lesson ever opened.
3. JupyterLab, rooted at the work folder (the file browser shows the learner's copies, not the
   course's notebooks nor the solutions), opening the home of the language, with a layout of its
   own per language (``work/.workspaces/en``, ``zh``). ``--no-browser`` starts it without opening a
   browser, ``--ip`` and ``--port`` choose where it listens (``--ip 0.0.0.0``: every interface, for
   a remote machine); JupyterLab prints its address with its token either way. ``--allow-root``:
   these machines (and many containers) run as root, where JupyterLab refuses to start otherwise.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from . import i18n, learner

DEFAULT_PORT, DEFAULT_IP = 8888, "localhost"
#: The folder of each language's JupyterLab layout, in the work folder.
WORKSPACES = ".workspaces"


def workspaces(work, lang):
    return Path(work) / WORKSPACES / lang


def command(work, lang, port=DEFAULT_PORT, ip=DEFAULT_IP, browser=True, extra=()):
    """The command line that starts the course's JupyterLab."""
    work = Path(work).resolve()
    return [
        sys.executable, "-m", "jupyterlab", "--allow-root",
        f"--ServerApp.ip={ip}", f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={work}",
        f"--LabApp.workspaces_dir={workspaces(work, lang)}",
        f"--LabApp.default_url=/lab/tree/{lang}/{learner.HOME}",
        *([] if browser else ["--no-browser"]),
        *extra,
    ]  # fmt: skip


# ----------------------------------------------------------------------------- the saved layout

def _notebook_path(widget):
    """The path of a main-area widget's notebook ("notebook:en/01_x.ipynb" -> "en/01_x.ipynb"), else None."""
    if isinstance(widget, str) and widget.startswith("notebook:") and widget.endswith(".ipynb"):
        return widget.split(":", 1)[1]
    return None


def _widgets(area):
    """Every widget id in a saved dock area (tab areas nested in split areas), in order."""
    if not isinstance(area, dict):
        return []
    found = [w for w in area.get("widgets", []) if isinstance(w, str)]
    for child in area.get("children", []) or []:
        found += _widgets(child)
    return found


def _located(path, work):
    """`path` as JupyterLab rooted at the work folder names it: as saved, or as a JupyterLab rooted at
    the repository saved it (before: "work/en/01_x.ipynb"); None where the work folder has no such file."""
    work = Path(work)
    if (work / path).is_file():
        return path
    prefix = work.resolve().name + "/"
    if path.startswith(prefix) and (work / path[len(prefix):]).is_file():
        return path[len(prefix):]
    return None


def keep(open_paths, current, work, lang):
    """Which of the notebooks open (`open_paths`, relative to the work folder) to reopen: the home,
    and the lesson worked in last: the current tab when it is a lesson, else the open lesson saved last."""
    home = f"{lang}/{learner.HOME}"
    lessons = [p for p in open_paths if p != home and Path(p).name != learner.HOME]
    last = None
    if current in lessons:
        last = current
    elif lessons:
        def saved(path):
            try:
                return (Path(work) / path).stat().st_mtime
            except OSError:
                return float("-inf")

        last = max(lessons, key=saved)
    return [home] + ([last] if last else [])


def trim_workspace(work, lang):
    """Cut every saved layout of `lang`'s JupyterLab to the home and the last lesson (see `keep`):
    its main area becomes one tab area holding them, the last lesson current; what no longer names a
    file of the work folder is dropped; the side panels are left as they were. Returns the files
    rewritten."""
    written = []
    for path in sorted(workspaces(work, lang).glob("*.jupyterlab-workspace")):
        try:
            text = path.read_text(encoding="utf-8")
            workspace = json.loads(text)
            data = workspace["data"]
            restorer = data.get("layout-restorer:data")
            main = restorer.get("main") if isinstance(restorer, dict) else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if not isinstance(main, dict):
            continue
        open_paths = [_located(p, work) for p in map(_notebook_path, _widgets(main.get("dock"))) if p]
        open_paths = list(dict.fromkeys(p for p in open_paths if p))
        current = _notebook_path(main.get("current"))
        ids = [f"notebook:{p}" for p in keep(open_paths, current and _located(current, work), work, lang)]
        main["dock"] = {"type": "tab-area", "currentIndex": len(ids) - 1, "widgets": ids}
        main["current"] = ids[-1]
        for key in list(data):  # the state of each widget no longer open (its kernel session with it)
            if key.startswith(("notebook:", "editor:", "console:", "terminal:")) and key not in ids:
                del data[key]
        for key in ids:
            data[key] = {"data": {"path": key.split(":", 1)[1], "factory": "Notebook"}}
        browser = data.get("file-browser-filebrowser:cwd")
        if isinstance(browser, dict) and not (Path(work) / str(browser.get("path", ""))).is_dir():
            browser["path"] = lang  # a folder of the repository's JupyterLab (before): the learner's copies
        new = json.dumps(workspace, indent=1, ensure_ascii=False) + "\n"
        if json.loads(new) != json.loads(text):
            learner._write(path, new)
            written.append(path)
    return written


# ----------------------------------------------------------------------------- the command

def add_command(commands):
    lab = commands.add_parser("lab", help="open the course in JupyterLab, rooted at the work folder (`make lab`); "
                                          "options it does not know (after --) go to JupyterLab")
    lab.add_argument("work", help="the work folder, e.g. work")
    lab.add_argument("--lang", choices=i18n.LANGUAGES, help="the course's language (default: the locale's)")
    lab.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port to listen on (default {DEFAULT_PORT})")
    lab.add_argument("--ip", default=DEFAULT_IP, help=f"the address to listen on (default {DEFAULT_IP}; "
                                                      "0.0.0.0: every interface)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser (a remote machine)")
    return lab


def main(args, lang):
    work = Path(args.work)
    learner.prepare(work, lang, args.course)
    trim_workspace(work, lang)
    if args.no_browser or args.ip not in (DEFAULT_IP, "127.0.0.1"):
        print(i18n.text(lang, "launch.address", port=args.port, home=f"{lang}/{learner.HOME}"), flush=True)
    line = command(work, lang, args.port, args.ip, not args.no_browser, args.jupyter)  # the options it does not know
    if os.name == "posix":
        os.execv(line[0], line)  # JupyterLab in this process: Ctrl-C reaches it alone, as from `jupyter lab`
    return subprocess.call(line)
