"""Lesson 10's trained models, shipped with the course: ``load(name)`` -> ``(model, corpus, provenance)``.

    model, corpus, provenance = pretrained.load("shakespeare")   # or "tang"

- ``model``: the ``gpt.GPT`` the course's own script (``course_utils.train_gpt``) trained, in eval
  mode, float32, on the CPU (or on `device`);
- ``corpus``: the ``corpus.Corpus`` it was trained on (its vocabulary is the model's: id i is
  ``corpus.vocab[i]``);
- ``provenance``: how it was trained: the command, seed, steps, wall time, device, thread and world
  size, torch and Python versions, the corpus and its sha256, the loss ``history`` (a list of
  {"step", "train_loss", "val_loss", "wall_s"}), the baselines it had to beat, and ``val_loss``:
  the loss on "val" measured again from the weights as shipped (float16, read back as float32),
  beside ``val_loss_trained`` (the training run's own, in float32).

A shipped checkpoint (``course_utils/checkpoints/NAME.pt``) holds the model only: no optimiser, no
data generator (what ``--resume`` needs stays with the training run's own checkpoint). Its weights
are stored in float16, half the bytes, which changes the val loss by less than a thousandth (the
provenance holds both figures). ``course_teacher.export_checkpoint`` writes them from a
``train_gpt`` checkpoint; ``load_file(path)`` reads one from anywhere.
"""

import os
from pathlib import Path

import torch

from . import corpus as corpora
from . import gpt
from . import validation as check

#: Where the shipped checkpoints live, inside the package (so that pip, the student zip and Colab carry them).
FOLDER = Path(__file__).resolve().parent / "checkpoints"
#: The models shipped: one per corpus.
NAMES = tuple(corpora.CORPORA)
#: The layout this module reads (``course_teacher.export_checkpoint`` writes it).
FORMAT = "course_utils.pretrained/1"
#: How the weights are stored in the file (they are read back as float32).
STORAGE = torch.float16
#: What a shipped checkpoint holds.
KEYS = ("format", "name", "model", "model_config", "vocab", "provenance")


def path(name):
    """The file of the shipped model `name` (``NAMES``)."""
    check.one_of("path", "name", name, NAMES)
    return FOLDER / f"{name}.pt"


def load(name, device=None):
    """``(model, corpus, provenance)`` of the shipped model `name` ("shakespeare" or "tang"): the model
    in eval mode, float32, on `device` (None: the CPU); the corpus it was trained on; how it was
    trained (module docstring). Each call reads the file again: a new model, free to change."""
    function = "load"
    check.one_of(function, "name", name, NAMES)
    return _load(function, "name", path(name), device, name)


def load_file(file, device=None):
    """``(model, corpus, provenance)`` from a checkpoint file that ``course_teacher.export_checkpoint``
    wrote (``load`` reads the shipped ones with it)."""
    function = "load_file"
    if not isinstance(file, (str, os.PathLike)):
        check.fail(function, "file", check.describe(file),
                   {"en": "the path of a checkpoint file (a str or a Path)", "zh": "检查点文件的路径（str 或 Path）"})
    return _load(function, "file", Path(file), device, None)


def _load(function, argument, file, device, name):
    device = check.device(function, "device", device)
    saved = _read(function, argument, file, name)
    corpus = corpora.load(saved["provenance"]["corpus"])
    if saved["vocab"] != corpus.vocab:
        _broken(function, argument, file, {"en": f"its vocabulary is not the one of the {corpus.name} corpus it names",
                                           "zh": f"其词表与它所标明的 {corpus.name} 语料的词表不一致"})
    model = gpt.GPT(gpt.GPTConfig(**saved["model_config"]))
    # the tied embedding and read-out are one tensor in the file too (torch.save keeps the sharing)
    model.load_state_dict({key: value.float() for key, value in saved["model"].items()})
    model.eval()
    return (model if device is None else model.to(device)), corpus, dict(saved["provenance"])


def _read(function, argument, file, name):
    """The checkpoint's dict, after checking that it is one this module reads (an ArgumentError that
    names the file and what is wrong with it otherwise)."""
    if not file.is_file():
        _broken(function, argument, file, {"en": "the file does not exist", "zh": "文件不存在"})
    try:
        # weights_only: a checkpoint is data, never code that runs when it is read
        saved = torch.load(file, map_location=lambda storage, _where: storage, weights_only=True)
    except Exception as error:  # noqa: BLE001  (any unreadable file: say which, in the learner's words)
        _broken(function, argument, file, {"en": f"torch.load cannot read it ({type(error).__name__}: {str(error)[:200]})",
                                           "zh": f"torch.load 读不了它（{type(error).__name__}）"})  # torch's text is English
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or not all(key in saved for key in KEYS):
        _broken(function, argument, file,
                {"en": f"it is not a shipped model of format {FORMAT!r} (a train_gpt checkpoint is turned into one by "
                       "python -m course_teacher.export_checkpoint)",
                 "zh": f"它不是格式为 {FORMAT!r} 的发布模型（train_gpt 的检查点要先用 "
                       "python -m course_teacher.export_checkpoint 转换）"})
    if name is not None and saved["name"] != name:
        _broken(function, argument, file, {"en": f"it holds the model {saved['name']!r}",
                                           "zh": f"它存的是模型 {saved['name']!r}"})
    return saved


def _broken(function, argument, file, why):
    """Fail naming the argument as given (a model's name, or a path) and the file read for it."""
    check.fail(function, argument, check.describe(str(file)) if argument == "file" else check.describe(file.stem),
               {"en": f"a model whose checkpoint file the course can read; {file}: {why['en']}. Reinstall the "
                      "course, or export the checkpoint again",
                "zh": f"检查点文件能被课程读取的模型；{file}：{why['zh']}。请重新安装课程，或重新导出检查点"})
