"""The course's ``masks.padding_mask`` as a copier pastes it for 00.padding_mask, with its helper, the course's
argument checks (``from course_utils import validation as check``), moved out of the course: the checks the body
calls written again in the cell, in a class, as functions or as lambdas, under another name (issue 37, 5). Shared
by test_copies_edits.py (the fingerprint) and test_grade_attacks.py (the same copy through ``make grade``), with
an honest answer whose helper is a class named ``check`` (HONEST_CLASS_CHECK), which must stay the learner's own.

Each helper here works (the copies grade 4/4 when not told), and none is the course's code: a learner who pastes
the function and writes its checks again has still solved nothing."""

import inspect
import textwrap

from course_utils import masks

#: What the course's padding_mask calls of its module `check` (course_utils.validation), written again.
CHECKS = '''
class checks:
    """The argument checks the mask needs."""

    @staticmethod
    def fail(function, argument, got, needed):
        raise ValueError(f"{function}: argument {argument!r} got {got}; needs {needed['en']}")

    @staticmethod
    def describe(value):
        if isinstance(value, torch.Tensor):
            return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
        return f"{type(value).__name__} {value!r}"

    @staticmethod
    def dense(function, argument, value):
        if value.layout != torch.strided:
            checks.fail(function, argument, checks.describe(value), {"en": "a dense tensor"})
        return value

    @staticmethod
    def has_values(function, argument, value):
        if value.device.type == "meta":
            checks.fail(function, argument, checks.describe(value), {"en": "a tensor with values"})
        return value

    @staticmethod
    def fits_in_memory(function, argument, value, count, itemsize=1):
        if count * itemsize > 2**40:
            checks.fail(function, argument, checks.describe(value), {"en": "a size that fits in memory"})
        return value
'''


def body():
    """padding_mask's code below its docstring, its parameters renamed (``lens``, ``size``)."""
    source = textwrap.dedent(inspect.getsource(masks.padding_mask))
    return source.split('"""', 2)[2].replace("lengths", "lens").replace("max_len", "size")


def in_a_class(name="checks"):
    """The copy calling its checks as a class of the cell's, `name`: ``checks.fail(...)``."""
    return ("import torch\n" + CHECKS.replace("checks", name) + "\n\ndef padding_mask(lens, size):"
            + body().replace("check.", f"{name}.")).strip() + "\n"


def as_functions(rename=None):
    """The copy calling its checks as functions of the cell's (``fail(...)``), each renamed by `rename`."""
    rename = rename or (lambda name: name)
    functions = "\n".join(line.removeprefix("    ") for line in CHECKS.split("\n")[4:]).replace("@staticmethod\n", "")
    names = ("fail", "describe", "dense", "has_values", "fits_in_memory")
    source = functions + "\n\ndef padding_mask(lens, size):" + body()
    for name in names:
        source = source.replace(f"checks.{name}(", f"{rename(name)}(").replace(f"check.{name}(", f"{rename(name)}(") \
            .replace(f"def {name}(", f"def {rename(name)}(")
    return "import torch\n\n" + source.strip() + "\n"


def with_local_helpers():
    """The copy holding its checks inside itself: a local class whose methods it calls."""
    local = textwrap.indent(CHECKS.strip(), "    ")
    return ("import torch\n\n\ndef padding_mask(lens, size):\n" + local + "\n" + body().replace("check.", "checks.")) \
        .strip() + "\n"


def with_lambdas(rename=None):
    """The copy calling lambdas it binds itself (``describe = lambda value: ...``), each renamed by `rename`."""
    rename = rename or (lambda name: name)
    head = (f"    {rename('fail')} = lambda function, argument, got, needed: "
            "(_ for _ in ()).throw(ValueError(function))\n"
            f"    {rename('describe')} = lambda value: repr(value)\n"
            f"    {rename('dense')} = {rename('has_values')} = lambda function, argument, value: value\n"
            f"    {rename('fits_in_memory')} = lambda function, argument, value, count, itemsize=1: value\n")
    text = body()
    for name in ("fail", "describe", "dense", "has_values", "fits_in_memory"):
        text = text.replace(f"check.{name}(", f"{rename(name)}(")
    return "import torch\n\n\ndef padding_mask(lens, size):\n" + head + text.lstrip("\n")


#: Names of the tensor API (and Python's) a copier could give the helpers instead.
API_NAMES = {"fail": "abs", "describe": "repr", "dense": "clone", "has_values": "detach", "fits_in_memory": "zeros"}


#: An honest 00.padding_mask that checks its arguments with a class of its own named ``check`` (as the course's
#: module alias is): neither a copy (the fingerprint) nor the course's check (the scan).
HONEST_CLASS_CHECK = '''
import torch


class check:
    """My own argument checks."""

    @staticmethod
    def lengths(lengths, max_len):
        if not isinstance(lengths, torch.Tensor) or lengths.ndim != 1 or lengths.is_floating_point():
            raise ValueError(f"padding_mask: lengths must be a 1-D integer tensor, got {lengths!r}")
        if not isinstance(max_len, int) or max_len < 0:
            raise ValueError(f"padding_mask: max_len must be an int >= 0, got {max_len!r}")


def padding_mask(lengths, max_len):
    check.lengths(lengths, max_len)
    positions = torch.arange(max_len, device=lengths.device)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]
'''
