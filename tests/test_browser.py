"""Lessons 01 to 08 tested as a learner uses them: in JupyterLab, in a real browser.

The test starts JupyterLab on localhost, opens a notebook of each lesson in headless Chromium (Debian's ``/usr/bin/chromium``, driven by playwright), runs all cells from
the Run menu, moves the first slider of the lesson's explorer widget and waits for the widget's
summary to change: that change needs the kernel round-trip (browser -> kernel -> view function
-> browser). It also checks that no cell raised, no widget failed to display and the kernel
neither died nor restarted. Screenshots go to ``test-artifacts/`` (kept by CI as artifacts).

The notebooks are opened in place but never saved: autosave is off in the throwaway settings
JupyterLab runs with, and the test checks that the committed files are unchanged afterwards.

Without the browser the test is skipped, except under ``CI=true``, where it fails.
"""

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from urllib.parse import quote

import patience
import pytest
from course_utils import file_names
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import sync_playwright

pytestmark = pytest.mark.slow  # left out of `make quick` (the inner loop): see the Makefile

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # these machines run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    # no network here: keep Chromium from trying (and logging refused connections)
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm, where Chromium crashes
]
# Every lesson with a slider-driven explorer whose summary a kernel round-trip changes; 03's
# explorer needs the models the notebook trains, so running it all also proves training in a browser.
# The two languages of a lesson differ only in their words, so the earlier lessons alternate
# between them and the newest lesson opens both: each notebook takes 20-35 s here, and all twelve
# took 5.5 min, most of `make test`'s margin under its 15-minute budget.
NOTEBOOKS = [
    f"notebooks/{lang}/{file_names.lesson_notebook(lesson, lang)}"  # (each language's name: 01_注意力基础.ipynb)
    for lesson, langs in (("01_attention_basics", ("zh",)), ("02_masking", ("en",)),
                          ("03_self_cross_attention", ("zh",)), ("04_multihead_attention", ("en",)),
                          ("05_probsparse", ("zh",)), ("06_transformer", ("en",)),
                          ("07_inference_attention", ("zh",)), ("08_flash_attention", ("en",)),
                          ("09_flash_triton", ("zh",)), ("10_gpt", ("en", "zh")))
    for lang in langs
]

SERVER_START_S = 60  # JupyterLab answering /api/status
KERNEL_READY_S = 60  # kernel started and idle after the notebook opens
RUN_ALL_S = 120  # every cell executed
ROUND_TRIP_S = 30  # slider moved -> summary updated
UI_TIMEOUT_MS = 30_000  # any single playwright action or wait
# (each wait is one of these on a quiet machine, stretched by its slowness when used: tests/patience.py)

# JupyterLab's settings for the test: never write the notebook back, and no news or update
# checks (they would try the network).
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}

# What a learner would see as "the widget or the kernel is broken".
# (the last two: the widget manager extension is missing, so a widget never leaves its text form)
WIDGET_FAILURE_TEXTS = ["Error displaying widget", "Loading widget...", "A Jupyter widget could not be displayed"]
ERROR_IN_STDERR = re.compile(r"Traceback \(most recent call last\)|^\s*\w*(Error|Exception)\b.*:", re.MULTILINE)
WIDGET_ERROR = re.compile(
    r"widget|ipywidgets|Could not create (a )?(model|view)|Class .* not found in module", re.IGNORECASE
)

# One look at the notebook, taken in the page: the kernel's status in the notebook's toolbar and,
# for every cell in order, whether it is code, its prompt ("[3]:", "[*]:" waiting or running,
# "[ ]:" not run) and its stderr outputs. JupyterLab renders a cell's error (traceback) as stderr.
NOTEBOOK_STATE_JS = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    if (!panel) return null;
    const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
    const cells = [...panel.querySelectorAll('.jp-Cell')].map(cell => {
        const prompt = cell.querySelector('.jp-InputArea-prompt');
        return {
            code: cell.classList.contains('jp-CodeCell'),
            prompt: prompt ? prompt.textContent.trim() : '',
            stderr: [...cell.querySelectorAll(
                '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
                .map(output => output.innerText),
        };
    });
    return {kernel: indicator ? indicator.getAttribute('data-status') : null, cells};
}"""


def _require_chromium():
    if CHROMIUM.exists():
        return
    message = f"the browser test needs Debian's Chromium at {CHROMIUM}: apt-get install chromium"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (under CI=true a missing browser is a failure)")
    pytest.skip(message)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def _session(base, token, notebook):
    """The server's session of `notebook` (its kernel's id and execution_state), or None."""
    sessions = _get(f"{base}/api/sessions?token={token}")
    return next((session for session in sessions if session["path"] == notebook), None)


def _shut_down_session(base, token, notebook):
    with contextlib.suppress(Exception):
        session = _session(base, token, notebook)
        if session:
            request = urllib.request.Request(f"{base}/api/sessions/{session['id']}?token={token}", method="DELETE")
            urllib.request.urlopen(request, timeout=10).close()


def _kernel_processes(pid):
    """The server's child processes (its kernels), where psutil can tell."""
    try:
        import psutil
    except ImportError:
        return []
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _stop_server(process, base, token):
    kernels = _kernel_processes(process.pid)
    if process.poll() is None:
        # the server's own shutdown also shuts its kernels down
        with contextlib.suppress(Exception):
            request = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(request, timeout=5).close()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    for kernel in kernels:
        with contextlib.suppress(Exception):
            kernel.kill()


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server on localhost serving the repository, with throwaway config, data,
    runtime, settings and workspace folders; yields (base URL, token)."""
    _require_chromium()  # no browser: do not start a server for nothing
    home = tmp_path_factory.mktemp("jupyter")
    from course_utils.file_names import HOMES

    settings = home / "settings"
    # every cell rendered, not just those in view: the test reads the lesson's cells whole
    lab_settings = {**LAB_SETTINGS, "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}
    for plugin, values in lab_settings.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        # kernelspecs and lab extensions (jupyterlab_widgets) are found under sys.prefix
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_PREFER_ENV_PATH="1",
        IPYTHONDIR=str(home / "ipython"),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    port, token = _free_port(), secrets.token_hex(16)
    base = f"http://127.0.0.1:{port}"
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / "browser-jupyterlab.log"
    command = [
        sys.executable, "-m", "jupyterlab",
        "--allow-root", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={ROOT}",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
        # checkpoints (written when a notebook opens) go to the throwaway folder, not the repo
        f"--FileCheckpoints.checkpoint_dir={home / 'checkpoints'}",
    ]  # fmt: skip
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + patience.seconds(SERVER_START_S)
        while True:
            if process.poll() is not None:
                pytest.fail(f"JupyterLab exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer in {patience.seconds(SERVER_START_S):.0f} s:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.2)
        yield base, token
    finally:
        _stop_server(process, base, token)


def _has_chinese_font():
    """Whether fontconfig (which Chromium uses) knows a Chinese font; True where it cannot tell."""
    if not shutil.which("fc-list"):
        return True
    return bool(subprocess.run(["fc-list", ":lang=zh"], check=False, capture_output=True, text=True).stdout.strip())


@pytest.fixture(scope="module")
def chromium():
    _require_chromium()
    if not _has_chinese_font():
        warnings.warn(
            "no Chinese font for the browser: the zh screenshots show boxes (apt-get install fonts-wqy-microhei)",
            stacklevel=1,
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Notebook:
    """What the page shows of one notebook, read through NOTEBOOK_STATE_JS."""

    def __init__(self, page, path):
        self.page = page
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        self.cell_count = len(cells)
        # a cell tagged raises-exception is meant to show its error (JupyterLab runs on past it)
        self.expected_errors = {
            i for i, cell in enumerate(cells) if "raises-exception" in cell["metadata"].get("tags", [])
        }
        # an empty code cell keeps the prompt "[ ]:" when run
        self.empty = {i for i, cell in enumerate(cells) if not "".join(cell["source"]).strip()}

    def state(self):
        """kernel status, counts of code cells running/queued and not run, errors, other stderr."""
        raw = self.page.evaluate(NOTEBOOK_STATE_JS)
        if raw is None:
            return None
        same = len(raw["cells"]) == self.cell_count  # the page shows the cells of the file
        expected = self.expected_errors if same else set()
        prompts = [
            cell["prompt"] for i, cell in enumerate(raw["cells"]) if cell["code"] and not (same and i in self.empty)
        ]
        stderr = [(i, text) for i, cell in enumerate(raw["cells"]) for text in cell["stderr"]]
        return {
            "kernel": raw["kernel"],
            "running": sum("*" in prompt for prompt in prompts),
            "not_run": sum(not re.search(r"\d", prompt) for prompt in prompts),
            "errors": [
                f"cell {i}:\n{text}" for i, text in stderr if ERROR_IN_STDERR.search(text) and i not in expected
            ],
            "stderr": [f"cell {i}:\n{text}" for i, text in stderr if not ERROR_IN_STDERR.search(text)],
        }

    def wait(self, condition, seconds, what):
        """Poll the state until condition(state) holds; fail with the last state after `seconds`."""
        deadline = time.monotonic() + seconds
        state = None
        while time.monotonic() < deadline:
            state = self.state()
            if state is not None and condition(state):
                return state
            self.page.wait_for_timeout(200)
        pytest.fail(f"{what}: not within {seconds} s; last state of the notebook: {state}")


# Timing an explorer's redraw inside the page, on the page's own clock (playwright's calls, slow on
# a loaded machine, are not in it). Added before JupyterLab loads: every websocket frame to and from
# the kernel is noted (time, direction, bytes), and REDRAW_ARM_JS then notes the time of the
# learner's input (the first keydown or change after it, seen before any handler) and of the
# picture's next load event (its new PNG decoded). From these, where the time goes: the browser
# before it sends the change, the kernel and the way back (the view runs there), and the browser
# showing the picture.
FRAME_LOG_JS = """(() => {
    const Native = window.WebSocket;
    const note = (direction, data) => window.__frames && window.__frames.push(
        [performance.now(), direction, data.byteLength ?? data.size ?? data.length ?? 0]);
    class Logged extends Native {
        constructor(...args) {
            super(...args);
            this.addEventListener('message', event => note('in', event.data));
        }
        send(data) { note('out', data); return super.send(data); }
    }
    window.WebSocket = Logged;
})()"""
REDRAW_ARM_JS = """img => {
    window.__frames = [];
    window.__redraw = {input: null, loaded: null};
    const input = () => { if (window.__redraw.input === null) window.__redraw.input = performance.now(); };
    document.addEventListener('keydown', input, {capture: true, once: true});
    document.addEventListener('change', input, {capture: true, once: true});
    img.addEventListener('load', () => { window.__redraw.loaded = performance.now(); }, {once: true});
}"""
REDRAW_READ_JS = """() => {
    const {input, loaded} = window.__redraw;
    const frames = window.__frames.filter(([t]) => t >= input && t <= loaded);
    const out = frames.find(([, direction]) => direction === 'out');
    const back = frames.filter(([, direction]) => direction === 'in');
    const last = back.length ? back[back.length - 1][0] : loaded;
    return {total: loaded - input, send: out ? out[0] - input : null, kernel: out ? last - out[0] : null,
            show: loaded - last, bytes_in: back.reduce((sum, [, , bytes]) => sum + bytes, 0),
            frames: frames.map(([t, direction, bytes]) => [Math.round(t - input), direction, bytes])};
}"""
#: Lessons whose explorer's first dropdown is timed too (besides the first slider): lesson name -> control.
DROPDOWNS_TIMED = {"07": "window dropdown"}  # (by lesson number: each language names its notebook its own way)
#: Redraws timed per control in the browser (the median is reported; each takes about 0.5 s here).
REDRAWS_TIMED = 3


def _kernel_process(kernel_id):
    """The process of the kernel `kernel_id` (its command line names its connection file), or None
    where psutil cannot tell."""
    try:
        import psutil
    except ImportError:
        return None
    for process in psutil.process_iter(["cmdline"]):
        if any(kernel_id in part for part in process.info["cmdline"] or ()):
            return process
    return None


def _cpu_seconds(process):
    """The CPU time `process` has used so far (user + system), or None."""
    if process is None:
        return None
    with contextlib.suppress(Exception):
        times = process.cpu_times()
        return times.user + times.system
    return None


def _time_redraws(nb, output, act, label, kernel=None):
    """Time REDRAWS_TIMED redraws of the explorer in `output`, act(k) making the k-th input; returns
    {label, median seconds (input -> new picture loaded), and where that median redraw's time went:
    send (browser, input -> change sent), kernel (sent -> last frame back: the view and the trip),
    show (last frame -> picture loaded), KiB received} and the median CPU seconds the kernel process
    (psutil.Process `kernel`, or None) used per redraw: against the kernel's wall time it tells the
    view's own cost from the time it waited for a processor. A hang fails after ROUND_TRIP_S; the
    times are never asserted (they follow the machine's load)."""
    page, image = nb.page, output.locator("img.widget-image").first
    runs, cpu = [], []
    for k in range(REDRAWS_TIMED):
        page.evaluate(REDRAW_ARM_JS, image.element_handle())
        cpu_before = _cpu_seconds(kernel)
        act(k)
        page.wait_for_function("() => window.__redraw.loaded !== null", timeout=patience.seconds(ROUND_TRIP_S) * 1000)
        runs.append(page.evaluate(REDRAW_READ_JS))
        # the next input only once this redraw is over (the summary follows the picture)
        nb.wait(lambda s: s["kernel"] == "idle", patience.seconds(ROUND_TRIP_S), f"kernel idle after a redraw ({label})")
        cpu_after = _cpu_seconds(kernel)
        if cpu_before is not None and cpu_after is not None:
            cpu.append(cpu_after - cpu_before)
    median = sorted(runs, key=lambda run: run["total"])[len(runs) // 2]
    return {"control": label, "seconds": round(median["total"] / 1000, 3),
            "kernel_cpu": round(sorted(cpu)[len(cpu) // 2], 3) if cpu else None,
            **{part: None if median[part] is None else round(median[part] / 1000, 3)
               for part in ("send", "kernel", "show")},
            "KiB_in": round(median["bytes_in"] / 1024, 1), "all_seconds": [round(r["total"] / 1000, 3) for r in runs],
            "frames_ms": median["frames"]}


def _slider_moves(output):
    """act(k) for _time_redraws: the first slider one step away from its end and back, alternately."""
    handle = output.locator(".widget-slider .noUi-handle").first
    first = "ArrowLeft" if handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax") else "ArrowRight"
    other = {"ArrowLeft": "ArrowRight", "ArrowRight": "ArrowLeft"}[first]

    def act(k):
        handle.focus()
        handle.press(first if k % 2 == 0 else other)

    return act


def _dropdown_moves(output):
    """act(k) for _time_redraws: the explorer's first dropdown to its second choice and back, alternately
    (from its first choice)."""
    select = output.locator(".widget-dropdown select").first

    def act(k):
        select.select_option(index=(k + 1) % 2)

    return act


def _choose_kernel_if_asked(page):
    """Where JupyterLab asks which kernel to use, take the one it offers (the notebook's own)."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and "Select Kernel" in dialog.inner_text():
        dialog.locator("button.jp-mod-accept").click()


def _move_first_slider(page, output):
    """Move the first slider of the widget in `output` one step with the keyboard, like a learner;
    return the widget's summary text before and after, and whether its picture changed
    (None where it shows none)."""
    handle = output.locator(".widget-slider .noUi-handle").first
    summary = output.locator(".widget-html-content")
    image = output.locator("img.widget-image").first
    before = summary.all_inner_texts()
    picture = image.get_attribute("src") if image.count() and image.is_visible() else None
    # step away from the end the slider sits at
    at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
    handle.focus()
    handle.press("ArrowLeft" if at_max else "ArrowRight")
    deadline = time.monotonic() + patience.seconds(ROUND_TRIP_S)
    after = summary.all_inner_texts()
    while after == before and time.monotonic() < deadline:
        page.wait_for_timeout(100)
        after = summary.all_inner_texts()
    picture_changed = None
    if picture is not None:
        deadline = time.monotonic() + 5  # the image and the summary come in the same update
        while image.get_attribute("src") == picture and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        picture_changed = image.get_attribute("src") != picture
    return before, after, picture_changed


def run_notebook_in_browser(jupyterlab, chromium, notebook, artifact_stem):
    """Open `notebook` (repo-relative) in JupyterLab, run all cells, move the first slider of
    its first widget and check the round-trip; screenshots go to test-artifacts/<artifact_stem>*.png."""
    base, token = jupyterlab
    path = ROOT / notebook
    assert path.exists(), f"{notebook} is missing"
    digest = _digest(path)
    ARTIFACTS.mkdir(exist_ok=True)
    context = chromium.new_context(viewport={"width": 1280, "height": 1000}, locale="en-US")
    context.set_default_timeout(patience.seconds(UI_TIMEOUT_MS))
    context.add_init_script(FRAME_LOG_JS)
    page = context.new_page()
    page_errors, console_errors = [], []
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
    nb = Notebook(page, path)
    started = time.monotonic()
    try:
        page.goto(f"{base}/lab/tree/{quote(notebook)}?token={token}&reset")
        page.locator(".jp-NotebookPanel .jp-Notebook").wait_for(state="visible")

        # Wait for the kernel. The toolbar says "idle" for a moment before the kernel even starts,
        # so the server must also have this notebook's session with an idle kernel.
        deadline = time.monotonic() + patience.seconds(KERNEL_READY_S)
        while True:
            _choose_kernel_if_asked(page)
            session = _session(base, token, notebook)
            kernel = (nb.state() or {}).get("kernel")
            if session and session["kernel"]["execution_state"] == "idle" and kernel == "idle":
                break
            if time.monotonic() > deadline:
                pytest.fail(f"kernel not ready within {patience.seconds(KERNEL_READY_S):.0f} s: session {session}, toolbar {kernel!r}")
            page.wait_for_timeout(200)
        kernel_id = session["kernel"]["id"]

        # Run -> Run All Cells, from the menu as a learner would
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        # done: every code cell numbered and the kernel idle; or stopped at an error
        state = nb.wait(
            lambda s: s["errors"] or (s["running"] == 0 and s["not_run"] == 0 and s["kernel"] == "idle"),
            patience.seconds(RUN_ALL_S),
            "running all cells",
        )
        ran = time.monotonic() - started
        assert not state["errors"], "a cell raised an error:\n" + "\n\n".join(state["errors"])
        if state["stderr"]:  # warnings are not failures, but a learner sees them: say so
            warnings.warn(f"{notebook} printed to stderr:\n" + "\n".join(state["stderr"]), stacklevel=1)

        # the widget rendered: the first output that holds a slider
        output = page.locator(".jp-OutputArea-output", has=page.locator(".widget-slider")).first
        try:
            output.wait_for(state="visible", timeout=patience.seconds(10) * 1000)
            rendered = True
        except PlaywrightTimeoutError:
            rendered = False
        if not rendered:
            pytest.fail(f"{notebook}: no widget with a slider rendered after running all cells")
        output.scroll_into_view_if_needed()
        for text in WIDGET_FAILURE_TEXTS:
            assert page.get_by_text(text).count() == 0, f"the notebook shows {text!r}"

        before, after, picture_changed = _move_first_slider(page, output)
        assert after != before, (
            f"moving the slider did not update the widget's summary within {ROUND_TRIP_S} s "
            f"(no kernel round-trip): {before!r}"
        )
        if picture_changed is False:
            warnings.warn(f"{notebook}: the widget's picture did not change with its slider", stacklevel=1)
        image = output.locator("img.widget-image").first
        if image.count() and image.is_visible():  # shown at its own size, not stretched to the cell's width
            natural, shown, room = image.evaluate(
                "img => [img.naturalWidth, img.getBoundingClientRect().width, img.parentElement.clientWidth]")
            assert abs(shown - min(natural, room)) <= 1, f"the explorer's {natural}-pixel picture is shown {shown} wide"

        # the kernel finishes the update and goes back to idle: the same kernel, not dead, not restarted
        state = nb.wait(lambda s: s["kernel"] == "idle", patience.seconds(ROUND_TRIP_S), "kernel idle after the round-trip")
        assert not state["errors"], "an error appeared after moving the slider:\n" + "\n\n".join(state["errors"])
        session = _session(base, token, notebook)
        assert session and session["kernel"]["id"] == kernel_id, f"the notebook's kernel was replaced: {session}"
        assert session["kernel"]["execution_state"] == "idle", f"kernel not idle: {session}"
        for text in ["Kernel Restarting", "Kernel Dead", "Error displaying widget"]:
            assert page.get_by_text(text).count() == 0, f"the page shows {text!r}"
        widget_errors = [text for text in page_errors + console_errors if WIDGET_ERROR.search(text)]
        assert not widget_errors, "widget errors in the browser:\n" + "\n".join(widget_errors)
        if page_errors:
            warnings.warn(f"{notebook}: JavaScript errors in the page:\n" + "\n".join(page_errors), stacklevel=1)

        output.screenshot(path=ARTIFACTS / f"{artifact_stem}-widget.png")
        print(
            f"{notebook}: all cells ran in {ran:.1f} s; slider moved the summary {before!r} -> {after!r}, "
            f"picture changed: {picture_changed}; {time.monotonic() - started:.1f} s in all"
        )
        # how long a redraw takes as the learner sees it (printed and kept; never asserted): a
        # measurement, not a test, so only when asked for (`make bench-browser`); it costs several
        # seconds a lesson that `make test` on two cores has no room for
        if os.environ.get("COURSE_TIME_REDRAWS"):
            timing = time.monotonic()
            kernel = _kernel_process(kernel_id)
            redraws = [_time_redraws(nb, output, _slider_moves(output), "first slider", kernel)]
            if Path(notebook).stem[:2] in DROPDOWNS_TIMED:
                redraws.append(_time_redraws(nb, output, _dropdown_moves(output),
                                             DROPDOWNS_TIMED[Path(notebook).stem[:2]], kernel))
            (ARTIFACTS / f"{artifact_stem}-redraws.json").write_text(json.dumps(redraws, indent=1))
            for row in redraws:
                print(f"{notebook}: redraw ({row['control']}) {row['seconds']:.3f} s in the browser "
                      f"(sending {row['send']} s, kernel and back {row['kernel']} s of which the kernel's CPU "
                      f"{row['kernel_cpu']} s, showing {row['show']} s, "
                      f"{row['KiB_in']} KiB received; all: {row['all_seconds']})")
            print(f"{notebook}: timing the redraws took {time.monotonic() - timing:.1f} s")
    finally:
        with contextlib.suppress(Exception):
            page.screenshot(path=ARTIFACTS / f"{artifact_stem}.png")  # also, and above all, on failure
        context.close()
        _shut_down_session(base, token, notebook)
    assert _digest(path) == digest, f"{notebook} changed while the test ran: JupyterLab must never save it"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[f"{Path(n).stem[:2]}-{Path(n).parent.name}" for n in NOTEBOOKS])
def test_lesson_in_jupyterlab(jupyterlab, chromium, notebook):
    lesson, lang = Path(notebook).stem[:2], Path(notebook).parent.name
    run_notebook_in_browser(jupyterlab, chromium, notebook, f"browser-{lesson}-{lang}")


# ----------------------------------------------------------------------------- the learner's home

LESSON_00 = "00_tensor_shapes.ipynb"
OLDER = " (an older version)"


def _older(notebook):
    """Lesson 00 as an older course had it: another heading, and its first exercise (with its check)
    after the second's, where the course has it before."""
    notebook.cells[1].source = notebook.cells[1].source.replace("\n", OLDER + "\n", 1)
    index = {c.metadata.get("exercise"): i for i, c in enumerate(notebook.cells) if c.metadata.get("exercise")}
    first, second = index["00.padding_mask"], index["00.scores_einsum"]
    block = notebook.cells[first:first + 2]
    del notebook.cells[first:first + 2]
    notebook.cells[second:second] = block  # after the second exercise and its check (two cells up now)
    return notebook


@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory):
    """The course as a learner has it after a while, served as `make lab LANG=zh NO_BROWSER=1` serves
    it (`python -m course_utils lab`, JupyterLab rooted at the work folder): copied from an older
    course whose lesson 00 had its cells elsewhere and another heading; lesson 00's first exercise
    solved and Run All in English (by a kernel working there, as the learner's would), then the
    Chinese copy Run All with the exercise still a stub; then `python -m course_utils update`.
    Yields (base URL, token, work folder)."""
    import nbformat
    from nbclient import NotebookClient

    from course_utils import learner

    _require_chromium()
    root = tmp_path_factory.mktemp("learner")
    older, work, home = root / "course", root / "work", root / "jupyter"
    for lang in ("en", "zh"):
        shutil.copytree(ROOT / "notebooks" / lang, older / lang)
        nbformat.write(_older(nbformat.read(older / lang / _name("00", lang), as_version=4)), older / lang / _name("00", lang))
    learner.copy_course(work, older)
    solutions = nbformat.read(ROOT / "notebooks" / "solutions" / "en" / LESSON_00, as_version=4)
    solved = next(c for c in solutions.cells if c.metadata.get("exercise") == "00.padding_mask")
    for lang in ("en", "zh"):
        path = work / lang / _name("00", lang)
        notebook = nbformat.read(path, as_version=4)
        if lang == "en":
            next(c for c in notebook.cells if c.metadata.get("exercise") == "00.padding_mask").source = solved.source
        NotebookClient(notebook, timeout=round(patience.seconds(180)), kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        nbformat.write(notebook, path)
    recorded = learner.load(work)["00.padding_mask"]
    assert (recorded["status"], recorded["lang"]) == ("passed", "en"), recorded  # the Chinese stub changed nothing
    updated = subprocess.run([sys.executable, "-m", "course_utils", "update", str(work), "--lang", "en"],
                             cwd=root, capture_output=True, text=True, timeout=patience.seconds(120))
    assert updated.returncode == 0 and "00.padding_mask" in updated.stdout, updated.stdout + updated.stderr
    with _course_lab(root, work, home, "browser-learner-jupyterlab.log") as (base, token):
        yield base, token, work


@contextlib.contextmanager
def _course_lab(root, work, home, log_name):
    """The course's JupyterLab on `work` as `make lab LANG=zh NO_BROWSER=1` serves it (`python -m
    course_utils lab`, rooted at the work folder), its Jupyter folders in `home`: (base URL, token)."""
    from course_utils.file_names import HOMES

    settings = home / "settings"
    # every cell rendered, not just those in view: the test reads the lesson's cells whole
    lab_settings = {**LAB_SETTINGS, "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"}}
    for plugin, values in lab_settings.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTER_PREFER_ENV_PATH="1", IPYTHONDIR=str(home / "ipython"),
               JUPYTERLAB_SETTINGS_DIR=str(settings),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    port = _free_port()
    base, log_path = f"http://127.0.0.1:{port}", ARTIFACTS / log_name
    ARTIFACTS.mkdir(exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "course_utils", "lab", str(work), "--lang", "zh", "--no-browser",
             "--ip", "127.0.0.1", "--port", str(port), "--",
             f"--FileCheckpoints.checkpoint_dir={home / 'checkpoints'}"],  # fmt: skip
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    token = None
    try:
        deadline = time.monotonic() + patience.seconds(SERVER_START_S)
        while token is None:  # the address with its token, as `make lab NO_BROWSER=1` prints it
            found = re.search(rf"{re.escape(base)}/lab/tree/zh/{re.escape(quote(HOMES['zh']))}\?token=(\w+)",
                              log_path.read_text(encoding="utf-8"))
            token = found and found.group(1)
            if process.poll() is not None or (token is None and time.monotonic() > deadline):
                pytest.fail(f"the course's JupyterLab did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base, token
    finally:
        _stop_server(process, base, token or "")


def _name(lesson, lang):
    """Lesson `lesson`'s notebook's file name in `lang` (01_注意力基础.ipynb in Chinese)."""
    from course_teacher import build

    return build.notebook_name(build.lessons()[lesson], lang)


def _open(page, base, token, notebook):
    page.goto(f"{base}/lab/tree/{quote(notebook)}?token={token}&reset")
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").wait_for(state="visible")


def test_the_learners_lab_shows_live_progress_a_pass_kept_across_languages_and_an_updated_lesson(learner_lab, chromium):
    """What a learner sees on `make lab LANG=zh`: the home, opened at the server's address with nothing
    run, shows the progress as it is (lesson 00's first exercise passed in English, kept though the
    Chinese copy ran its stub after), with a ✔ count per lesson, and links every lesson; a lesson's
    diagram shows from the work folder; the English lesson 00, updated to the course's version, holds
    the learner's answer where the new version puts its exercise; its link to lesson 01 opens it."""
    from course_utils import i18n, learner
    from course_utils.exercises import grading
    from course_teacher import build

    base, token, work = learner_lab
    context = chromium.new_context(viewport={"width": 1280, "height": 1000}, locale="zh-CN")
    context.set_default_timeout(patience.seconds(UI_TIMEOUT_MS))
    context.add_init_script(FRAME_LOG_JS)
    page = context.new_page()
    try:
        page.goto(f"{base}/?token={token}")  # where the browser `make lab` opens goes: the home
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").wait_for(state="visible")
        table = page.locator(".jp-OutputArea-output table").first
        table.wait_for(state="visible")
        row = table.locator("tr", has_text="00.padding_mask")
        assert i18n.text("zh", "progress.passed") in row.inner_text()
        in_00 = sum(e.startswith("00.") for e in _exercise_ids())
        first = table.locator("tbody tr").first  # lesson 00's row, its ✔ count beside all its exercises
        assert first.locator("td").nth(1).inner_text() == i18n.text("zh", "progress.lesson_count", passed=1, total=in_00)
        assert i18n.text("zh", "progress.summary", passed=1, total=len(_exercise_ids())) in page.inner_text("body")
        # JupyterLab renders markdown cells one by one: wait for the last lesson's link rather than for any link
        names = [quote(build.notebook_name(source, "zh")) for source in build.lessons().values()]  # the zh home's
        page.locator(f'.jp-RenderedMarkdown a[href*="/{names[-1]}"]').first.wait_for(state="attached")
        hrefs = page.eval_on_selector_all(".jp-RenderedMarkdown a", "links => links.map(a => a.getAttribute('href'))")
        for name in names:
            assert any(f"/{name}" in str(h) for h in hrefs), (name, hrefs)
        page.screenshot(path=ARTIFACTS / "browser-home-zh.png")
        table.screenshot(path=ARTIFACTS / "browser-home-progress-zh.png")
        # ids and words left-aligned, no tick where nothing passed (lesson 01's count)
        assert table.locator("td").first.evaluate("cell => getComputedStyle(cell).textAlign") == "left"
        counts = table.locator("td.course-lesson-count").all_inner_texts()
        assert counts[1] == i18n.text("zh", "progress.lesson_count_none", passed=0,
                                      total=sum(e.startswith("01.") for e in _exercise_ids()))
        # the time column on one line
        cell = page.locator(".jp-RenderedMarkdown td span", has_text="小时").first
        assert cell.evaluate("span => span.getClientRects().length") == 1
        # a check in a lesson (its kernel, in work/zh/, with this JupyterLab's Jupyter data folder): the open
        # home shows it without a run or a reload
        other = next(e for e in _exercise_ids() if e.startswith("01."))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("JUPYTER_DATA_DIR", str(work.parent / "jupyter" / "data"))
            learner.record(grading.Verdict(other, grading.FAILED, "message", "NO_SCALE"), work / "zh", lang="zh")
        table.locator("tr", has_text=other).filter(has_text="NO_SCALE").wait_for(state="visible")
        assert "00.padding_mask" in table.inner_text()  # the rest as it was

        # the lessons' ../../images/ links, above JupyterLab's root, are served from the work folder's copy
        _open(page, base, token, f"zh/{_name('01', 'zh')}")
        # a diagram of images/ (a lesson's first picture is its Open in Colab badge, from the network)
        image = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown img[src*="images/"]').first
        image.scroll_into_view_if_needed()
        page.wait_for_function("image => image.complete && image.naturalWidth > 0", arg=image.element_handle())
        assert "/files/images/01_sdpa_zh.svg" in image.get_attribute("src")

        lesson = f"en/{LESSON_00}"
        _open(page, base, token, lesson)
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        panel.locator(".jp-Cell").nth(5).wait_for(state="attached")
        texts = panel.locator(".jp-Cell").all_inner_texts()
        assert not any(OLDER in text for text in texts) and "Tensor shapes primer" in texts[1]
        answer = [i for i, text in enumerate(texts) if "BEGIN SOLUTION" in text]
        later = [i for i, text in enumerate(texts) if "def scores_einsum" in text]
        assert answer and later and answer[0] < later[0], "the answer, where the course's version has the exercise"
        link = page.locator('.jp-RenderedMarkdown a[href*="/01_attention_basics.ipynb"]').last
        link.scroll_into_view_if_needed()
        link.click()
        page.locator(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel",
                     has_text="01_attention_basics.ipynb").wait_for(state="visible")
    finally:
        context.close()
    assert len(list((work / "en" / "before-update").glob(f"*_{LESSON_00}"))) == 1


# The labels of the main area's tabs, in order.
TAB_LABELS_JS = """() => [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab .lm-TabBar-tabLabel')]
    .map(label => label.textContent)"""


@pytest.fixture(scope="module")
def fresh_lab(tmp_path_factory):
    """The course's JupyterLab on a learner's first launch (`make lab LANG=zh NO_BROWSER=1`): (base URL, token)."""
    from course_utils import learner

    _require_chromium()
    root = tmp_path_factory.mktemp("fresh")
    learner.copy_course(root / "work")
    with _course_lab(root, root / "work", root / "jupyter", "browser-tabs-jupyterlab.log") as lab:
        yield lab


def _browse(page, folder):
    """The file browser (shown, if the side bar hides it) in `folder`, a folder at the lab's root."""
    if not page.locator(".jp-FileBrowser").is_visible():
        page.locator('.jp-SideBar .lm-TabBar-tab[data-id="filebrowser"]').click()
    page.locator(".jp-FileBrowser .jp-BreadCrumbs-home").click()
    page.locator(".jp-FileBrowser .jp-DirListing-itemText").get_by_text(folder, exact=True).dblclick()
    page.locator(".jp-FileBrowser .jp-BreadCrumbs", has_text=folder).wait_for(state="visible")


def _open_from_browser(page, folder, name):
    """Open `folder`/`name` (relative to the lab's root) as a learner does, with a double click in the file
    browser; wait for its tab to be the current one."""
    _browse(page, folder)
    page.locator(".jp-FileBrowser .jp-DirListing-itemText").get_by_text(name, exact=True).dblclick()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel",
                 has_text=name).wait_for(state="visible")


def test_the_tabs_tell_the_two_languages_apart(fresh_lab, chromium):
    """Issue 40: both languages' copies had the same names, so two tabs read `index.ipynb` and two
    `09_flash_trit…`. With the English and the Chinese homes and lesson 01 in each language open, the four
    tabs read four names, each different from the other language's within its first 12 characters (a tab
    shows about 15), and the file browser lists no name in both language folders."""
    from course_utils import file_names

    base, token = fresh_lab
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="zh-CN")
    context.set_default_timeout(patience.seconds(UI_TIMEOUT_MS))
    page = context.new_page()
    opened = [("zh", file_names.HOMES["zh"]), ("en", file_names.HOMES["en"]), ("zh", _name("01", "zh")),
              ("en", _name("01", "en"))]
    try:
        page.goto(f"{base}/?token={token}")  # where `make lab` opens: the Chinese home
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel",
                     has_text=file_names.HOMES["zh"]).wait_for(state="visible")
        for folder, name in opened[1:]:
            _open_from_browser(page, folder, name)
        labels = page.evaluate(TAB_LABELS_JS)
        page.screenshot(path=ARTIFACTS / "browser-tabs.png")
        listed = {}
        for folder in ("en", "zh"):
            _browse(page, folder)
            lesson = opened[2 if folder == "zh" else 3][1]
            page.locator(".jp-FileBrowser .jp-DirListing-itemText").get_by_text(lesson, exact=True).wait_for()
            listed[folder] = {text.strip() for text in page.locator(".jp-FileBrowser .jp-DirListing-itemText").all_inner_texts()}
    finally:
        context.close()
    assert sorted(labels) == sorted(name for _folder, name in opened), labels
    for en in (name for folder, name in opened if folder == "en"):
        for zh in (name for folder, name in opened if folder == "zh"):
            assert en[:12] != zh[:12], (en, zh)
    assert len(listed["en"]) > 10 and len(listed["zh"]) > 10 and not listed["en"] & listed["zh"], listed


# Whether the element of a link's fragment is in view in the main area's current tab (JupyterLab keeps
# an element's id as data-jupyter-id): [tab label, the element is there, its top is inside the tab].
IN_VIEW_JS = """id => {
    const tab = document.querySelector('.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel');
    for (const widget of document.querySelectorAll('.jp-MainAreaWidget:not(.lm-mod-hidden)')) {
        const element = widget.querySelector(`[data-jupyter-id="${CSS.escape(id)}"]`);
        if (!element) continue;
        const box = element.getBoundingClientRect(), frame = widget.getBoundingClientRect();
        return [tab && tab.textContent, true, box.top >= frame.top && box.top < frame.bottom];
    }
    return [tab && tab.textContent, false, false];
}"""


def _follow(page, link, label, fragment):
    """Click `link` and wait until the tab `label` is current with the element `fragment` in view."""
    link.scroll_into_view_if_needed()
    link.click()
    deadline, state = time.monotonic() + 20, None
    while time.monotonic() < deadline:
        state = page.evaluate(IN_VIEW_JS, fragment)
        if state == [label, True, True]:
            return
        page.wait_for_timeout(200)
    pytest.fail(f"following the link to {label}#{fragment}: [tab, found, in view] = {state}")


def test_a_terms_link_opens_its_glossary_entry_and_the_entry_the_section_that_teaches_it(learner_lab, chromium):
    """In the learner's lab (JupyterLab rooted at the work folder), in Chinese: a lesson's first use of a
    term opens the glossary beside it at the term's entry, and the entry's link opens the lesson at the
    section that teaches it. That section's heading is Chinese, whose own id JupyterLab cannot find
    from a link (it compares the fragment percent-encoded): the link names the anchor the build put
    there (course_teacher.glossary)."""
    from course_teacher import build, glossary

    base, token, _work = learner_lab
    term = next(t for t in build.glossary_source()[0] if t.defined and t.key == "sparsity-measure")
    notebook, page_name = build.notebook_name(build.lessons()[term.lesson], "zh"), glossary.PAGES["zh"]
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="zh-CN")
    context.set_default_timeout(patience.seconds(UI_TIMEOUT_MS))
    page = context.new_page()
    try:
        _open(page, base, token, f"zh/{notebook}")
        link = page.locator(f'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown a[href*="/{quote(page_name)}"]'
                            f'[href$="#{term.key}"]')
        _follow(page, link, page_name, term.key)
        section = glossary.slug(term.section)
        back = page.locator(f'.jp-MainAreaWidget:not(.lm-mod-hidden) .jp-RenderedMarkdown a[href*="/{quote(notebook)}"]'
                            f'[href$="#{section}"]').first
        _follow(page, back, notebook, section)
        page.screenshot(path=ARTIFACTS / "browser-glossary-zh.png")
    finally:
        context.close()
        _shut_down_session(base, token, f"zh/{notebook}")


def _exercise_ids():
    from course_utils.exercises import EXERCISES

    return EXERCISES
