"""benchmarks/gpu_session.sh, the one prepared session on a lent GPU machine, run here with a stand-in
for python that records each command it is given (and whether MPLBACKEND is set for it): the session
runs the GPU tests, lesson 09's four notebooks under nbval and its benchmark (float16 and bfloat16),
the solution notebooks of lessons 05 to 08 under nbval with the kernel's own (inline) plotting
backend, then the four other benchmarks on the GPU, each within its budget, and nothing once the
session's time is spent. (The first H200 run had the notebooks inherit the session's
MPLBACKEND=Agg: every figure cell of 05, 07 and 08 then showed nothing, and nbval reported "Missing
output fields text/plain".) About a second."""

import os
import subprocess
from pathlib import Path

from course_utils import file_names

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_session.sh"
STAND_IN = """#!/bin/sh
printf '%s|%s\\n' "${MPLBACKEND-unset}" "$*" >> "$CALLS"
"""


def _session(tmp_path, **env):
    python = tmp_path / "python"
    python.write_text(STAND_IN, encoding="utf-8")
    python.chmod(0o755)
    calls = tmp_path / "calls.log"
    calls.touch()
    out = tmp_path / "out"
    environment = {key: value for key, value in os.environ.items() if key != "MPLBACKEND"}
    environment.update({"OUT": str(out), "PYTHON": str(python), "CALLS": str(calls), "WHEELS": "none", **env})
    finished = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=environment, capture_output=True, text=True,
                              timeout=60, check=False)
    return finished, [line.split("|", 1) for line in calls.read_text(encoding="utf-8").splitlines()], out


LESSON_09 = [f"notebooks/{folder}/{file_names.lesson_notebook('09_flash_triton', folder[-2:])}"  # 09_Triton版… in zh
             for folder in ("en", "zh", "solutions/en", "solutions/zh")]


def test_the_session_runs_the_tests_the_notebooks_and_the_benchmarks_in_that_order(tmp_path):
    finished, calls, out = _session(tmp_path)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    steps = [(backend, args) for backend, args in calls if args.startswith(("-m pytest", "benchmarks/bench_"))]
    tests, lesson09, flash, notebooks, *benches = steps
    # lesson 09 on the GPU: its four notebooks under nbval (plotting inline), then its benchmark in both dtypes
    assert "--nbval" in lesson09[1] and lesson09[1].split()[-4:] == LESSON_09 and "-n 4" in lesson09[1], lesson09
    assert lesson09[0] == "unset"
    assert flash[1].startswith("benchmarks/bench_flash_triton.py --device cuda"), flash
    assert f"--out {out}/results" in flash[1] and "--dtypes float16 bfloat16" in flash[1], flash
    assert "-m gpu" in tests[1] and tests[1].endswith("tests/test_gpu.py"), tests
    lessons = [f"notebooks/solutions/en/{name}" for name in
               ("05_probsparse.ipynb", "06_transformer.ipynb", "07_inference_attention.ipynb",
                "08_flash_attention.ipynb")]
    assert "--nbval" in notebooks[1] and notebooks[1].split()[-4:] == lessons and "-n 4" in notebooks[1], notebooks
    assert notebooks[0] == "unset", "the notebooks' kernel must plot inline, not with the session's Agg"
    assert tests[0] == "Agg"  # (the stand-in does see the session's variable where it is set)
    assert [args.split()[0] for _, args in benches] == [f"benchmarks/bench_{name}.py" for name in
                                                         ("multihead", "probsparse", "decoding", "tiled")]
    assert all(f"--device cuda --out {out}/results" in args for _, args in benches), benches
    summary = finished.stdout.split("===== summary")[1]
    for name in ("gpu tests", "notebooks 09", "bench_flash_triton", "notebooks 05-08", "bench_multihead",
                 "bench_tiled"):
        assert any(line.startswith(name) and " ok " in line for line in summary.splitlines()), summary


def test_nothing_runs_once_the_sessions_time_is_spent(tmp_path):
    finished, calls, _ = _session(tmp_path, TOTAL="5")
    assert not [args for _, args in calls if args.startswith(("-m pytest", "benchmarks/bench_"))], calls
    assert finished.stdout.count("not run: the session's 5 s are spent") == 8, finished.stdout[-2000:]


def _ran(calls):
    """The steps' last words: the test file, the last notebook, or the benchmark's script."""
    return [args.split()[0] if args.startswith("benchmarks/") else args.split()[-1] for _, args in calls
            if args.startswith(("-m pytest", "benchmarks/bench_"))]


def test_a_session_of_lesson_09_alone_and_one_without_it(tmp_path):
    (tmp_path / "only").mkdir()
    finished, calls, _ = _session(tmp_path / "only", LESSON09="only")
    assert finished.returncode == 0, finished.stdout[-2000:]
    assert _ran(calls) == ["tests/test_gpu.py", LESSON_09[-1], "benchmarks/bench_flash_triton.py"], calls
    (tmp_path / "without").mkdir()
    finished, calls, _ = _session(tmp_path / "without", LESSON09="0")
    assert finished.returncode == 0, finished.stdout[-2000:]
    assert "benchmarks/bench_tiled.py" in _ran(calls), calls
    assert not [args for _, args in calls if "/09_" in args or "bench_flash_triton" in args], calls
