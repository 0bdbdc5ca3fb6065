"""What the course's benchmarks measured, on which device, and timing a call on a GPU in a lesson.

``make bench`` (benchmarks/) times and weighs the lessons' comparisons on every device present: the
CPU always, a CUDA GPU when torch sees one. Each benchmark writes its results on each device as one
JSON file, ``course_utils/results/<benchmark>-<device>.json``. A lesson measures the CPU live and shows
the GPU's committed figures beside them, saying where and when they were measured::

    gpu = measured.load("probsparse", "cuda")   # None when no such file is committed
    print(gpu.provenance())                     # Measured on the NVIDIA H200 with torch 2.11.0 on 2026-05-03 ...
    for row in gpu.rows(part="time"):
        print(row["L"], row["course_ms"])

A file is one JSON object (``FORMAT`` names this layout; a change of layout gets a new name):

    format        "attention-course/benchmark/1"
    benchmark     the benchmark's name: "multihead", "probsparse", "decoding", "tiled"
    device        "cpu" or "cuda"
    device_name   the processor's or the GPU's name, as the system or torch reports it
    torch         torch.__version__ of the run
    date          the day it ran, YYYY-MM-DD (UTC)
    settings      what every figure of the file shares (sizes, dtype, threads, rounds): {name: value}
    figures       one record per measured configuration, its parameters and its measures:
                  [{name: number, text or null}]; a measure's name ends in its unit (_ms, _s, _bytes)
                  and null is "not measured" (too large for the device, or skipped)

The benchmarks write the files (benchmarks/record.py); the lessons read them here. Nothing here is a
test: timings vary with the machine and its load; compare the figures of one file with each other.
"""

import json
import statistics
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch

from . import i18n
from . import validation as check

#: Where the benchmarks write their results and the lessons read them: results/ inside this package,
#: so that the committed figures travel with it (package data: the student bundle, a Colab install).
RESULTS = Path(__file__).resolve().parent / "results"
FORMAT = "attention-course/benchmark/1"
DEVICES = ("cpu", "cuda")
#: Each field of a file and the type its value has.
FIELDS = {"format": str, "benchmark": str, "device": str, "device_name": str, "torch": str, "date": str,
          "settings": dict, "figures": list}


@dataclass(frozen=True)
class Result:
    """One benchmark's results on one device, as its file holds them."""

    benchmark: str
    device: str
    device_name: str
    torch: str
    date: str
    settings: dict
    figures: list
    file: str = ""  # the file's name in course_utils/results/

    def rows(self, **where):
        """The figures whose fields equal `where` ({} gives every figure), in the file's order."""
        return [row for row in self.figures if all(row.get(key) == value for key, value in where.items())]

    def one(self, **where):
        """The one figure whose fields equal `where`; ValueError when there is none or more than one."""
        found = self.rows(**where)
        if len(found) != 1:
            raise ValueError(f"{self.file}: {len(found)} figures match {where}; needs exactly one")
        return found[0]

    def provenance(self):
        """Where and when the figures were measured, a sentence in the notebook's language."""
        return i18n.message("measured.provenance", name=self.device_name, torch=self.torch, date=self.date,
                            file=self.file)


def path(benchmark, device, folder=None):
    """The file of `benchmark`'s results on `device` ("cpu" or "cuda")."""
    _names("path", benchmark, device, folder)
    return Path(folder or RESULTS) / f"{benchmark}-{device}.json"


def _names(function, benchmark, device, folder=None):
    """A benchmark's name (a word: it makes a file's name), a device of DEVICES and a folder."""
    if not isinstance(benchmark, str) or not benchmark.isidentifier():
        check.fail(function, "benchmark", check.describe(benchmark),
                   {"en": "a benchmark's name, such as 'probsparse'", "zh": "基准测试的名字，例如 'probsparse'"})
    check.one_of(function, "device", device, DEVICES)
    if folder is not None and not isinstance(folder, (str, Path)):
        check.fail(function, "folder", check.describe(folder),
                   {"en": "None or a folder's path", "zh": "None 或文件夹路径"})


def load(benchmark, device="cuda", folder=None):
    """`benchmark`'s committed results on `device` as a Result, or None when no file holds them.
    A file that is not of this format raises ValueError, naming the file and what is wrong."""
    _names("load", benchmark, device, folder)
    file = path(benchmark, device, folder)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{file}: not JSON ({error})") from None
    problems = validate(data)
    if not problems and (data["benchmark"], data["device"]) != (benchmark, device):
        problems = [f"holds {data['benchmark']!r} on {data['device']!r}, not {benchmark!r} on {device!r}"]
    if problems:
        raise ValueError(f"{file}: {'; '.join(problems)}")
    return Result(**{name: data[name] for name in FIELDS if name != "format"}, file=file.name)


def validate(data):
    """What is wrong with `data` as a results file (a list of sentences; empty when nothing is)."""
    if not isinstance(data, dict):
        return ["needs a JSON object"]
    problems = [f"field {name!r}: needs a {kind.__name__}" for name, kind in FIELDS.items()
                if not isinstance(data.get(name), kind)]
    if problems:
        return problems
    if data["format"] != FORMAT:
        problems.append(f"format {data['format']!r}: needs {FORMAT!r}")
    if data["device"] not in DEVICES:
        problems.append(f"device {data['device']!r}: needs one of {', '.join(DEVICES)}")
    if not all(isinstance(row, dict) for row in data["figures"]):
        problems.append("figures: needs a list of objects")
    else:
        odd = sorted({name for row in data["figures"] for name, value in row.items()
                      if not (value is None or isinstance(value, (int, float, str)))})
        if odd:
            problems.append(f"figures: the values of {', '.join(odd)} need to be numbers, text or null")
    if len(data["date"]) != 10 or data["date"][4::3] != "--":
        problems.append(f"date {data['date']!r}: needs YYYY-MM-DD")
    return problems


def missing(benchmark, device="cuda"):
    """The sentence a lesson prints where no results of `benchmark` on `device` are committed."""
    _names("missing", benchmark, device)
    return i18n.message("measured.none", device=device.upper() if device == "cuda" else device,
                        file=path(benchmark, device).name)


def table(benchmark, columns, device="cuda", folder=None, **where):
    """Print `benchmark`'s committed figures on `device` under a line that says where and when they
    were measured, or, when no file holds them, the sentence that says so. `columns` is {heading:
    function of one figure giving its cell}, headings in the notebook's language; `where` picks the
    figures (``part="bar"``). Returns None: a lesson's cell ends with this call, and a value returned
    would be shown after the table (measured.load gives the Result)."""
    _names("table", benchmark, device, folder)
    if not isinstance(columns, dict) or not all(isinstance(h, str) and callable(c) for h, c in columns.items()):
        check.fail("table", "columns", check.describe(columns),
                   {"en": "a dict {heading: function of one figure giving its cell}",
                    "zh": "字典 {列标题: 由一条记录算出单元格的函数}"})
    result = load(benchmark, device, folder)
    if result is None:
        print(missing(benchmark, device))
        return
    print(result.provenance())
    rows = [[str(cell(row)) for cell in columns.values()] for row in result.rows(**where)]
    widths = [max([_width(heading)] + [_width(row[i]) for row in rows]) for i, heading in enumerate(columns)]
    for line in ([list(columns)] + rows):
        print("  ".join(" " * (width - _width(text)) + text for text, width in zip(line, widths)))


def _width(text):
    """Columns `text` takes in a monospaced font: a CJK character takes two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def ratio(numerator, denominator, digits=2):
    """numerator / denominator as text ("0.16×"), or "–" when either was not measured (null)."""
    for argument, value in (("numerator", numerator), ("denominator", denominator)):
        if value is not None:  # None: not measured
            check.number("ratio", argument, value)
    check.whole_number("ratio", "digits", digits, 0, 20)
    if numerator is None or not denominator:
        return "–"
    return f"{numerator / denominator:.{digits}f}×"


# ----------------------------------------------------------------------------- measuring on a device

def on_gpu(measure):
    """``measure(device)`` on this runtime's GPU, after a line that names it; where there is none, a
    line that says so (and how to get one on Colab) and None. A lesson's speed section calls it after
    measuring on the CPU, in a cell whose output nbval ignores."""
    check.function_of_nothing("on_gpu", "measure", measure)
    device = gpu()
    if device is None:
        print(i18n.message("measured.no_gpu"))
        return None
    print(i18n.message("measured.on_gpu", device=torch.cuda.get_device_name(device)))
    return measure(device)


def gpu():
    """The CUDA device when torch sees one, else None: a lesson measures there too when it is not None."""
    return torch.device("cuda") if torch.cuda.is_available() else None


def device_name(device):
    """The name of `device` ("cpu", "cuda", a torch.device): the GPU's as torch reports it, the
    processor's as the system does."""
    device = _device("device_name", device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "CPU"


def _device(function, device):
    """`device` as a torch.device this machine has ('cuda' where there is no GPU is refused here
    rather than by torch's CUDA assertions)."""
    try:
        where = device if isinstance(device, torch.device) else torch.device(device)
        torch.empty(0, device=where)
        return where
    except (TypeError, ValueError, RuntimeError, AssertionError):
        check.fail(function, "device", check.describe(device),
                   {"en": "a torch.device or the name of a device this machine has, such as 'cpu'",
                    "zh": "torch.device，或本机有的设备名，例如 'cpu'"})


def _synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def milliseconds(call, device="cpu", repeat=3, warmup=1):
    """The median wall time of ``call()`` in milliseconds, over `repeat` runs after `warmup` runs, on
    `device`: a GPU runs its kernels after the call returns, so each run waits for them to finish."""
    check.function_of_nothing("milliseconds", "call", call)
    device = _device("milliseconds", device)
    check.positive_int("milliseconds", "repeat", repeat)  # the median of no time has no value
    check.whole_number("milliseconds", "warmup", warmup)
    for _ in range(warmup):
        call()
    _synchronize(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def cuda_peak_bytes(call, device="cuda"):
    """(result, the most bytes the call had allocated on the GPU at once beyond what was allocated
    before it): torch's caching allocator counts every tensor the call makes, its result included."""
    check.function_of_nothing("cuda_peak_bytes", "call", call)
    device = _device("cuda_peak_bytes", device)
    if device.type != "cuda":
        check.fail("cuda_peak_bytes", "device", check.describe(device),
                   {"en": "a CUDA device this machine has, such as 'cuda'", "zh": "本机有的 CUDA 设备，例如 'cuda'"})
    _synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    result = call()
    _synchronize(device)
    return result, torch.cuda.max_memory_allocated(device) - before
