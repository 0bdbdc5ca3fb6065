"""The benchmarks' results as data (benchmarks/record.py writes, course_utils.measured reads): a file
written is read back with every field and figure it holds, and a file that is not of the format is
refused with a message that names the file and what is wrong with it."""

import json
import re
import sys

import pytest

from course_utils import i18n, measured

sys.path.insert(0, str(measured.RESULTS.parents[1] / "benchmarks"))  # benchmarks/record.py: a script's module
import record  # noqa: E402

SETTINGS = {"B": 1, "H": 8, "dtype": "float32", "threads": None, "lengths": (512, 2048)}
FIGURES = [{"L": 512, "course_ms": 1.234567891, "sdpa_ms": 0.5, "sdpa_bytes": 1 << 20},
           {"L": 2048, "course_ms": float("nan"), "sdpa_ms": None, "sdpa_bytes": 7}]


def test_a_written_file_is_read_back_as_written(tmp_path):
    target = record.write("probsparse", "cpu", SETTINGS, FIGURES, tmp_path)
    assert target == tmp_path / "probsparse-cpu.json"
    found = measured.load("probsparse", "cpu", tmp_path)
    assert (found.benchmark, found.device, found.file) == ("probsparse", "cpu", "probsparse-cpu.json")
    assert found.torch == record.torch.__version__ and len(found.date) == 10
    assert found.settings == {"B": 1, "H": 8, "dtype": "float32", "threads": None, "lengths": [512, 2048]}
    # six significant digits; NaN, which JSON has not, becomes null ("not measured")
    assert found.rows() == [{"L": 512, "course_ms": 1.23457, "sdpa_ms": 0.5, "sdpa_bytes": 1048576},
                            {"L": 2048, "course_ms": None, "sdpa_ms": None, "sdpa_bytes": 7}]
    assert found.one(L=2048)["sdpa_bytes"] == 7
    with pytest.raises(ValueError, match=r"probsparse-cpu.json: 0 figures match \{'L': 1\}"):
        found.one(L=1)
    # one line a figure, so that a new run's diff reads row by row
    text = target.read_text(encoding="utf-8")
    assert sum(line.lstrip().startswith('{"L"') for line in text.splitlines()) == 2


def test_the_provenance_names_the_device_torch_date_and_file_in_both_languages(tmp_path):
    record.write("decoding", "cpu", {}, [{"N": 64, "cache_s": 0.1}], tmp_path)
    found = measured.load("decoding", "cpu", tmp_path)
    english = found.provenance()
    assert found.device_name in english and found.torch in english and found.date in english
    assert "course_utils/results/decoding-cpu.json" in english
    i18n.set_language("zh")
    assert "测量环境" in found.provenance() and found.date in found.provenance()
    assert "CUDA" in measured.missing("tiled", "cuda") and "tiled-cuda.json" in measured.missing("tiled", "cuda")


def test_no_file_is_none(tmp_path):
    assert measured.load("probsparse", "cuda", tmp_path) is None


@pytest.mark.parametrize("change, message", [
    (lambda data: data.update(format="attention-course/benchmark/0"), "format 'attention-course/benchmark/0': needs"),
    (lambda data: data.pop("torch"), "field 'torch': needs a str"),
    (lambda data: data.update(device="tpu"), "device 'tpu': needs one of cpu, cuda"),
    (lambda data: data.update(date="28/11/2026"), "date '28/11/2026': needs YYYY-MM-DD"),
    (lambda data: data.update(figures=[[1, 2]]), "figures: needs a list of objects"),
    (lambda data: data["figures"][0].update(L=[512]), "figures: the values of L need to be numbers, text or null"),
    (lambda data: data.update(benchmark="tiled"), "holds 'tiled' on 'cpu', not 'probsparse' on 'cpu'"),
])
def test_a_malformed_file_is_refused_naming_the_file_and_the_fault(tmp_path, change, message):
    target = record.write("probsparse", "cpu", SETTINGS, FIGURES, tmp_path)
    data = json.loads(target.read_text(encoding="utf-8"))
    change(data)
    target.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        measured.load("probsparse", "cpu", tmp_path)
    assert str(raised.value).startswith(f"{target}: ") and message in str(raised.value)


def test_a_file_that_is_not_json_is_refused_by_name(tmp_path):
    (tmp_path / "decoding-cuda.json").write_text("{ half a file", encoding="utf-8")
    with pytest.raises(ValueError, match=r"decoding-cuda.json: not JSON"):
        measured.load("decoding", "cuda", tmp_path)


def test_record_refuses_to_write_what_it_could_not_read_back(tmp_path):
    with pytest.raises(ValueError, match="figures: the values of L need to be numbers"):
        record.write("tiled", "cpu", {}, [{"L": {"not": "a number"}}], tmp_path)
    assert not list(tmp_path.iterdir())


def test_every_committed_results_file_is_of_the_format():
    for file in sorted(measured.RESULTS.glob("*.json")):
        benchmark, device = file.stem.rsplit("-", 1)
        assert measured.load(benchmark, device) is not None, file


def test_devices_asked_for_cuda_without_a_gpu_says_so(monkeypatch):
    monkeypatch.setattr(record.torch.cuda, "is_available", lambda: False)
    assert record.devices("all") == ["cpu"] and record.devices("cpu") == ["cpu"]
    with pytest.raises(SystemExit, match="sees no CUDA device"):
        record.devices("cuda")


# ----------------------------------------------------------------------------- the lessons' GPU cells

ROOT = measured.RESULTS.parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/*/*.ipynb")) + sorted(ROOT.glob("notebooks/solutions/*/*.ipynb"))
#: Code that reads the runtime's GPU: a cell holding it prints what that GPU gives.
TOUCHES_A_GPU = re.compile(r"measured\.(?:on_gpu|gpu|cuda_peak_bytes)\(|torch\.cuda\.|[\"']cuda[\"']")


def _code_cells(path):
    return [cell for cell in json.loads(path.read_text(encoding="utf-8"))["cells"] if cell["cell_type"] == "code"]


def test_every_cell_that_reads_the_gpu_has_its_output_left_out_by_nbval():
    """A lesson prints the same on every machine, GPU or not, where nbval checks it: a cell that
    measures on the runtime's GPU (measured.on_gpu, torch.cuda, a device named "cuda") is tagged
    nbval-ignore-output. (Run with a GPU visible, the untagged cells compute on the CPU and show the
    committed figures, which no GPU changes: test below.)"""
    assert NOTEBOOKS, "no rendered notebook found"
    untagged, found = [], 0
    for path in NOTEBOOKS:
        for cell in _code_cells(path):
            if TOUCHES_A_GPU.search("".join(cell["source"])):
                found += 1
                if "nbval-ignore-output" not in cell["metadata"].get("tags", []):
                    untagged.append(f"{path.relative_to(ROOT)}: {''.join(cell['source'])[:80]!r}")
    assert found >= 4 * 4, "the scan found too few GPU cells (lessons 04, 05, 07 and 08, four notebooks each)"
    assert not untagged, untagged


def test_the_committed_figures_print_the_same_with_and_without_a_gpu(monkeypatch, capsys):
    """measured.table, the call of the GPU figures' cells nbval checks, prints the committed file
    whether or not torch sees a GPU (faked here), and returns nothing: a cell ending with it shows
    the table alone (it returned the Result, whose repr every lesson showed after its table)."""
    columns = {"H": lambda row: row.get("H"), "naive": lambda row: row.get("naive_ms")}
    printed = []
    for available in (False, True):
        monkeypatch.setattr(measured.torch.cuda, "is_available", lambda: available)
        assert measured.table("multihead", columns, part="lesson") is None
        assert measured.table("nothing", columns) is None
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and "multihead-cuda.json" in printed[0] and "nothing-cuda.json" in printed[0]
    for path in NOTEBOOKS:
        for cell in _code_cells(path):
            if "measured.table(" in "".join(cell["source"]):
                kinds = {output["output_type"] for output in cell.get("outputs", [])}
                assert kinds <= {"stream"}, f"{path.relative_to(ROOT)}: a table cell shows {kinds}"


def test_no_lesson_keeps_what_measured_table_returns():
    """measured.table prints and returns None (a value would be shown under the table): a lesson that
    kept it (`gpu = measured.table(...)`) would skip every later use of the figures without a word, as
    lesson 09's comparison with lesson 08's tiles and its chart did. The figures come from measured.load."""
    kept = [f"{path.relative_to(ROOT)}: {line.strip()}" for path in sorted(ROOT.glob("notebooks/source/*.py"))
            for line in path.read_text(encoding="utf-8").splitlines() if re.search(r"=\s*measured\.table\(", line)]
    assert not kept, kept
