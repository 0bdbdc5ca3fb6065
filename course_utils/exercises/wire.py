"""What travels between the grader and a notebook's kernel: plain data in files.

The grader writes the calls (grading.Reference.calls: the cases' arguments, the weights, the
forbidden names, the time limit) with ``save``; the kernel calls the learner's function on
them (kernel.py) and writes back ``encode(outcomes)``: what each call returned or raised, the
gradients, whether each returned tensor is on the graph, which arguments each call changed, what
the sandbox saw (forbidden calls, ``x.T``, changes to the world, printed characters, what the run-time
rules refused as [code, detail], each detail from the grader's own vocabulary or dropped on decoding).
The grader reads it with ``load``, which
unpickles with ``torch.load(weights_only=True)``: tensors, numbers, strings, lists and dicts
only, so a forged file can carry wrong data but runs no code in the grader. ``decode`` checks
every field and builds the outcomes the judge reads; anything malformed is a ``WireError``.

A returned value is encoded by what the judge needs of it: a plain tensor with its data and
whether it is on the graph; a tensor subclass, a tensor too big to send, or a tensor that is
not a dense CPU tensor by its type name, dtype and shape; tuples and lists item by item; plain
numbers and strings as they are; any other object by its type's name.
"""

import functools
import io
import os
import stat
import tempfile
import zipfile
from pathlib import Path

import torch

from . import kernels, rules
from .grading import on_graph, Raised
from .sandbox import TORCH_SETTINGS, solver_functions

FORMAT = "course_utils.grade/3"  # /2: the arguments each call changed; /3: what the run-time rules refused
MAX_ELEMENTS = 1_000_000  # a returned tensor larger than this travels as its shape and dtype only
MAX_ITEMS = 256  # items of a returned tuple or list; deeper or longer results travel as their type
MAX_DEPTH = 8
MAX_TEXT = 500
MAX_FILE_BYTES = 256 * 2**20  # the grader reads no larger outcome file

_DTYPES = {str(d): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool,
)}
_SCALARS = (bool, int, float, str, type(None))
_KINDS = ("replaced", "added", "deleted")
_SETTING_NAMES = {name for name, _, _ in TORCH_SETTINGS}


class WireError(Exception):
    """The kernel's answer is missing or malformed (a broken or tampered kernel)."""


# ----------------------------------------------------------------------------- files

def save(data, path, mode=0o600):
    """Write `data` to `path` whole or not at all (a temporary file, then os.replace); the file gets
    `mode` (the grader's calls are 0o644: the sandboxed kernel runs as another user and reads them)."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".part")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(data, file)
            os.fchmod(file.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def load(path):
    """Read what `save` wrote, as data only (weights_only): a WireError if it is missing, not a
    regular file (the kernel writes its folder: a link or a pipe there must not make the grader read
    another file or wait for ever), too big, or not such a file."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise WireError("no answer file") from None
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode):
            raise WireError("an answer that is not a regular file")
        if status.st_size > MAX_FILE_BYTES:
            raise WireError(f"an answer of {status.st_size} bytes")
        with os.fdopen(handle, "rb", closefd=False) as file:
            content = file.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(handle)
    if len(content) > MAX_FILE_BYTES:
        raise WireError("an answer that grew while it was read")
    try:  # torch.save writes a zip of stored (uncompressed) entries: no entry may unpack to more
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            entries = archive.infolist()
    except (OSError, zipfile.BadZipFile):
        raise WireError("an answer that is not a torch.save file") from None
    if any(e.compress_type != zipfile.ZIP_STORED for e in entries) or sum(e.file_size for e in entries) > MAX_FILE_BYTES:
        raise WireError("a compressed or oversized answer")
    try:
        return torch.load(io.BytesIO(content), weights_only=True)
    except Exception as error:  # noqa: BLE001 (whatever is wrong with the file, it is no answer)
        raise WireError(f"an unreadable answer ({type(error).__name__})") from None


# ----------------------------------------------------------------------------- the kernel's side

def encode(outcomes):
    """Outcomes (grading.collect, eager=True) as plain data."""
    results = [_encode_result(result) for result in outcomes.results]
    gradients = []
    for index in range(len(outcomes.results)):
        found = outcomes.computed.get(index)
        if found is None:
            gradients.append(None)
        elif isinstance(found, Raised):
            gradients.append({"raised": _error(found), "time_limit": bool(found.time_limit)})
        else:
            gradients.append({"values": [[int(p), _encode(g, 0)] for p, g in found.items()]})
    names = outcomes.names
    return {
        "format": FORMAT,
        "names": [str(n)[:64] for n in names] if names else None,
        "results": results,
        "timed_out": bool(outcomes.timed_out),
        "modified": [[int(position) for position in positions] for positions in outcomes.modified],
        "sizes": [int(size) for size in outcomes.sizes],
        "forbidden": [str(name)[:MAX_TEXT] for name in outcomes.forbidden_calls],
        "used_T": bool(outcomes.used_T),
        "changed": [[str(kind), str(name)[:MAX_TEXT]] for kind, name in outcomes.changed],
        "printed": int(outcomes.printed),
        "gradients": gradients,
        "refused": [[str(code)[:40], str(detail)[:MAX_TEXT]] for code, detail in outcomes.refused],
    }


def _encode_result(result):
    if isinstance(result, Raised):
        return {"raised": _error(result), "time_limit": bool(result.time_limit)}
    return {"value": _encode(result, 0)}


def _error(raised):
    try:
        record = raised.describe()
        return {
            "name": str(record["name"])[:80], "kind": str(record["kind"])[:MAX_TEXT], "text": str(record["text"])[:MAX_TEXT],
            "not_implemented": bool(record["not_implemented"]), "exit": bool(record["exit"]),
        }
    except Exception:  # noqa: BLE001 (an exception class that defies description is still an error)
        return {"name": "Exception", "kind": "?", "text": "", "not_implemented": False, "exit": False}


def type_name(value):
    try:
        return str(type.__getattribute__(type(value), "__name__"))[:80]
    except Exception:  # noqa: BLE001
        return "object"


def _encode(value, depth):
    try:
        return _encode_value(value, depth)
    except Exception:  # noqa: BLE001 (whatever the learner returned, the answer still travels)
        return {"object": type_name(value)}


def _encode_value(value, depth):
    kind = type(value)
    if issubclass(kind, torch.Tensor):
        return _encode_tensor(value)
    if kind in _SCALARS:
        return {"py": value[:MAX_TEXT] if kind is str else value}
    if issubclass(kind, (tuple, list)) and depth < MAX_DEPTH:
        items = list((tuple.__iter__ if issubclass(kind, tuple) else list.__iter__)(value))
        if len(items) <= MAX_ITEMS:
            base = "tuple" if issubclass(kind, tuple) else "list"
            return {"seq": base, "type": type_name(value), "items": [_encode(item, depth + 1) for item in items]}
    return {"object": type_name(value)}


def _encode_tensor(tensor):
    if type(tensor) is not torch.Tensor:  # a subclass: the judge needs its name only
        return {"subclass": type_name(tensor)}
    described = {"dtype": str(tensor.dtype), "on_graph": bool(on_graph(tensor))}
    if tensor.is_nested or tensor.layout != torch.strided or tensor.device.type != "cpu":
        described.update(odd=str(tensor.layout), device=str(tensor.device), shape=_shape(tensor))
    elif str(tensor.dtype) not in _DTYPES or tensor.numel() > MAX_ELEMENTS:
        described.update(big=True, shape=_shape(tensor))
    else:
        described["tensor"] = tensor.detach().clone()  # its own compact storage, off the graph
    return described


def _shape(tensor):
    try:
        return [int(size) for size in tensor.shape]
    except Exception:  # noqa: BLE001 (a nested tensor has no single shape)
        return []


# ----------------------------------------------------------------------------- the grader's side

class Received:
    """Outcomes as the judge reads them (the same attributes and methods as grading.Outcomes),
    built from a kernel's answer by ``decode``."""

    def __init__(self, reference, seconds):
        self.reference, self.seconds = reference, seconds
        self.names, self.results, self.timed_out, self.modified, self.sizes = None, [], False, [], []
        self.forbidden_calls, self.used_T, self.changed, self.printed = [], False, [], 0
        self.refused, self.compiler_text = [], None  # [code, detail] the run-time rules refused (vocabulary checked)
        self.attached = set()  # ids of the decoded tensors that were on the graph in the kernel
        self.records = []  # per case: None, a Raised, or {position: gradient}

    def on_graph(self, tensor):
        return id(tensor) in self.attached

    def gradients(self, index, outputs, weights):
        record = self.records[index] if index < len(self.records) else None
        if record is None:
            raise WireError(f"no gradients for case {index + 1}")
        if isinstance(record, Raised):
            return record
        expected = self.reference.cases[index].gradients
        if set(record) != set(expected):
            raise WireError(f"the gradients of case {index + 1} are for other arguments")
        for position, gradient in record.items():
            want = expected[position]
            if type(gradient) is not torch.Tensor or gradient.shape != want.shape or gradient.dtype != want.dtype:
                raise WireError(f"a gradient of case {index + 1} of another shape or dtype")
        return record


def decode(data, reference, seconds):
    """The Received outcomes in `data` (a kernel's answer) for `reference` (grading.Reference),
    whose calls ran with a time limit of `seconds`; a WireError when anything is malformed."""
    _expect(type(data) is dict and data.get("format") == FORMAT, "an answer in another format")
    received = Received(reference, seconds)
    count = len(reference.cases)
    results = data.get("results")
    _expect(type(results) is list and 1 <= len(results) <= count, "the wrong number of results")
    received.timed_out = _boolean(data.get("timed_out"))
    _expect(len(results) == count or received.timed_out, "too few results")
    received.results = [_decode_result(item, received) for item in results]
    modified = data.get("modified")
    _expect(type(modified) is list and len(modified) == len(results), "the wrong number of changed-argument lists")
    received.modified = [_positions(item, len(reference.cases[0].args)) for item in modified]
    sizes = data.get("sizes")
    _expect(type(sizes) is list and len(sizes) == len(results) and all(type(s) is int and s >= 0 for s in sizes),
            "the wrong number of sizes")
    received.sizes = sizes
    names = data.get("names")
    received.names = names if type(names) is list and all(type(n) is str for n in names) else None
    forbidden = data.get("forbidden")
    _expect(type(forbidden) is list, "no list of forbidden calls")
    received.forbidden_calls = [name for name in forbidden if type(name) is str and name in reference.forbidden]
    received.used_T = _boolean(data.get("used_T"))
    changed = data.get("changed")
    _expect(type(changed) is list, "no list of changes")
    received.changed = [tuple(c) for c in changed if _known_change(c)]
    printed = data.get("printed")
    _expect(type(printed) is int and printed >= 0, "no count of printed characters")
    received.printed = printed
    gradients = data.get("gradients")
    _expect(type(gradients) is list and len(gradients) == len(results), "the wrong number of gradient records")
    received.records = [_decode_gradients(item) for item in gradients]
    refused = data.get("refused")
    _expect(type(refused) is list and all(type(r) is list and len(r) == 2 and all(type(p) is str for p in r)
                                          for r in refused), "a malformed list of refusals")
    vocabulary = _refusal_vocabulary(reference)
    received.refused = [list(r) for r in map(_in_grader_words, refused) if _known_refusal(r, vocabulary)]
    return received


def _refusal_vocabulary(reference):
    """What a refusal's detail may say, by code: the grader's own words only (a detail the learner's code could
    choose, such as a module's or a kernel's name, could spell a hidden input; those travel as "")."""
    events = {prefix for prefix, _ in rules.REFUSED_EVENTS} | {"threading", "child"}
    aten = {f"aten.{name}" for name in rules.forbidden_operations(reference.exercise)}
    return {
        **{code: events for code in ("EVALUATOR", "PROCESS", "NATIVE", "SOCKET", "THREAD", "IMPORT")},
        "UNWATCHED": events | {"function_modes", "dispatch_modes", "tracer", "meta_path"},
        rules.LEFT_RUNNING: set(rules.LEFT_RUNNING_DETAILS),
        "OPERATION": aten,
        "SOLVER": {name for name, _ in solver_functions(reference.exercise, reference.forbidden)} | (
            _course_modules() if rules.own_code(reference.exercise) else set()),
        "TORCH_IN_KERNEL": None, "TORCH_OUTSIDE_KERNEL": None, "FOREIGN_DATA": None,  # aten names, checked below
        "DATA_IN_ARGUMENTS": _GraderWords(),  # (made of them by _in_grader_words first)
    }


class _GraderWords:
    """The details of DATA_IN_ARGUMENTS the grader keeps: those made of its own words (kernels.grader_words)."""

    def __contains__(self, detail):
        return detail == kernels.grader_words(detail)


def _in_grader_words(refusal):
    """A DATA_IN_ARGUMENTS refusal's detail with the learner's names left out (kernels.grader_words)."""
    code, detail = refusal
    return [code, kernels.grader_words(detail)] if code == "DATA_IN_ARGUMENTS" else refusal


@functools.cache
def _course_modules():
    """The names of the course's modules (rules.course_module), from its files: what an OWN_CODE refusal names."""
    root = Path(rules.__file__).resolve().parents[1]
    found = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join((rules.COURSE_PACKAGE,) + (parts[:-1] if parts[-1] == "__init__" else parts))
        if rules.course_module(name):
            found.add(name)
    return found


def _known_refusal(refusal, vocabulary):
    code, detail = refusal
    if code not in rules.REFUSAL_CODES:
        return False
    allowed = vocabulary.get(code, {""})
    if allowed is None:  # an aten operation torch has, "launch", or "another"
        name = detail[len("aten."):] if detail.startswith("aten.") else None
        return detail in ("launch", "another", "memory") or (name is not None and name.isidentifier()
                                                     and hasattr(torch.ops.aten, name))
    return detail in allowed


def _expect(holds, what):
    if not holds:
        raise WireError(what)


def _boolean(value):
    _expect(type(value) is bool, "a flag that is not True or False")
    return value


def _known_change(change):
    if type(change) is not list or len(change) != 2 or not all(type(part) is str for part in change):
        return False
    kind, name = change
    return kind in _KINDS or (kind == "setting" and name in _SETTING_NAMES)


def _positions(item, count):
    """A call's changed arguments: distinct positions among `count` arguments, in order."""
    _expect(type(item) is list and all(type(p) is int and 0 <= p < count for p in item)
            and item == sorted(set(item)), "a malformed list of changed arguments")
    return item


def _decode_error(record):
    _expect(type(record) is dict, "an error that is not described")
    fields = {"name": str, "kind": str, "text": str, "not_implemented": bool, "exit": bool}
    _expect(set(record) == set(fields) and all(type(record[k]) is t for k, t in fields.items()), "a malformed error")
    return dict(record)


def _decode_result(item, received):
    _expect(type(item) is dict, "a malformed result")
    if "raised" in item:
        return Raised(record=_decode_error(item["raised"]), time_limit=_boolean(item.get("time_limit")))
    _expect("value" in item, "a result with no value")
    return _decode_value(item["value"], received, 0)


def _decode_gradients(item):
    if item is None:
        return None
    _expect(type(item) is dict, "a malformed gradient record")
    if "raised" in item:
        return Raised(record=_decode_error(item["raised"]), time_limit=_boolean(item.get("time_limit")))
    values = item.get("values")
    _expect(type(values) is list, "gradients with no values")
    found = {}
    for pair in values:
        _expect(type(pair) is list and len(pair) == 2 and type(pair[0]) is int, "a malformed gradient")
        encoded = pair[1]
        _expect(type(encoded) is dict and type(encoded.get("tensor")) is torch.Tensor, "a gradient that is no tensor")
        found[pair[0]] = _plain(encoded["tensor"])
    return found


def _decode_value(item, received, depth):
    _expect(type(item) is dict and depth <= MAX_DEPTH + 1, "a malformed value")
    if "py" in item:
        _expect(type(item["py"]) in _SCALARS, "a malformed number")
        return item["py"]
    if "seq" in item:
        items = item.get("items")
        _expect(item["seq"] in ("tuple", "list") and type(items) is list and len(items) <= MAX_ITEMS, "a malformed sequence")
        values = [_decode_value(x, received, depth + 1) for x in items]
        base = tuple if item["seq"] == "tuple" else list
        name = _name(item.get("type"))
        return base(values) if name == base.__name__ else type(name, (base,), {})(values)
    if "object" in item:
        return type(_name(item["object"]), (), {})()  # stands for an object of that type's name
    if "subclass" in item:
        return torch.empty(0).as_subclass(type(_name(item["subclass"]), (torch.Tensor,), {}))
    return _decode_tensor(item, received)


def _decode_tensor(item, received):
    dtype = _DTYPES.get(item.get("dtype"))
    _expect(dtype is not None, "a tensor of an unknown dtype")
    if "tensor" in item:
        tensor = _plain(item["tensor"])
        _expect(tensor.dtype == dtype, "a tensor whose dtype is not the one named")
    else:
        shape = item.get("shape")
        _expect(type(shape) is list and len(shape) <= 16 and all(type(s) is int and s >= 0 for s in shape),
                "a malformed shape")
        if item.get("odd") == "torch.sparse_coo":  # as the learner's: a sparse tensor on the CPU
            tensor = torch.sparse_coo_tensor(torch.zeros(len(shape), 0, dtype=torch.int64), torch.zeros(0, dtype=dtype),
                                             shape)
        elif "odd" in item:  # another layout or device: the judge says it is not a dense CPU tensor
            tensor = torch.empty(shape, dtype=dtype, device="meta")
        else:  # too big to send: a tensor of its shape and dtype that takes no memory
            tensor = torch.zeros((), dtype=dtype).expand(shape)
    if _boolean(item.get("on_graph")):
        received.attached.add(id(tensor))
    return tensor


def _plain(tensor):
    _expect(type(tensor) is torch.Tensor and tensor.layout == torch.strided and tensor.device.type == "cpu"
            and not tensor.requires_grad and str(tensor.dtype) in _DTYPES, "a tensor that is not plain data")
    return tensor


def _name(name):
    _expect(type(name) is str and 0 < len(name) <= 80, "a malformed type name")
    return name
