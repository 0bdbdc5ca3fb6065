"""Lesson 10's shipped models (course_utils.pretrained) and the export that writes them
(course_teacher.export_checkpoint): each shipped file holds the model only, in float16, with the
training run's provenance and history; it loads as a float32 GPT in eval mode with the corpus it was
trained on; the export measures the val loss of the file it wrote; a wheel built from the course
carries the checkpoints; bad arguments and damaged files get errors that name them."""

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import torch

import course_utils
from course_teacher import export_checkpoint as X
from course_utils import corpus as C
from course_utils import gpt as G
from course_utils import pretrained as P
from course_utils import train_gpt as T
from course_utils.validation import ArgumentError

ROOT = Path(course_utils.__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")

#: What a shipped model's provenance must say (DESIGN: command, seed, steps, device, time, versions, val loss).
PROVENANCE = ("command", "seed", "steps", "schedule_steps", "wall_time_s", "device", "world_size", "threads", "torch",
              "python", "corpus", "corpus_sha256", "parameters", "val_loss", "val_loss_trained", "baselines",
              "history", "storage", "exported")

TINY = T.TrainConfig(context=16, d_model=32, heads=4, layers=1, batch=4, steps=4, warmup=1, eval_every=2,
                     eval_batches=2, device="cpu", threads=1)


# ----------------------------------------------------------------------------- the shipped models


@pytest.mark.parametrize("name", P.NAMES)
def test_a_shipped_model_loads_with_its_corpus_and_provenance(name):
    model, corpus, provenance = P.load(name)
    assert isinstance(model, G.GPT) and not model.training
    assert all(p.dtype == torch.float32 and p.device.type == "cpu" for p in model.parameters())
    assert corpus is C.load(name) and model.config.vocab == corpus.vocab_size
    assert set(PROVENANCE) <= set(provenance), set(PROVENANCE) - set(provenance)
    assert provenance["corpus"] == name and provenance["corpus_sha256"] == C.CORPORA[name].sha256
    assert provenance["storage"] == "float16" and provenance["parameters"] == G.parameter_count(model)
    assert G.parameter_count(model) <= 5_000_000  # the bound: ≤ 5 M parameters each
    history = provenance["history"]
    assert history and history[-1]["step"] == provenance["steps"]
    assert [h["step"] for h in history] == sorted({h["step"] for h in history})
    assert history[-1]["val_loss"] == provenance["val_loss_trained"]
    # float16 storage moves the val loss by far less than what separates the model from its baselines
    assert abs(provenance["val_loss"] - provenance["val_loss_trained"]) < 0.01
    # the corpus's baselines, as the training run computed them (its torch threads sum the counts' logs in
    # another order than this process may: the last bit can differ)
    assert provenance["baselines"] == pytest.approx(corpus.baselines(), rel=1e-12)
    assert provenance["val_loss"] < provenance["baselines"]["unigram"]
    # the model reads the corpus's characters: a window of val gives logits over its vocabulary
    x, _ = corpus.batch("val", 2, 16, torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert model(x).shape == (2, 16, corpus.vocab_size)


@pytest.mark.parametrize("name", P.NAMES)
def test_a_shipped_file_holds_the_model_only_in_float16_the_tied_matrix_once(name):
    saved = torch.load(P.path(name), map_location="cpu", weights_only=True)
    assert set(saved) == set(P.KEYS) and saved["format"] == P.FORMAT and saved["name"] == name
    weights = saved["model"]
    assert all(w.dtype == torch.float16 for w in weights.values() if w.is_floating_point())
    assert weights["embed.weight"].untyped_storage().data_ptr() == weights["readout.weight"].untyped_storage().data_ptr()
    stored = sum(w.numel() for key, w in weights.items() if key != "readout.weight")
    # two bytes a parameter, and little else (no optimiser state, no float32 copy)
    assert P.path(name).stat().st_size < 2 * stored * 1.02 + 200_000


def test_loading_twice_gives_two_models_and_on_a_device():
    first, _, provenance = P.load("shakespeare", device="cpu")
    second, _, _ = P.load("shakespeare", device=torch.device("cpu"))
    assert first is not second
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
    provenance["history"].clear()  # a learner's change to one provenance is not another's
    assert P.load("shakespeare")[2]["history"]


def test_the_checkpoints_are_package_data():
    """pip, the student zip and Colab carry course_utils/checkpoints/ (pyproject's package data)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["course_utils"]
    shipped = sorted(p.relative_to(ROOT / "course_utils").as_posix() for p in P.FOLDER.iterdir())
    assert shipped == [f"checkpoints/{name}.pt" for name in sorted(P.NAMES)]
    assert all(any(Path(f).match(g) for g in globs) for f in shipped)


@pytest.mark.slow  # (a wheel built from a copy of the course and a fresh process: 20 s on a busy machine)
def test_a_wheel_of_the_course_carries_the_checkpoints_and_loads_them(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, course / name)
    for package in ("course_utils", "course_teacher"):
        shutil.copytree(ROOT / package, course / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(tmp_path / "wheel"), str(course)], check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "wheel").glob("course_utils-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert {f"course_utils/checkpoints/{n}.pt" for n in P.NAMES} <= set(archive.namelist())
        archive.extractall(tmp_path / "installed")
    script = ("from course_utils import pretrained\nmodel, corpus, provenance = pretrained.load('tang')\n"
              "print(pretrained.FOLDER, corpus.vocab_size, provenance['corpus'])")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "installed"),
                            "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [str(tmp_path / "installed" / "course_utils" / "checkpoints"), "6656", "tang"]


# ----------------------------------------------------------------------------- the export


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A train_gpt checkpoint of a tiny model (4 steps on Shakespeare)."""
    path = tmp_path_factory.mktemp("run") / "run.pt"
    T.train(TINY, out=path, verbose=False)
    return path


def test_the_export_writes_the_model_in_float16_with_the_val_loss_of_the_file(trained, tmp_path, capsys):
    out = tmp_path / "shipped" / "shakespeare.pt"
    provenance = X.main([str(trained), str(out)])
    printed = capsys.readouterr().out
    assert X.sha256(out) in printed and f"{provenance['val_loss']:.4f}" in printed
    original, checkpoint = T.load_checkpoint(trained)
    model, corpus, loaded = P.load_file(out)
    assert loaded == provenance and loaded["command"] == checkpoint["provenance"]["command"]
    assert loaded["history"] == checkpoint["history"] and loaded["val_loss_trained"] == checkpoint["provenance"]["val_loss"]
    assert loaded["export_command"].startswith("python -m course_teacher.export_checkpoint ")
    # the val loss is the shipped weights', on the run's own val windows
    run = checkpoint["train_config"]
    assert loaded["val_loss"] == T.evaluate(model, corpus, "val", run["batch"], run["context"], run["eval_batches"],
                                            torch.device("cpu"))
    assert abs(loaded["val_loss"] - loaded["val_loss_trained"]) < 1e-2
    # the weights are the run's rounded to float16, nothing else
    for (key, ours), theirs in zip(model.state_dict().items(), original.state_dict().values()):
        assert torch.equal(ours, theirs.half().float()), key
    assert not [name for name in out.parent.iterdir() if name.name.endswith(".partial")]


def test_the_export_refuses_what_is_not_a_training_checkpoint(tmp_path):
    shipped = P.path("shakespeare")
    with pytest.raises(SystemExit, match="path"):
        X.main([str(shipped), str(tmp_path / "again.pt")])  # already shipped: no optimiser, another format
    with pytest.raises(SystemExit, match="path"):
        X.main([str(tmp_path / "missing.pt"), str(tmp_path / "out.pt")])
    assert not (tmp_path / "out.pt").exists()


# ----------------------------------------------------------------------------- errors that name the argument


def test_an_unknown_name_is_named_with_the_choices():
    with pytest.raises(ArgumentError, match=r"load: argument 'name' got str 'shakespear'; needs one of 'shakespeare', 'tang'"):
        P.load("shakespear")
    with pytest.raises(ArgumentError, match="argument 'name'"):
        P.load(None)


def test_a_bad_device_is_named():
    with pytest.raises(ArgumentError, match="argument 'device'"):
        P.load("tang", device="no such device")


def test_a_missing_or_damaged_file_is_named_with_what_to_do(tmp_path, monkeypatch, trained):
    with pytest.raises(ArgumentError, match=r"load_file: argument 'file' got .*nothing\.pt.*does not exist.*Reinstall"):
        P.load_file(tmp_path / "nothing.pt")
    with pytest.raises(ArgumentError, match="argument 'file' got int 3"):
        P.load_file(3)
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint at all")
    with pytest.raises(ArgumentError, match="torch.load cannot read it"):
        P.load_file(tmp_path / "garbage.pt")
    with pytest.raises(ArgumentError, match="export_checkpoint"):  # a training checkpoint, not yet exported
        P.load_file(trained)
    # the shipped folder without its files: load names the model asked for and the file it looked for
    monkeypatch.setattr(P, "FOLDER", tmp_path)
    with pytest.raises(ArgumentError, match=r"load: argument 'name' got str 'tang'; .*tang\.pt: the file does not exist"):
        P.load("tang")
    shutil.copy(ROOT / "course_utils" / "checkpoints" / "shakespeare.pt", tmp_path / "tang.pt")
    with pytest.raises(ArgumentError, match="it holds the model 'shakespeare'"):
        P.load("tang")


def test_a_checkpoint_whose_vocabulary_is_not_its_corpus_is_refused(tmp_path):
    saved = torch.load(P.path("shakespeare"), map_location="cpu", weights_only=True)
    saved["vocab"] = saved["vocab"][::-1]
    torch.save(saved, tmp_path / "shuffled.pt")
    with pytest.raises(ArgumentError, match="vocabulary"):
        P.load_file(tmp_path / "shuffled.pt")


def test_the_messages_are_in_chinese_too(tmp_path):
    from course_utils import i18n

    i18n.set_language("zh")
    with pytest.raises(ArgumentError, match="文件不存在.*请重新安装课程"):
        P.load_file(tmp_path / "nothing.pt")
