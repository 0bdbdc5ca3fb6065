"""The benchmarks' results as data: one JSON file per benchmark and device, in course_utils/results/,
in the format course_utils.measured documents and reads (``<benchmark>-<device>.json``).

Every benchmark measures on each device it is given (``--device all``, the default: the CPU, and a
CUDA GPU when torch sees one), prints its tables, and writes its figures with ``write``::

    for device in record.devices(args.device):
        settings, figures = measure(device)
        record.write("probsparse", device, settings, figures, args.out)

Commit the files a run writes where they are worth keeping: the lessons show the GPU's figures beside
their own CPU measurements, with the device, torch version and date each file records.
"""

import datetime
import json
import math
import os
import platform
import time
from pathlib import Path

import torch

from course_utils import measured

RESULTS = measured.RESULTS


def add_arguments(parser):
    """The two options every benchmark takes: which devices, and where the results go."""
    parser.add_argument("--device", choices=("all", *measured.DEVICES), default="all",
                        help="measure on this device only (default: the CPU, and CUDA when torch sees a GPU)")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help=f"write the results' JSON files here (default: {RESULTS.relative_to(RESULTS.parents[1])})")


def devices(choice="all"):
    """The devices to measure on: ["cpu"] and "cuda" when there is a GPU, or the one asked for."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device cuda: torch {torch.__version__} sees no CUDA device here")
    if choice != "all":
        return [choice]
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _plain(value):
    """A figure's value as JSON keeps it: numbers rounded to 6 significant digits, NaN as null."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if not isinstance(value, float) and not hasattr(value, "__float__"):
        return value  # not a number: left as it is, for measured.validate to name
    value = float(value)
    if not math.isfinite(value):
        return None
    return float(f"{value:.6g}")


def write(benchmark, device, settings, figures, folder=None):
    """Write `figures` ([{name: value}]) of `benchmark` on `device` with `settings` ({name: value}) to
    <folder>/<benchmark>-<device>.json; returns the path."""
    data = {
        "format": measured.FORMAT,
        "benchmark": benchmark,
        "device": device,
        "device_name": measured.device_name(device),
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "settings": {name: _plain(value) if not isinstance(value, (list, tuple)) else [_plain(v) for v in value]
                     for name, value in settings.items()},
        "figures": [{name: _plain(value) for name, value in row.items()} for row in figures],
    }
    problems = measured.validate(data)
    if problems:
        raise ValueError(f"{benchmark} on {device}: {'; '.join(problems)}")
    target = measured.path(benchmark, device, folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(dumps(data), encoding="utf-8")
    return target


def dumps(data):
    """The file's text: one field a line, and one line per figure, so that a new run's diff reads row by row."""
    def one(value):
        return json.dumps(value, ensure_ascii=False)

    lines = [f" {one(name)}: {one(value)}," for name, value in data.items() if name != "figures"]
    rows = [f"  {one(row)}," for row in data["figures"]]
    if rows:
        rows[-1] = rows[-1].rstrip(",")
    return "\n".join(["{", *lines, ' "figures": [', *rows, " ]", "}"]) + "\n"


def machine_line(load=True):
    """What the CPU figures of a run depend on, printed at its start: torch, its CPU kernels, threads,
    the processor, and (`load`) the machine's load when the run began."""
    line = (f"torch {torch.__version__}, CPU kernels {torch.backends.cpu.get_cpu_capability()}, "
            f"{torch.get_num_threads()} thread, {platform.processor() or platform.machine()}")
    if load:
        average = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        line += f", {os.cpu_count()} CPUs, load average {average:.1f} at start"
    return line


def timed(call, device="cpu"):
    """(seconds, result) of ``call()``, the GPU's queue drained before and after on a CUDA device."""
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = call()
    if cuda:
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, result
