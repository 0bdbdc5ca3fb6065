"""Turn a training run's checkpoint into the model the course ships (``course_utils.pretrained``).

    python -m course_teacher.export_checkpoint /work/ckpt/shakespeare.pt course_utils/checkpoints/shakespeare.pt

A ``train_gpt`` checkpoint holds all a run needs to resume: the weights in float32, the optimiser's
two moments (twice the weights again), the data generator. A learner needs the weights only, and
float16 halves them. The shipped file keeps the run's provenance and its loss history, and its
``val_loss`` is measured again, here, from the file as written: the float16 weights read back as
float32, on the very windows the run evaluated (``train_gpt.evaluate``), so that the number a
lesson prints is the shipped model's and not the one before rounding (``val_loss_trained``).

Prints both losses, the file's size and its sha256 (to quote where the checkpoint is swapped in).
"""

import argparse
import datetime
import hashlib
import os
import shlex
import sys
from pathlib import Path

import torch

from course_utils import pretrained, train_gpt
from course_utils import validation as check


def shipped_weights(model):
    """The model's state dict in ``pretrained.STORAGE`` (float16). Tensors the model shares (the tied
    embedding and read-out) stay one tensor, so the file stores them once."""
    converted = {}
    state = {}
    for key, value in model.state_dict().items():
        where = (value.untyped_storage().data_ptr(), value.storage_offset(), tuple(value.shape))
        if where not in converted:
            converted[where] = value.detach().to(pretrained.STORAGE).cpu().clone()
        state[key] = converted[where]
    return state


def _save(path, contents):
    """Write beside `path`, then rename: an interrupted export never leaves half a checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(contents, partial)
    os.replace(partial, path)


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def export(source, destination, command=None):
    """Write the shipped form of the ``train_gpt`` checkpoint `source` to `destination`; returns its
    provenance (with ``val_loss`` measured from the written file)."""
    function = "export"
    model, saved = train_gpt.load_checkpoint(source)
    provenance = dict(saved["provenance"])
    name = provenance["corpus"]
    check.one_of(function, "source", name, pretrained.NAMES)
    destination = Path(destination)
    provenance |= {
        "history": list(saved["history"]),
        "val_loss_trained": provenance["val_loss"],
        "storage": str(pretrained.STORAGE).removeprefix("torch."),
        "exported": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "export_command": command or f"course_teacher.export_checkpoint.export({str(source)!r}, {str(destination)!r})",
    }
    contents = {"format": pretrained.FORMAT, "name": name, "model": shipped_weights(model),
                "model_config": model.config.as_dict(), "vocab": saved["vocab"], "provenance": provenance}
    _save(destination, contents)
    # the round trip: the loss of the weights as a learner reads them, on the run's own val windows
    shipped, corpus, _ = pretrained.load_file(destination)
    run = saved["train_config"]
    with torch.no_grad():
        contents["provenance"]["val_loss"] = train_gpt.evaluate(
            shipped, corpus, "val", provenance["world_size"] * run["batch"], run["context"], run["eval_batches"],
            torch.device("cpu"))
    _save(destination, contents)
    return contents["provenance"]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m course_teacher.export_checkpoint", description=__doc__.split("\n")[0])
    parser.add_argument("source", help="a checkpoint train_gpt wrote")
    parser.add_argument("destination", help="where to write the shipped model, e.g. course_utils/checkpoints/tang.pt")
    arguments = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "course_teacher.export_checkpoint", *argv])
    try:
        provenance = export(arguments.source, arguments.destination, command)
    except check.ArgumentError as error:
        raise SystemExit(str(error)) from None
    size = Path(arguments.destination).stat().st_size
    print(f"{arguments.destination}: {provenance['corpus']}, {provenance['parameters']:,} parameters, "
          f"step {provenance['steps']} of {provenance['schedule_steps']}")
    print(f"val loss {provenance['val_loss_trained']:.4f} as trained (float32), "
          f"{provenance['val_loss']:.4f} as shipped ({provenance['storage']})")
    print(f"{size / 2**20:.1f} MiB, sha256 {sha256(arguments.destination)}")
    return provenance


if __name__ == "__main__":
    main()
