"""Every public function of course_utils on any device, proven without a GPU (issue 30, item 1).

A learner on a GPU gives a helper CUDA tensors (or a model on CUDA) and must get CUDA results, with
no tensor made on the CPU behind their back: a mask, an index, a constant, a generator's draw. A
tensor made without ``device=`` lands on torch's default device, the CPU, which is where the inputs
are on a machine without a GPU: such a leftover is invisible there. So every call here runs with
its inputs on the CPU and torch's default device set to ``meta`` (``with torch.device("meta")``):

- a tensor a function makes without naming a device now lands on meta, and mixing it with the CPU
  inputs fails loudly ("Tensor on device meta is not on the expected device cpu");
- a recorder (a ``TorchDispatchMode``, the machinery ``tiled.peak_bytes`` counts bytes with) notes
  the device of every tensor each operator of the call returns, so a leftover that never meets an
  input (a mask used alone, a result) is seen too; so is every tensor of the result.

The rule: a call whose inputs hold tensors (tensors, a model's parameters, a generator, a batch, a
softmax state) makes every tensor on their device; a call whose inputs hold none (a mask builder, a
constructor, ``make_model``) makes them on torch's default device, as torch's own factories do. A
tensor made with ``device="cpu"`` written out would escape both, so a scan of the sources refuses
the CPU named as a device anywhere in the package's code.

The calls are the unchanged base calls of the fuzz (tests/test_fuzz.py: one per public function and
method, with small valid arguments) and a few more below; ``test_every_public_function_is_called``
proves the list covers every public function and method of the modules. lesson 08's causal tiled
attention, whose keep masks were made on the CPU (the leftover a GPU run found), is among them.
"""

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import test_fuzz
from course_utils import (attention, decoding, layers, masks, multihead, optim, probsparse, seq2seq, tiled, toy,
                          transformer)
from course_teacher.exercises import EXERCISES
from course_utils.exercises import PASSED, evaluate, public
from course_utils.exercises import rules

MODULES = (attention, masks, layers, multihead, probsparse, transformer, seq2seq, toy, decoding, tiled, optim)
PACKAGE = Path(attention.__file__).parent
META = torch.device("meta")


# ----------------------------------------------------------------------------- where the inputs are


def _devices(value, seen=None):
    """The devices of every tensor `value` holds: a tensor, a model's parameters and buffers, a
    generator, the fields of a dataclass or a NamedTuple, the items of a list, tuple or dict, and
    the attributes of an object whose method is called (a KVCache, a CachedReverser)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return set()
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return {value.device}
    if isinstance(value, torch.Generator):
        return {value.device}
    if isinstance(value, nn.Module):
        return {t.device for t in (*value.parameters(), *value.buffers())}
    if isinstance(value, dict):
        return set().union(*(_devices(item, seen) for item in value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*(_devices(item, seen) for item in value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return set().union(*(_devices(getattr(value, field.name), seen) for field in dataclasses.fields(value)))
    if inspect.ismethod(value):
        return _devices(value.__self__, seen)
    if hasattr(value, "__dict__") and type(value).__module__.startswith("course_utils"):
        return _devices(vars(value), seen)
    return set()


class _Made(TorchDispatchMode):
    """Records (operator, device) for every tensor an operator returns while the mode is on."""

    def __init__(self):
        super().__init__()
        self.made = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        self.made += [(str(func), t.device) for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
        return result


def placed(function, *args, **kwargs):
    """(the devices the call's inputs are on, where its tensors should be made, [(operator, device)
    of every tensor it made elsewhere, the result's tensors included]) for ``function(*args,
    **kwargs)`` run with meta as torch's default device."""
    inputs = _devices(function) | _devices(args) | _devices(kwargs)
    if isinstance(kwargs.get("device"), (str, torch.device)):  # a device asked for is where the tensors go
        inputs.add(torch.device(kwargs["device"]))
    if len(inputs) > 1:
        raise AssertionError(f"a case's inputs must be on one device, not {inputs}")
    wanted = next(iter(inputs), META)
    made = _Made()
    with torch.device(META), made:
        result = function(*args, **kwargs)
    made.made += [("the result", t.device) for t in tree_flatten(_tensors_of(result))[0] if isinstance(t, torch.Tensor)]
    return inputs, wanted, [(operator, device) for operator, device in made.made if device != wanted]


def _tensors_of(value):
    """The tensors a result holds, as a pytree (dataclasses and models opened up)."""
    if isinstance(value, nn.Module):
        return list(value.parameters()) + list(value.buffers())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [_tensors_of(getattr(value, field.name)) for field in dataclasses.fields(value)]
    if isinstance(value, (list, tuple)):
        return [_tensors_of(item) for item in value]
    if isinstance(value, dict):
        return [_tensors_of(item) for item in value.values()]
    return value


# ----------------------------------------------------------------------------- the calls


def _extra_cases():
    """Calls the fuzz makes no base call of: {label: (function, args, kwargs)}."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 4, generator=g) for _ in range(3))
    fused, naive = multihead.FusedMultiheadAttention(4, 2), multihead.NaiveMultiheadAttention(4, 2)
    reverser = seq2seq.make_model(d_model=8, nhead=2, d_ff=8)
    source = seq2seq.held_out(2).source
    block = decoding.TinyBlock(8, 2, 1, 8, window=2)
    parameter = nn.Parameter(torch.ones(3))
    parameter.grad = torch.ones(3)
    adam = optim.Adam([parameter])
    q4, k4, v4 = (torch.randn(1, 2, 10, 4, generator=g) for _ in range(3))

    def flash_backward(q, k, v):
        q = q.clone().requires_grad_()
        output, lse = tiled.flash_attention(q, k, v, block_q=2, block_k=3, causal=True)
        (output.sum() + lse.sum()).backward()
        return q.grad

    def traced(q, k, v, generator):  # the trace's inputs, call and record, as the lesson uses them
        trace = probsparse.Trace()
        probsparse.prob_sparse_attention(q, k, v, causal=True, trace=trace, generator=generator)
        return [step for step in trace]

    return {
        "masks.check_keep_mask": (masks.check_keep_mask, ("f", torch.ones(5, 5, dtype=torch.bool), q @ k.mT), {}),
        "masks.causal_mask(device)": (masks.causal_mask, (3, 5), {"device": "cpu"}),
        "multihead.NaiveMultiheadAttention.packed_weights": (naive.packed_weights, (), {}),
        "multihead.FusedMultiheadAttention.packed_weights": (fused.packed_weights, (), {}),
        "multihead.NaiveMultiheadAttention.forward(3-D mask)": (
            naive, (q, k, v), {"keep_mask": torch.ones(2, 5, 5, dtype=torch.bool)}),
        "seq2seq.Reverser": (seq2seq.Reverser, (), {"d_model": 8, "nhead": 2, "d_ff": 8}),
        "seq2seq.Reverser.decode": (reverser.decode, (source[:, :3], reverser.encode(source), source), {}),
        "decoding.TinyBlock": (decoding.TinyBlock, (8, 2, 1, 8), {}),
        "decoding.TinyBlock.forward": (block, (torch.randn(2, 3, 8, generator=g), torch.arange(3)),
                                       {"cache": decoding.KVCache(2)}),
        "tiled.TiledAttention": (tiled.TiledAttention.apply, (q, k, v, 2, 3, True, None, None, None), {}),
        "tiled.TiledAttention.forward": (tiled.TiledAttention.apply, (q, k, v, 2, 3, False, 2, None, 0.5), {}),
        "tiled.TiledAttention.backward": (flash_backward, (q, k, v), {}),
        "tiled.tiled_attention(causal)": (tiled.tiled_attention, (q, k, v), {"block_q": 2, "block_k": 2,
                                                                            "causal": True, "window": 3}),
        "tiled.tiled_backward(causal)": (
            tiled.tiled_backward, (q, k, v, *tiled.tiled_attention(q, k, v, causal=True), torch.ones_like(q)),
            {"block_q": 2, "block_k": 3, "causal": True}),
        "tiled.tile_kinds(keep_mask)": (tiled.tile_kinds, (5, 5, 2, 2), {"keep_mask": torch.ones(5, 5, dtype=torch.bool)}),
        "optim.Adam.step": (adam.step, (0.1,), {}),
        "optim.Adam.step(tensor)": (adam.step, (torch.tensor(0.1),), {}),
        **{f"probsparse.Trace{method}": (traced, (q4, k4, v4, g), {})
           for method in ("", ".inputs", ".call", ".record")},
        "probsparse.prob_sparse_attention(need_weights)": (
            probsparse.prob_sparse_attention, (q4, k4, v4), {"causal": True, "need_weights": True, "generator": g}),
        "probsparse.prob_sparse_attention_plain(need_weights)": (
            probsparse.prob_sparse_attention_plain, (q4, k4, v4), {"causal": True, "need_weights": True,
                                                                   "generator": g}),
        "decoding.gqa_attention(causal, L_q = 0)": (
            decoding.gqa_attention, (q4[:, :, :0], k4[:, :1], v4[:, :1]), {"causal": True}),
        "transformer.DecoderLayer.forward(L_t = 0)": (
            transformer.DecoderLayer(4, 2, 8), (q[:, :0], k), {}),
        "toy.alignment_margin(weights)": (toy.alignment_margin, (torch.rand(8, 8, generator=g), "reverse"), {}),
        "seq2seq.decoding_steps": (seq2seq.decoding_steps, ("decode", 3, 5), {}),
        "tiled.position_keep": (tiled.position_keep, (0, 2, 0, 3, -1, 0), {"device": "cpu"}),
        "seq2seq.offset_profile(reach past the source)": (
            seq2seq.offset_profile, (torch.rand(2, 2, 3, 3, generator=g),
                                     seq2seq.make_batch(torch.tensor([1, 2]), torch.full((2, 2), 4))), {"reach": 5}),
    }


#: Calls not run here, and why. The trainers read their loss at every step, which a meta tensor does
#: not have: they build their model on torch's default device (make_model, whose case is above) and
#: draw their batches on the CPU (the same data on every machine), then move them to the model's
#: device; only a run on a GPU shows that whole path (the GPU-marked tests). The others run the
#: learner's call, or PyTorch's own, under a dispatch mode of their own and make no tensor themselves.
NOT_RUN = {
    "toy.train": "trains (reads its loss each step)",
    "toy.train_neighbours": "trains (reads its loss each step)",
    "seq2seq.train": "trains (reads its loss each step)",
    "multihead.milliseconds": "times a call: nothing of its own is a tensor",
    "multihead.operators": "runs the learner's call under a dispatch mode of its own",
    "tiled.peak_bytes": "runs the learner's call under a dispatch mode of its own",
    "multihead.took_fast_path": "runs nn.MultiheadAttention's own code under a dispatch mode",
    "tiled.sdpa_backend": "runs F.scaled_dot_product_attention under a dispatch mode",
}

#: Calls that have no tensor input and draw on a CPU generator of their own by design: the same
#: example or held-out batch on every machine (their docstrings say so; move them with .to(device)).
DRAWN_ON_THE_CPU = {"toy.example", "toy.examples", "toy.neighbours_example", "seq2seq.held_out",
                    # lesson 10's text, its ids and windows, and a shipped model read with device=None
                    "corpus.load", "corpus.Corpus.batch", "pretrained.load_file"}


def _base_cases():
    """{label: (function, args, kwargs)}: the fuzz's unchanged base call of every function."""
    found = {}
    for group in test_fuzz.GROUPS:
        for label, function, args, kwargs in test_fuzz.cases(group):
            if label.endswith("()") or "(" not in label:
                found[label.removesuffix("()")] = (function, args, kwargs)
    return found


def _name(label):
    """The function a label names: "toy.train" for "toy.train", "a.B.forward" for "a.B.forward[...]"."""
    return label.split("(")[0].split("[")[0]


CASES = {**_base_cases(), **_extra_cases()}


@pytest.mark.parametrize("label", sorted(CASES))
def test_every_tensor_is_made_where_the_inputs_are(label):
    if _name(label) in NOT_RUN:
        pytest.skip(NOT_RUN[_name(label)])
    function, args, kwargs = CASES[label]
    if hasattr(function, "factory"):  # the fuzz builds the object in the call: build it here, outside meta
        function = getattr(function.factory(), function.method)
    try:
        inputs, wanted, elsewhere = placed(function, *args, **kwargs)
    except Exception as error:  # noqa: BLE001 (a tensor made on the default device met an input)
        raise AssertionError(f"{label} failed with meta as the default device (a tensor made without "
                             f"device= met the CPU inputs): {type(error).__name__}: {error}") from None
    if _name(label) in DRAWN_ON_THE_CPU and not inputs:
        elsewhere = [(operator, device) for operator, device in elsewhere if device.type != "cpu"]
    assert not elsewhere, f"{label}: inputs on {wanted}, tensors made elsewhere: {elsewhere[:8]}"


def test_every_public_function_is_called():
    """Every public function and class of the modules, and every public method of their classes
    (forward included), has a case here or is in NOT_RUN with its reason."""
    called = {_name(label) for label in CASES} | set(NOT_RUN)
    missing = []
    for module in MODULES:
        short = module.__name__.split(".")[-1]
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__ or not callable(value):
                continue
            if inspect.isclass(value) and (dataclasses.is_dataclass(value) or issubclass(value, tuple)):
                continue  # a container of results: it makes no tensor
            label = f"{short}.{name}"
            if label not in called:
                missing.append(label)
            if inspect.isclass(value):
                for method, member in vars(value).items():
                    if method.startswith("_") or not callable(getattr(value, method)):
                        continue
                    if isinstance(member, property):
                        continue
                    if f"{label}.{method}" not in called and not (
                            method == "forward" and any(c.startswith(f"{label}.forward") for c in called)):
                        missing.append(f"{label}.{method}")
    assert not missing, f"no device case for {missing}"


def test_a_leftover_is_caught():
    """The test above fails on a tensor made without device= (what tiled_attention's causal masks
    were), whether it meets an input or is only returned."""
    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="meta"):
        placed(lambda x: x + torch.ones(3), x)
    assert placed(lambda x: (x, torch.ones(3)), x)[2] == [("aten.ones.default", META), ("the result", META)]
    assert placed(lambda x: x + torch.ones(3, device=x.device), x)[2] == []
    assert placed(lambda: torch.ones(3))[1:] == (META, [])  # no input: the default device is right


def test_lesson_08s_causal_tiles_stay_on_the_inputs_device():
    """The leftover a GPU run found: tiled_attention(..., causal=True) made each diagonal tile's keep
    mask on the CPU ("expected self and mask to be on the same device, but got mask on cpu"): it
    named the CPU (``"cpu" if keep_mask is None else keep_mask.device``), which the scan finds, and
    every mask of the tiles, the forward's and the backward's, is made where the inputs are."""
    assert cpu_named_as_a_device(Path(tiled.__file__).read_text(encoding="utf-8")) == []
    q = torch.randn(1, 2, 9, 4)
    for options in ({"causal": True}, {"causal": True, "window": 3}, {"window": 2}):
        assert placed(tiled.tiled_attention, q, q, q, block_q=4, block_k=4, **options)[2] == []
        assert placed(tiled.materialised_attention, q, q, q, **options)[2] == []
        output, lse = tiled.tiled_attention(q, q, q, **options)
        assert placed(tiled.tiled_backward, q, q, q, output, lse, torch.ones_like(output), block_q=4, block_k=4,
                      **options)[2] == []


# ----------------------------------------------------------------------------- the sources


def cpu_named_as_a_device(source):
    """[(line, code)]: where `source` names the CPU as a device: "cpu" passed to a call (device="cpu",
    .to("cpu"), torch.device("cpu")) or as a parameter's default. Comparing with it (a tensor's
    device.type != "cpu") is not naming it, nor is a docstring."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        values = []
        if isinstance(node, ast.Call):
            values = [*node.args, *(keyword.value for keyword in node.keywords)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            values = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        for value in values:
            if isinstance(value, ast.IfExp):
                value = [value.body, value.orelse]
            for part in value if isinstance(value, list) else [value]:
                if isinstance(part, ast.Constant) and isinstance(part.value, str) and part.value.lower().startswith("cpu"):
                    found.append((part.lineno, ast.get_source_segment(source, node).splitlines()[0]))
    return sorted(found)


def test_no_module_names_the_cpu_as_a_device():
    # measured.py names devices for the benchmarks' files (not tensors); triton_setup.device is the one
    # place that chooses where lesson 09's cases go (the interpreter runs kernels on the CPU); the rest must not
    sources = {path.name: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.glob("*.py"))
               if path.name != "measured.py"}
    chooser = next(node for node in ast.parse(sources["triton_setup.py"]).body
                   if isinstance(node, ast.FunctionDef) and node.name == "device")
    found = {name: [(line, code) for line, code in cpu_named_as_a_device(source)
                    if not (name == "triton_setup.py" and chooser.lineno <= line <= chooser.end_lineno)]
             for name, source in sources.items()}
    found = {name: hits for name, hits in found.items() if hits}
    assert not found, f"tensors made on the CPU whatever the inputs: {found}"


def test_the_scan_finds_the_cpu_named():
    # guards the test above against a scan that finds nothing and so passes everything
    code = ('a = torch.ones(3, device="cpu")\nb = x.to("cpu")\ndef f(device="cpu"):\n    pass\n'
            'c = g(1, "cpu" if y is None else y)\nif x.device.type != "cpu":\n    pass\n"""cpu"""\n')
    assert [line for line, _ in cpu_named_as_a_device(code)] == [1, 2, 3, 5]


def test_a_module_made_from_pytorchs_is_made_on_its_device():
    """from_torch builds the layer where the PyTorch layer's weights are (never on the CPU first)
    and to_torch builds PyTorch's where this layer's are: with meta as the default device, both
    land on the CPU of their inputs here."""
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    for cls in (multihead.NaiveMultiheadAttention, multihead.FusedMultiheadAttention):
        assert placed(cls.from_torch, mha)[2] == []
        assert placed(cls(4, 2).to_torch)[2] == []
    for ours, theirs in ((transformer.EncoderLayer, nn.TransformerEncoderLayer(4, 2, 8, batch_first=True)),
                         (transformer.DecoderLayer, nn.TransformerDecoderLayer(4, 2, 8, batch_first=True))):
        assert placed(ours.from_torch, theirs)[2] == []
        assert placed(ours(4, 2, 8).to_torch)[2] == []
    assert placed(layers.SelfAttention(4).to_multihead)[2] == []


# ----------------------------------------------------------------------------- the exercises


def _holds_a_tensor(args):
    return bool(_devices(args))


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_each_exercises_reference_makes_its_tensors_where_its_cases_are(exercise):
    """Each exercise's reference on each of its public cases (CPU tensors) with meta as the default
    device: every tensor it makes is on the CPU of the case (the leftovers a GPU run found in the
    references of lessons 02, 05, 06, 07 and 08: masks, positions, buffers made without device=). A
    case of numbers alone (02.causal_mask's lengths) answers on torch's default device, as torch's
    factories do: there, meta."""
    reference = EXERCISES[exercise].reference
    for case in public.load(exercise).cases:
        try:
            inputs, wanted, elsewhere = placed(reference, *case.args)
        except Exception as error:  # noqa: BLE001 (a tensor made on the default device met an input)
            raise AssertionError(f"{exercise} case {case.number} failed with meta as the default device (a tensor "
                                 f"made without device= met the CPU inputs): {type(error).__name__}: {error}") from None
        assert not elsewhere, f"{exercise} case {case.number}: inputs on {wanted}, tensors made elsewhere: {elsewhere[:6]}"
        assert inputs == ({torch.device("cpu")} if _holds_a_tensor(case.args) else set()), case.number


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_each_check_makes_its_tensors_where_its_cases_are(exercise):
    """The check (course_utils.exercises, the learner's side) with meta as the default device, given
    the reference: the cases it loads, the copies it hands over, the gradients it seeds and what it
    compares are made on the CPU its data lives on, and it passes (or, where the reference uses a
    helper the exercise forbids, says FORBIDDEN, as on any device). An exercise of numbers alone is
    given the reference pinned to the CPU: its answer belongs on the default device (above), and the
    check's data is on the CPU. (This is also the proof that each reference passes its own check,
    which tests/test_exercises.py leaves to it: one check run for both.)"""
    reference = EXERCISES[exercise].reference
    cases = public.load(exercise).cases
    if not any(_holds_a_tensor(case.args) for case in cases):
        def pinned(*args, reference=reference):
            with torch.device("cpu"):
                return reference(*args)
        function = pinned
    else:
        function = reference
    made = _Made()
    with torch.device(META), made:
        verdict = evaluate(exercise, function)
    forbidden_here = EXERCISES[exercise].forbidden and verdict.code == "FORBIDDEN"
    # (lesson 09's references are plain torch: the kernel rule refuses them once their values are right)
    kernel_here = exercise in rules.KERNEL_EXERCISES and verdict.code == "TORCH_OUTSIDE_KERNEL"
    assert verdict.status == PASSED or forbidden_here or kernel_here, verdict.message
    elsewhere = [(operator, device) for operator, device in made.made if device.type != "cpu"]
    assert not elsewhere, f"{exercise}: the check made tensors off the CPU of its data: {elsewhere[:6]}"


def test_a_cpu_generator_draws_the_same_sample_for_any_device():
    """probsparse.sample_keys with a CPU generator (as the lessons seed one) and another device: the
    sample is drawn on the CPU generator, as on the CPU, and put on that device (a GPU run refused the
    CPU generator there). meta stands for the other device: the result is there, and the generator
    moved on exactly as a CPU draw moves it."""
    for causal in (False, True):
        here, there = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        on_cpu = probsparse.sample_keys(12, 12, 5, causal=causal, generator=here)
        elsewhere = probsparse.sample_keys(12, 12, 5, causal=causal, generator=there, device=META)
        assert elsewhere.device == META and elsewhere.shape == on_cpu.shape and elsewhere.dtype == on_cpu.dtype
        assert torch.equal(here.get_state(), there.get_state())
        with torch.device(META):  # no device named: torch's default device, wherever the generator is
            assert probsparse.sample_keys(12, 12, 5, causal=causal, generator=torch.Generator()).device == META
