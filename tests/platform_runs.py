"""Each grading platform as its user gets it, on this machine: the artifact the teacher uploads,
unpacked where the platform unpacks it, set up and run as the platform runs it, in a container of
its own that does not hold this repository (test_platforms.py).

The container is bubblewrap around the machine's own system, read-only (its Python, its apt
packages, pip's configuration), with a /tmp, a /run and a HOME of its own: root with Docker's default capabilities (not CAP_SYS_ADMIN, so the grader's own
sandbox cannot be made there, as in a platform's container), a PID namespace of its own, this
repository hidden under an empty folder, the environment cleared, and no network while grading.

- Gradescope (its specification, gradescope-autograders.readthedocs.io/en/latest/specs): the zip
  unpacked in /autograder/source, setup.sh run once as root (apt-get is a stand-in that records
  what it was asked to install: the machine has Python 3.11, its venv module and bubblewrap), the
  submission in /autograder/submission, run_autograder copied to /autograder/run_autograder and run
  from /autograder, /autograder/results/results.json read.
- Classroom 50 (its wiki's "Advanced Autograding"): the folder a teacher copies to
  CLASSROOM/autograders/ASSIGNMENT/, downloaded by the runner into a folder of its own; autograder.py
  run by the runtime's Python with the student's checkout as its working folder and the runner's
  variables; ./result.json and ./release-body.md read. The first run installs the course (the
  network is there then); the test grades with the network cut.

To grade many artifacts with one installation (make test-platforms), a platform's environment
stays where the platform keeps it (/autograder/venv; the bundle's .venv) while each artifact's
files are bound in turn where the platform puts them: the environments are the same for every
lesson and language (one lock, one pair of wheels), and the first artifact's setup is the real one.
"""

import json
import os
import shutil
import subprocess
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Docker's default capabilities: what a root process in a platform's container holds.
DOCKER_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
                       "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE")
SETUP_S, GRADE_S = 900, 600


def available():
    """(True, "") when this machine can make the containers (bwrap, as root), else (False, why)."""
    if shutil.which("bwrap") is None:
        return False, "no bwrap (apt-get install bubblewrap)"
    if os.geteuid() != 0:
        return False, "the platforms' containers run as root; these tests need root too"
    done = subprocess.run(container_command({}, ["true"], network=False, cwd="/"), capture_output=True, text=True,
                          check=False)
    return (done.returncode == 0, done.stderr.strip()[-300:])


def container_command(binds, command, *, network, cwd, environment=None):
    """The bwrap command line that runs `command` in a platform's container (module docstring),
    with `binds` {outside path: inside path} read-write."""
    line = ["bwrap"]
    for entry in sorted(os.listdir("/")):  # the machine's system, read-only; a /tmp, /home and HOME of its own
        path = f"/{entry}"
        if os.path.islink(path):
            line += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path) and entry not in ("proc", "dev", "tmp", "root", "home"):
            line += ["--ro-bind", path, path]
    line += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp", "--tmpfs", "/root",
             "--tmpfs", "/home", "--tmpfs", "/run", "--tmpfs", str(ROOT)]
    # where this machine's pip finds packages (its user configuration and PIP_* variables: the
    # package indexes a platform reaches on the network), and its cache of what it downloaded
    config, cache = Path.home() / ".config" / "pip", Path.home() / ".cache" / "pip"
    if config.is_dir():
        line += ["--ro-bind", str(config), "/root/.config/pip"]
    if cache.is_dir():
        line += ["--bind", str(cache), "/root/.cache/pip"]
    # a folder bwrap makes for a bind takes its source's parent's mode (a test's are 0700): 0755, as a platform's
    for folder in sorted({str(a) for inside in binds.values() for a in Path(inside).parents} - {"/"}):
        if not os.path.exists(folder):
            line += ["--perms", "0755", "--dir", folder]
    for outside, inside in binds.items():
        line += ["--bind", str(outside), str(inside)]
    line += ["--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for capability in DOCKER_CAPABILITIES:
        line += ["--cap-add", f"CAP_{capability}"]
    if not network:
        line += ["--unshare-net"]
    line += ["--clearenv"]
    pip = {name: value for name, value in os.environ.items() if name.startswith("PIP_")}
    for name, value in {**pip, "PATH": SYSTEM_PATH, "HOME": "/root", "LANG": "C.UTF-8", **(environment or {})}.items():
        line += ["--setenv", name, value]
    return line + ["--chdir", str(cwd), "--", *command]


def run(binds, command, *, network, cwd, environment=None, timeout=GRADE_S):
    done = subprocess.run(container_command(binds, command, network=network, cwd=cwd, environment=environment),
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{command} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


class Gradescope:
    """An autograder zip as Gradescope runs it: ``setup(zip)`` once, then ``grade(zip, files)``."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.venv = self.folder / "venv"  # /autograder/venv, kept between submissions of any zip
        self.fake_apt = self.folder / "fakebin"
        self.fake_apt.mkdir(parents=True, exist_ok=True)
        (self.fake_apt / "apt-get").write_text(textwrap.dedent("""\
            #!/bin/sh
            echo "apt-get $*" >> /autograder/apt.log
            """))
        (self.fake_apt / "apt-get").chmod(0o755)
        self.venv.mkdir(exist_ok=True)

    def _autograder(self, zip_path, submission=None, metadata=None):
        """A fresh /autograder for one run: the zip's files in source/, run_autograder copied up."""
        root = self.folder / "autograder"
        if root.exists():
            shutil.rmtree(root)
        (root / "submission").mkdir(parents=True)
        (root / "venv").mkdir()
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(root / "source")
        for name in ("setup.sh", "run_autograder"):  # zipfile keeps no permissions: as Gradescope unpacks them
            info = zipfile.ZipFile(zip_path).getinfo(name)
            (root / "source" / name).chmod((info.external_attr >> 16) & 0o777)
        shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
        for name, data in (submission or {}).items():
            path = root / "submission" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        if metadata is not None:
            (root / "submission_metadata.json").write_text(json.dumps(metadata))
        return root

    def _binds(self, root):
        return {root: "/autograder", self.venv: "/autograder/venv", self.fake_apt: "/fakebin"}

    def setup(self, zip_path):
        """setup.sh, as Gradescope runs it when it builds the image: the network is there."""
        root = self._autograder(zip_path)
        done = run(self._binds(root), ["bash", "/autograder/source/setup.sh"], network=True, cwd="/autograder",
                   environment={"PATH": f"/fakebin:{SYSTEM_PATH}"}, timeout=SETUP_S)
        return done, (root / "apt.log").read_text()

    def grade(self, zip_path, submission, metadata=None):
        """results.json for `submission` ({file name: bytes}), run without network."""
        root = self._autograder(zip_path, submission, metadata)
        done = run(self._binds(root), ["/autograder/run_autograder"], network=False, cwd="/autograder")
        return json.loads((root / "results" / "results.json").read_text(encoding="utf-8")), done


class Classroom50:
    """An autograder folder as Classroom 50's runner runs it in a student's repository."""

    RUNNER = {"CLASSROOM": "attn-2026", "ASSIGNMENT": "lesson", "OWNER": "ada", "SUBMISSION_TAG": "submit/x-1",
              "COMMIT_URL": "https://github.com/ada/c/commit/1", "RELEASE_URL": "https://github.com/ada/c/releases/1"}

    def __init__(self, folder):
        self.folder = Path(folder)
        self.venv = self.folder / "venv"  # the bundle's .venv, kept between runs of any bundle
        self.venv.mkdir(parents=True, exist_ok=True)

    def _binds(self, bundle, checkout):
        return {bundle: "/runner/bundle", self.venv: "/runner/bundle/.venv", checkout: "/runner/work"}

    def grade(self, bundle, checkout, *, network=False):
        """result.json and release-body.md of the checkout, graded by the bundle; the first run
        (network=True) installs the course, as the runner's first grading does."""
        done = run(self._binds(bundle, checkout), ["python3.11", "/runner/bundle/autograder.py"], network=network,
                   cwd="/runner/work", environment=self.RUNNER, timeout=SETUP_S if network else GRADE_S)
        return (json.loads((checkout / "result.json").read_text(encoding="utf-8")),
                (checkout / "release-body.md").read_text(encoding="utf-8"), done)


def checkout(folder, files, when="2026-11-20T08:30:00Z"):
    """A student's repository: `files` {path: bytes} committed at `when`."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    git = ["git", "-c", "user.name=ada", "-c", "user.email=ada@example.org"]
    dates = {**os.environ, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "my work"], cwd=folder, check=True, env=dates)
    return folder
