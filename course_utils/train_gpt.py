"""Train lesson 10's GPT on a corpus: one script for a CPU, a GPU, and several processes under torchrun.

    python -m course_utils.train_gpt --corpus shakespeare --steps 2000 --out shakespeare.pt
    python -m course_utils.train_gpt --resume shakespeare.pt --steps 4000          (carries on to step 4000)
    python -m torch.distributed.run --nproc_per_node 2 -m course_utils.train_gpt --corpus tang --out tang.pt

and from a notebook ``train(TrainConfig(corpus="tang", steps=200))``.

Under ``torchrun`` (``python -m torch.distributed.run``) every process trains a copy of the model
wrapped in ``DistributedDataParallel``: the gradients are averaged across the processes after each
backward, so that the copies stay equal. The processes talk through gloo on CPUs and NCCL on GPUs
(one GPU per process). Nothing else changes: the same script runs alone as a world of one.

**The data each process sees.** Every step draws the whole world's batch, ``world_size × batch``
windows, from one generator seeded by ``seed`` that every process holds, and process r takes rows
r·batch … (r+1)·batch − 1 of it. So two processes with ``batch`` b train on exactly the windows one
process with ``batch`` 2b trains on, and (the mean of two means of b being the mean of 2b) compute
the same gradients up to the order of float additions (tests/test_train_gpt.py holds them to it).

**Checkpoints** (``--out``; every ``--save-every`` steps and at the end, written by process 0,
atomically) hold the model's weights and sizes, the optimiser's state, the data generator's state,
the loss history and the **provenance**: the command, seed, steps, wall time, device, world size,
torch and Python versions, corpus and its sha256, the val loss and the baselines to beat. ``--resume``
restores all of it and carries on: training N steps in one go or in two parts gives the same
weights (on the same machine and thread count; a test proves it). The learning rate follows a
warm-up and a cosine decay over ``--steps``; ``--stop-at`` ends a run early on that schedule (to
resume it later, or to train a few steps in a notebook on the real schedule's start).

``load_checkpoint(path)`` gives the trained model (in eval mode) and the checkpoint's contents.
"""

import argparse
import datetime
import math
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from . import corpus as corpora
from . import gpt
from . import validation as check
from .i18n import message

#: The checkpoint layout this module writes and reads.
FORMAT = 1
#: The seed of the windows every evaluation reads (the same windows each time, apart from training's).
EVAL_SEED = 1234
DEVICES = ("auto", "cpu", "cuda")
#: What a resumed run may set anew; everything else (the sizes, the data, the optimiser) is the checkpoint's.
RUN_SETTINGS = ("steps", "stop_at", "eval_every", "save_every", "device", "threads", "precision")
#: How the forward pass computes: "float32" throughout, or "bfloat16" under torch.autocast (the matrix
#: products in bfloat16, the weights, the optimiser and LayerNorm in float32): a GPU's fast path, and
#: the dtype lesson 09's kernels are fast in.
PRECISIONS = ("float32", "bfloat16")
#: The model's fields, every one of ``gpt.GPTConfig`` but the vocabulary (the corpus gives it). TrainConfig
#: repeats them flat, with a laptop's defaults rather than GPTConfig's: they are the keyword arguments lesson 10
#: passes, the command's flags and the keys of the train_config a checkpoint stores (tests hold the two equal).
MODEL_FIELDS = tuple(f.name for f in fields(gpt.GPTConfig) if f.name != "vocab")


@dataclass(frozen=True)
class TrainConfig:
    """What a training run does. The model: ``context``, ``d_model``, ``heads``, ``layers``, ``d_ff``,
    ``positions``, ``attention`` (``gpt.GPTConfig``). The run: ``corpus``, ``batch`` (windows per
    process and step), ``steps`` (the schedule's length), ``stop_at`` (the step to stop at, default
    ``steps``), AdamW's ``lr`` (peak), ``min_lr`` (the end of the cosine), ``warmup`` steps,
    ``weight_decay`` (on matrices only) and ``grad_clip`` (the gradient's norm), ``seed``,
    ``eval_every`` and ``eval_batches`` (evaluations of the world's batch of val windows), ``save_every``,
    ``device`` ("auto": a GPU when there is one), ``threads`` (torch's CPU threads; None: as it is) and
    ``precision`` (``PRECISIONS``)."""

    corpus: str = "shakespeare"
    context: int = 64
    d_model: int = 128
    heads: int = 4
    layers: int = 4
    d_ff: int = None
    positions: str = "learned"
    attention: str = "course"
    batch: int = 12
    steps: int = 1000
    stop_at: int = None
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 50
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    eval_every: int = 100
    eval_batches: int = 20
    save_every: int = 0
    device: str = "auto"
    threads: int = None
    precision: str = "float32"

    def __post_init__(self):
        function = "TrainConfig"
        check.one_of(function, "corpus", self.corpus, tuple(corpora.CORPORA))
        for argument in ("batch", "steps", "eval_every", "eval_batches"):
            check.positive_int(function, argument, getattr(self, argument))
        if self.stop_at is not None:
            check.whole_number(function, "stop_at", self.stop_at, 0, self.steps)
        for argument in ("warmup", "save_every"):
            check.whole_number(function, argument, getattr(self, argument))
        check.number(function, "lr", self.lr, positive=True)
        check.number(function, "min_lr", self.min_lr, non_negative=True, maximum=self.lr)
        check.number(function, "weight_decay", self.weight_decay, non_negative=True)
        check.number(function, "grad_clip", self.grad_clip, positive=True)
        check.seed(function, "seed", self.seed, offsets=(0, 1))
        check.one_of(function, "device", self.device, DEVICES)
        if self.threads is not None:
            check.positive_int(function, "threads", self.threads)
        check.one_of(function, "precision", self.precision, PRECISIONS)
        self.model_config(vocab=1)  # the model's sizes, checked now rather than after the corpus loads

    def model_config(self, vocab):
        """The ``gpt.GPTConfig`` of this run's model, for a corpus of `vocab` characters."""
        return gpt.GPTConfig(vocab, **{name: getattr(self, name) for name in MODEL_FIELDS})



def learning_rate(step, config):
    """The rate at `step` (0-based): linear warm-up to ``lr`` over ``warmup`` steps, then a cosine
    down to ``min_lr`` at ``steps`` (nanoGPT's schedule): a function of the step alone, so a resumed
    run continues it exactly."""
    check.whole_number("learning_rate", "step", step)
    if not isinstance(config, TrainConfig):
        check.fail("learning_rate", "config", check.describe(config),
                   {"en": "a TrainConfig, e.g. TrainConfig()", "zh": "TrainConfig，例如 TrainConfig()"})
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.min_lr + 0.5 * (1 + math.cos(math.pi * min(1.0, progress))) * (config.lr - config.min_lr)


# ----------------------------------------------------------------------------- processes and devices


@dataclass(frozen=True)
class World:
    """This process's place among those training together: rank, world size, device."""

    rank: int
    size: int
    device: torch.device

    @property
    def main(self):
        return self.rank == 0


def _start_world(device_choice):
    """Join torchrun's process group when torchrun started us (WORLD_SIZE > 1 in the environment), with
    gloo on CPUs and NCCL on GPUs; otherwise a world of one."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = device_choice == "cuda" or (device_choice == "auto" and torch.cuda.is_available())
    if device_choice == "cuda" and not torch.cuda.is_available():
        check.fail("train", "device", check.describe(device_choice),
                   {"en": f"'cpu' or 'auto': torch {torch.__version__} sees no CUDA device here",
                    "zh": f"'cpu' 或 'auto'：torch {torch.__version__} 在这里看不到 CUDA 设备"})
    # without a GPU: torch's default device, which is the CPU unless the process chose another with
    # torch.set_default_device (then it trains there, as every tensor it makes would land there anyway)
    if size == 1:
        return World(0, 1, torch.device("cuda") if cuda else check.default_device())
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if cuda else check.default_device()
    if cuda:
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return World(dist.get_rank(), dist.get_world_size(), device)


def _mean_over_world(value, world):
    """The mean of a float over every process (itself in a world of one)."""
    if world.size == 1:
        return value
    import torch.distributed as dist

    total = torch.tensor([value], dtype=torch.float64, device=world.device)
    dist.all_reduce(total)
    return total.item() / world.size


# ----------------------------------------------------------------------------- checkpoints


def _provenance(config, world, commands, step, wall_s, val_loss, corpus, model):
    device = world.device
    return {
        "command": commands[-1],
        "earlier_commands": commands[:-1],  # those of the runs it resumed, oldest first
        "seed": config.seed,
        "steps": step,
        "schedule_steps": config.steps,
        "wall_time_s": round(wall_s, 1),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.processor() or platform.machine()})",
        "world_size": world.size,
        "threads": torch.get_num_threads(),
        "torch": str(torch.__version__),
        "python": platform.python_version(),
        "corpus": config.corpus,
        "corpus_sha256": corpora.CORPORA[config.corpus].sha256,
        "parameters": gpt.parameter_count(model),
        "val_loss": val_loss,
        "baselines": corpus.baselines(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _save(path, checkpoint):
    """Write to a temporary file beside `path`, then rename: a run killed mid-write leaves the last
    checkpoint whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(checkpoint, partial)
    os.replace(partial, path)


def _read(function, path):
    if not isinstance(path, (str, os.PathLike)) or not Path(path).is_file():
        check.fail(function, "path", check.describe(path),
                   {"en": "the path of a checkpoint file that train_gpt wrote", "zh": "train_gpt 写出的检查点文件的路径"})
    try:
        # every storage stays where it is read (the CPU), whatever device saved it
        checkpoint = torch.load(path, map_location=lambda storage, _where: storage, weights_only=True)
    except Exception as error:  # noqa: BLE001  (any unreadable file: say which, in the learner's words)
        check.fail(function, "path", check.describe(str(path)),
                   {"en": f"a checkpoint file torch.load reads ({type(error).__name__}: {str(error)[:200]})",
                    "zh": f"torch.load 能读取的检查点文件（{type(error).__name__}：{str(error)[:200]}）"})
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        check.fail(function, "path", check.describe(str(path)),
                   {"en": f"a checkpoint of format {FORMAT}, as train_gpt writes", "zh": f"train_gpt 写出的格式 {FORMAT} 的检查点"})
    return checkpoint


def load_checkpoint(path, device=None):
    """``(model, checkpoint)``: the GPT a checkpoint holds, in eval mode (on `device` when given, else
    on the CPU, where the checkpoint is read), and the whole checkpoint (``checkpoint["provenance"]``,
    ``checkpoint["history"]``, ...)."""
    checkpoint = _read("load_checkpoint", path)
    device = check.device("load_checkpoint", "device", device)
    model = gpt.GPT(gpt.GPTConfig(**checkpoint["model_config"]))
    model.load_state_dict(checkpoint["model"])
    return (model if device is None else model.to(device)).eval(), checkpoint


# ----------------------------------------------------------------------------- training


@dataclass
class TrainResult:
    """What ``train`` returns: the model (unwrapped, eval mode), the loss history (a list of
    {"step", "train_loss", "val_loss", "wall_s"}), the provenance, the checkpoint's path (or None)."""

    model: gpt.GPT
    history: list
    provenance: dict
    checkpoint: Path = None


@torch.no_grad()
def _autocast(device, precision):
    """The context the forward pass runs in: torch.autocast for "bfloat16", nothing for "float32"."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")


def evaluate(model, corpus, split, batch, context, batches, device, precision="float32"):
    """The mean LM loss over `batches` fixed windows of `split` (drawn from EVAL_SEED: the same each time)."""
    check.module("evaluate", "model", model, gpt.GPT)
    corpora.check_corpus("evaluate", "corpus", corpus)
    check.positive_int("evaluate", "batches", batches)
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(EVAL_SEED)
    total = 0.0
    for _ in range(batches):
        x, y = corpus.batch(split, batch, context, generator)
        with _autocast(device, precision):
            logits = model(x.to(device))
        total += gpt.lm_loss(logits.float(), y.to(device)).item()
    model.train(was_training)
    return total / batches


def _optimizer(model, config):
    """AdamW, weight decay on the matrices only (not on LayerNorm's gains and biases), as nanoGPT."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    plain = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                              {"params": plain, "weight_decay": 0.0}], lr=config.lr, betas=(0.9, 0.99))


def train(config=None, *, out=None, resume=None, command=None, verbose=True):
    """Train (or resume) a GPT as `config` (a TrainConfig) says; write checkpoints to `out` when given.

    With `resume` (a checkpoint's path) the model, optimiser, data generator, history and step come
    from it, and so does the config (None: the checkpoint's; a config may change ``RUN_SETTINGS`` only).
    Returns a ``TrainResult``. Under torchrun every process calls it; process 0 writes and prints."""
    function = "train"
    if config is not None and not isinstance(config, TrainConfig):
        check.fail(function, "config", check.describe(config),
                   {"en": "None or a TrainConfig, e.g. TrainConfig(corpus='tang', steps=200)",
                    "zh": "None 或 TrainConfig，例如 TrainConfig(corpus='tang', steps=200)"})
    check.flag(function, "verbose", verbose)
    saved = _read(function, resume) if resume is not None else None
    if saved is not None:
        kept = TrainConfig(**(saved["train_config"] | {"stop_at": None}))  # where that run stopped is not this one's end
        if config is not None:  # the run's settings may change; the model's sizes and its data may not
            for name in (f.name for f in fields(TrainConfig)):
                if name not in RUN_SETTINGS and getattr(config, name) != getattr(kept, name):
                    check.fail(function, "config", f"{name}={getattr(config, name)!r}",
                               {"en": f"{name}={getattr(kept, name)!r}, as in the checkpoint it resumes (only "
                                      f"{', '.join(RUN_SETTINGS)} may change)",
                                "zh": f"{name}={getattr(kept, name)!r}，与所续训的检查点一致（只有 "
                                      f"{'、'.join(RUN_SETTINGS)} 可以改）"})
        config = config or kept
    config = config or TrainConfig()
    if out is not None and not isinstance(out, (str, os.PathLike)):
        check.fail(function, "out", check.describe(out), {"en": "None or a file path", "zh": "None 或文件路径"})
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    command = command or f"course_utils.train_gpt.train({config!r})"
    world = _start_world(config.device)
    corpus = corpora.load(config.corpus)
    model = _new_model(config, corpus)
    optimizer = _optimizer(model, config)
    data = torch.Generator().manual_seed(config.seed + 1)
    step, history, wall_before, commands = 0, [], 0.0, [command]
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        data.set_state(saved["data_generator"])
        step, history = saved["step"], list(saved["history"])
        wall_before = saved["provenance"]["wall_time_s"]
        commands = [*saved["provenance"]["earlier_commands"], saved["provenance"]["command"], command]
    model.to(world.device)
    _optimizer_to(optimizer, world.device)
    trained = model
    if world.size > 1:
        from torch.nn.parallel import DistributedDataParallel

        trained = DistributedDataParallel(model, device_ids=[world.device.index] if world.device.type == "cuda" else None)
    stop = config.steps if config.stop_at is None else config.stop_at
    started, running, counted = time.perf_counter(), 0.0, 0
    val_loss = history[-1]["val_loss"] if history else None

    def elapsed():
        return wall_before + time.perf_counter() - started

    def write():
        if out is not None and world.main:
            provenance = _provenance(config, world, commands, step, elapsed(), val_loss, corpus, model)
            _save(out, {"format": FORMAT, "model": model.state_dict(), "model_config": model.config.as_dict(),
                        "train_config": asdict(config), "optimizer": optimizer.state_dict(), "step": step,
                        "data_generator": data.get_state(), "history": history, "provenance": provenance,
                        "vocab": corpus.vocab})

    model.train()
    while step < stop:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config)
        x, y = corpus.batch("train", world.size * config.batch, config.context, data)  # the whole world's batch
        rows = slice(world.rank * config.batch, (world.rank + 1) * config.batch)  # this process's share
        with _autocast(world.device, config.precision):
            logits = trained(x[rows].to(world.device))
        loss = gpt.lm_loss(logits.float(), y[rows].to(world.device))  # the softmax in float32
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # under DDP: the gradients averaged over the processes here
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        step += 1
        running, counted = running + loss.item(), counted + 1
        if step % config.eval_every == 0 or step == stop:
            # the world's batch, so that every world size reads the same val windows
            val_loss = evaluate(model, corpus, "val", world.size * config.batch, config.context, config.eval_batches,
                                world.device, config.precision)
            train_loss = _mean_over_world(running / counted, world)
            history.append({"step": step, "train_loss": train_loss, "val_loss": val_loss, "wall_s": round(elapsed(), 1)})
            running, counted = 0.0, 0
            if verbose and world.main:
                print(message("gpt.progress", step=step, steps=config.steps, train=train_loss, val=val_loss,
                              seconds=elapsed()), flush=True)
        if config.save_every and step % config.save_every == 0 and step != stop:
            write()
    write()
    if verbose and world.main and out is not None:
        print(message("gpt.saved", path=out, step=step), flush=True)
    provenance = _provenance(config, world, commands, step, elapsed(), val_loss, corpus, model)
    return TrainResult(model.eval(), history, provenance, Path(out) if out is not None else None)


def _new_model(config, corpus):
    return gpt.make_gpt(corpus.vocab_size, seed=config.seed, **{name: getattr(config, name) for name in MODEL_FIELDS})


def _optimizer_to(optimizer, device):
    """Move a loaded optimiser state (read onto the CPU) to the parameters' device."""
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and key != "step":
                state[key] = value.to(device)


# ----------------------------------------------------------------------------- the command


def _parser():
    parser = argparse.ArgumentParser(prog="python -m course_utils.train_gpt", description=__doc__.split("\n")[0])
    defaults = TrainConfig()
    for field in fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        kind = {"lr": float, "min_lr": float, "weight_decay": float, "grad_clip": float}.get(field.name, int)
        if field.name in ("corpus", "positions", "attention", "device", "precision"):
            kind = str
        parser.add_argument(flag, type=kind, default=None, help=f"default: {default}")
    parser.add_argument("--out", help="where to write the checkpoint (default: none written)")
    parser.add_argument("--resume", help="a checkpoint to carry on from (its sizes and data; --steps may grow)")
    parser.add_argument("--quiet", action="store_true", help="print nothing while training")
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    arguments = _parser().parse_args(argv)
    given = {f.name: getattr(arguments, f.name) for f in fields(TrainConfig) if getattr(arguments, f.name) is not None}
    command = shlex.join(["python", "-m", "course_utils.train_gpt", *argv])
    try:
        saved = _read("main", arguments.resume)["train_config"] | {"stop_at": None} if arguments.resume is not None else {}
        config = TrainConfig(**(saved | given)) if given or not saved else None
        result = train(config, out=arguments.out, resume=arguments.resume, command=command,
                       verbose=not arguments.quiet)
    except check.ArgumentError as error:
        raise SystemExit(str(error)) from None
    finally:
        _leave_world()
    return result


def _leave_world():
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
