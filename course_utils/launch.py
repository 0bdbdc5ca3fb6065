"""The course's JupyterLab: ``python -m course_utils lab work --lang en``, what ``make lab`` runs.

    python -m course_utils lab work                       the course in the locale's language
    python -m course_utils lab work --lang zh --no-browser --ip 0.0.0.0 --port 8890

1. ``learner.prepare``: the learner's copies (what is missing), the diagrams and glossary the lessons
   link, the homes' progress brought up to date from progress.json; it says which lessons the course
   changed since they were copied (``make update`` brings them in).
2. ``trim_workspace``: JupyterLab reopens what was open when it last closed, and starts a kernel for
   every notebook it reopens. The saved layout is cut to the home and the lesson the learner worked
   in last, so a relaunch starts two kernels, not one per lesson ever opened. A Chinese lesson the layout
   names as the Chinese copies were named before (the English name) comes back under its name now.
3. JupyterLab, rooted at the work folder (the file browser shows the learner's copies, not the
   course's notebooks nor the solutions), opening the home of the language, with a layout of its
   own per language (``work/.workspaces/en``, ``zh``). ``--no-browser`` starts it without opening a
   browser, ``--ip`` and ``--port`` choose where it listens (``--ip 0.0.0.0``: every interface, for
   a remote machine). ``--allow-root``: these machines (and many containers) run as root, where
   JupyterLab refuses to start otherwise.
4. ``serve``: JupyterLab's output passes through; once it has printed its addresses (two, with the
   token) and its start-up log has gone quiet, the launch says the one address to open and then which
   lessons the course changed: last, where the learner looks, not above 30 lines of server log.
"""

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

from . import atomic_files, file_names, i18n, learner

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
        f"--LabApp.default_url=/lab/tree/{quote(lang)}/{quote(learner.HOMES[lang])}",
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


def _located(path, work, course=learner.NOTEBOOKS):
    """`path` as JupyterLab rooted at the work folder names it: as saved, or as a JupyterLab rooted at
    the repository saved it (before: "work/en/01_x.ipynb"), or a Chinese lesson's under its name now where it
    was saved under its old one (_renamed); None where the work folder has no such file."""
    work = Path(work)
    prefix = work.resolve().name + "/"
    for saved in (path, path[len(prefix):] if path.startswith(prefix) else None):
        for found in (saved, saved and _renamed(saved, course)):
            if found and (work / found).is_file():
                return found
    return None


def _renamed(path, course):
    """A Chinese lesson's path under its name now ("zh/01_注意力基础.ipynb") where `path` names it as the
    Chinese copies were named before they had names of their own, the English one ("zh/01_attention_basics.ipynb",
    a lesson of `course`'s en/): the rename is by number (course_utils.file_names). Else None."""
    lang, _, name = path.partition("/")
    number = file_names.lesson_number(name)
    if lang != "zh" or number not in file_names.ZH_LESSONS or not (Path(course) / "en" / name).is_file():
        return None
    try:
        return f"zh/{file_names.lesson_notebook(name[:-len('.ipynb')], 'zh')}"
    except ValueError:  # a name no source could have (file_names' error): nothing it was renamed to
        return None


def keep(open_paths, current, work, lang):
    """Which of the notebooks open (`open_paths`, relative to the work folder) to reopen: the home,
    and the lesson worked in last: the current tab when it is a lesson, else the open lesson saved last."""
    home = f"{lang}/{learner.HOMES[lang]}"
    lessons = [p for p in open_paths if p != home and Path(p).name not in learner.HOMES.values()]
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


def trim_workspace(work, lang, course=learner.NOTEBOOKS):
    """Cut every saved layout of `lang`'s JupyterLab to the home and the last lesson (see `keep`):
    its main area becomes one tab area holding them, the last lesson current; a Chinese lesson saved under
    its old name (`course`'s English one) is reopened under its name now; what names no file of the work
    folder is dropped; the side panels are left as they were. Returns the files rewritten."""
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
        open_paths = [_located(p, work, course) for p in map(_notebook_path, _widgets(main.get("dock"))) if p]
        open_paths = list(dict.fromkeys(p for p in open_paths if p))
        current = _notebook_path(main.get("current"))
        ids = [f"notebook:{p}" for p in keep(open_paths, current and _located(current, work, course), work, lang)]
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
            atomic_files.write(path, new)
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


# ----------------------------------------------------------------------------- the server's output

#: An address JupyterLab prints (it prints each of its addresses with the token).
ADDRESS = re.compile(r"https?://[^\s'\"<>]+")
#: How long JupyterLab's log stays quiet after its addresses before the launch has its say (and at most
#: how long after them it waits: a server that keeps logging does not hide the address for long).
QUIET_S, AT_MOST_S = 1.5, 15.0


def pick_address(addresses, ip):
    """The one address to open among those JupyterLab printed: one with the token, on the host it
    listens on (`ip`) where it printed one, else the first (for 0.0.0.0: the machine's name)."""
    addresses = [a for a in addresses if "/lab" in a or "token=" in a]
    with_token = [a for a in addresses if "token=" in a] or addresses
    return next((a for a in with_token if urlsplit(a).hostname == ip), with_token[0] if with_token else None)


def serve(line, say, ip, out=None):
    """Run JupyterLab (`line`), its output passing through to `out` (stdout); once it has printed its
    addresses and then been quiet QUIET_S (AT_MOST_S at most), print `say(address)`, a list of lines
    (address: pick_address's, None if it printed none), once; if JupyterLab ends first, print them
    then. Ctrl-C goes to JupyterLab alone (it asks whether to stop; twice stops it), as from
    `jupyter lab`. Returns its exit status."""
    out = out or sys.stdout
    process = subprocess.Popen(line, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0,
                               env=dict(os.environ, PYTHONUNBUFFERED="1"))
    chunks = queue.Queue()

    def read():  # (a thread: a pipe cannot be waited on with a timeout on every system)
        for chunk in iter(lambda: os.read(process.stdout.fileno(), 65536), b""):
            chunks.put((time.monotonic(), chunk))  # when it came: the quiet is measured by the output's own times
        chunks.put((time.monotonic(), None))

    threading.Thread(target=read, daemon=True).start()
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal sends Ctrl-C to JupyterLab too: it decides
    signal.signal(signal.SIGTERM, lambda *_: process.terminate())
    seen, said, found_at, last_output = [], False, None, time.monotonic()
    try:
        while True:
            try:
                now, chunk = chunks.get(timeout=0.2)
            except queue.Empty:
                now, chunk = time.monotonic(), b""
            if not said and found_at is not None and (now - last_output >= QUIET_S or now - found_at >= AT_MOST_S):
                _say(out, say(pick_address(seen, ip)))  # before what came after the quiet
                said = True
            if chunk is None:
                break
            if chunk:
                last_output = now
                decoded = chunk.decode("utf-8", "replace")
                out.write(decoded)
                out.flush()
                seen += [address for address in ADDRESS.findall(decoded) if address not in seen]
                if found_at is None and any("/lab" in address or "token=" in address for address in seen):
                    found_at = now
        code = process.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if process.poll() is None:
            process.terminate()
    if not said:
        _say(out, say(pick_address(seen, ip)))
    return code


def _say(out, lines):
    if lines:
        out.write("\n" + "\n".join(lines) + "\n\n")
        out.flush()


def announcement(lang, address, browser, remote_hint, port, changed, work):
    """What the launch says once JupyterLab has started: the one address to open, a word on using it
    from another machine (`remote_hint`), and last the lessons the course changed (`changed`)."""
    lines = []
    if address:
        lines.append(i18n.text(lang, "launch.opened" if browser else "launch.open", url=address))
    if remote_hint:
        lines.append(i18n.text(lang, "launch.address", port=port))
    if changed:
        names = ", ".join(f"{name_lang}/{name}" for name_lang, name in changed)
        lines.append(i18n.text(lang, "learner.changed", lessons=names, work=work))
    return lines


def main(args, lang):
    work = Path(args.work)
    changed = learner.prepare(work, lang, args.course, announce=False)  # (announced last, below)
    trim_workspace(work, lang, args.course)
    remote = args.no_browser or args.ip not in (DEFAULT_IP, "127.0.0.1")
    line = command(work, lang, args.port, args.ip, not args.no_browser, args.jupyter)  # the options it does not know
    return serve(line, lambda address: announcement(lang, address, not args.no_browser, remote, args.port, changed, work),
                 "127.0.0.1" if args.ip == DEFAULT_IP else args.ip)
