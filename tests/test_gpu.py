"""On a GPU (`make test-gpu`; marked `gpu`, skipped with one line where torch sees no CUDA device):
every public helper of course_utils given CUDA inputs returns its results on the GPU, equal to what
it computes on the CPU in float64; every exercise's reference computes its public cases' expected
results from CUDA copies of them, and the check passes a function that computes on the GPU.

The comparison runs each call twice from one set of CPU float64 arguments: on the CPU as they are,
and on copies moved to CUDA in float32 (tensors, and modules with their parameters). Every tensor
of the GPU's result must be on the GPU and within float32's tolerance of the CPU's. A helper that
makes a tensor on the CPU behind its inputs' back fails here with "expected all tensors to be on
the same device" or, where it returns it, with the device check.
"""

import copy
import os

import pytest
import torch
import torch.nn.functional as F

from course_utils import attention, decoding, layers, masks, multihead, probsparse, tiled, transformer
from course_utils.exercises import PASSED, evaluate, public

pytestmark = pytest.mark.gpu
#: The GPU. COURSE_GPU_TESTS_ON=cpu runs these tests on the CPU instead, in float32 against float64:
#: a dry run of the tests' own logic on a machine without a GPU (conftest.py then runs them).
CUDA = torch.device(os.environ.get("COURSE_GPU_TESTS_ON", "cuda"))
ATOL, RTOL = 2e-4, 2e-4  # float32 on the GPU against float64 on the CPU; TF32 is off (below)


@pytest.fixture(autouse=True)
def exact_float32():
    """Matrix products in true float32 (not TF32, which some GPUs use for speed with 10-bit mantissas)."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def moved(value, device, dtype=torch.float32):
    """`value` with every tensor (floating ones in `dtype`) and module on `device`; containers kept."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.to(device, dtype) if value.is_floating_point() and dtype else value.to(device)
    if isinstance(value, torch.nn.Module):
        return copy.deepcopy(value).to(device, dtype) if dtype else copy.deepcopy(value).to(device)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(moved(item, device, dtype) for item in value)
    if isinstance(value, dict):
        return {key: moved(item, device, dtype) for key, item in value.items()}
    return value


def same(cpu, gpu, where="result"):
    """Every tensor of `gpu` is on CUDA and close to the matching one of `cpu`; the rest is equal."""
    if isinstance(cpu, torch.Tensor):
        assert isinstance(gpu, torch.Tensor), f"{where}: a tensor on the CPU, {type(gpu).__name__} on the GPU"
        assert gpu.device.type == CUDA.type, f"{where}: on {gpu.device}, not on the GPU its inputs were on"
        assert gpu.shape == cpu.shape, f"{where}: shape {tuple(gpu.shape)} on the GPU, {tuple(cpu.shape)} on the CPU"
        if cpu.is_floating_point():
            torch.testing.assert_close(gpu.detach().cpu().double(), cpu.detach().double(), atol=ATOL, rtol=RTOL,
                                       msg=lambda text: f"{where}: {text}")
        else:
            assert torch.equal(gpu.cpu(), cpu), f"{where}: differs"
    elif isinstance(cpu, (list, tuple)):
        assert len(cpu) == len(gpu), where
        for i, (a, b) in enumerate(zip(cpu, gpu)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(cpu, dict):
        assert cpu.keys() == gpu.keys(), where
        for key in cpu:
            same(cpu[key], gpu[key], f"{where}[{key!r}]")
    elif hasattr(cpu, "__dict__") and not callable(cpu):
        same(vars(cpu), vars(gpu), where)
    else:
        assert cpu == gpu, f"{where}: {cpu!r} on the CPU, {gpu!r} on the GPU"


def random(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _eval(module):
    return module.double().eval()


def _seeded(make, seed=0):
    torch.manual_seed(seed)
    return make()


q, k, v = random(2, 3, 5, 8, seed=1), random(2, 3, 7, 8, seed=2), random(2, 3, 7, 6, seed=3)
x, memory = random(2, 5, 16, seed=4), random(2, 7, 16, seed=5)
keep = masks.causal_mask(5, 7)
lengths = torch.tensor([7, 4])
sq, sk, sv = random(1, 2, 64, 8, seed=6), random(1, 2, 64, 8, seed=7), random(1, 2, 64, 8, seed=8)
index = probsparse.sample_keys(64, 64, probsparse.sample_count(64), generator=torch.Generator().manual_seed(0))
causal_index = probsparse.sample_keys(64, 64, probsparse.sample_count(64), causal=True,
                                      generator=torch.Generator().manual_seed(0))
gq, gkv = random(2, 4, 6, 8, seed=9), random(2, 2, 6, 8, seed=10)
tq, tk, tv = random(1, 2, 40, 8, seed=11), random(1, 2, 40, 8, seed=12), random(1, 2, 40, 8, seed=13)

#: (name, function, args, kwargs): every public helper that takes tensors or modules
CALLS = [
    ("attention.dot_scores", attention.dot_scores, (q, k), {}),
    ("attention.scaled_dot_scores", attention.scaled_dot_scores, (q, k), {}),
    ("attention.bilinear_scores", attention.bilinear_scores, (q, k, random(8, 8, seed=20)), {}),
    ("attention.additive_scores", attention.additive_scores,
     (q, k, random(8, 4, seed=21), random(8, 4, seed=22), random(4, seed=23)), {}),
    ("attention.scaled_dot_product_attention", attention.scaled_dot_product_attention, (q, k, v),
     {"keep_mask": keep}),
    ("masks.padding_mask", masks.padding_mask, (lengths, 7), {}),
    ("masks.masked_softmax", masks.masked_softmax, (random(2, 5, 7), keep), {}),
    ("masks.from_key_padding", masks.from_key_padding, (~masks.padding_mask(lengths, 7)[:, 0, 0],), {}),
    ("masks.to_key_padding", masks.to_key_padding, (masks.padding_mask(lengths, 7),), {}),
    ("masks.from_additive", masks.from_additive, (masks.to_additive(keep, torch.float64),), {}),
    ("masks.to_additive", masks.to_additive, (keep,), {}),
    ("masks.from_ignore", masks.from_ignore, (~keep,), {}),
    ("masks.to_ignore", masks.to_ignore, (keep,), {}),
    ("layers.SelfAttention", lambda m, x: m(x, keep_mask=masks.causal_mask(5).to(x.device)),
     (_seeded(lambda: _eval(layers.SelfAttention(16))), x), {}),
    ("layers.CrossAttention", lambda m, x, y: m(x, y),
     (_seeded(lambda: _eval(layers.CrossAttention(16))), x, memory), {}),
    ("multihead.split_heads", multihead.split_heads, (x, 4), {}),
    ("multihead.merge_heads", multihead.merge_heads, (q,), {}),
    ("multihead.NaiveMultiheadAttention", lambda m, x, y: m(x, y, y, key_padding_mask=~masks.padding_mask(
        torch.tensor([7, 4], device=x.device), 7)[:, 0, 0]),
     (_seeded(lambda: _eval(multihead.NaiveMultiheadAttention(16, 4))), x, memory), {}),
    ("multihead.FusedMultiheadAttention", lambda m, x: m(x, x, x, keep_mask=masks.causal_mask(5).to(x.device)),
     (_seeded(lambda: _eval(multihead.FusedMultiheadAttention(16, 4))), x), {}),
    ("probsparse.sampled_scores", probsparse.sampled_scores, (sq, sk, index), {}),
    ("probsparse.sparsity_measure", probsparse.sparsity_measure, (random(1, 2, 64, 25, seed=30),), {}),
    ("probsparse.lazy_context", probsparse.lazy_context, (sv, 64), {"causal": True}),
    ("probsparse.prob_sparse_attention", probsparse.prob_sparse_attention, (sq, sk, sv), {"index": index}),
    ("probsparse.prob_sparse_attention causal", probsparse.prob_sparse_attention, (sq, sk, sv),
     {"index": causal_index, "causal": True}),
    ("probsparse.prob_sparse_attention_plain", probsparse.prob_sparse_attention_plain, (sq, sk, sv),
     {"index": index, "need_weights": True}),
    ("probsparse.prob_sparse_attention_plain causal", probsparse.prob_sparse_attention_plain, (sq, sk, sv),
     {"index": causal_index, "causal": True}),
    ("transformer.FeedForward", lambda m, x: m(x), (_seeded(lambda: _eval(transformer.FeedForward(16, 32))), x), {}),
    ("transformer.EncoderLayer", lambda m, x: m(x, key_padding_mask=~masks.padding_mask(
        torch.tensor([5, 3], device=x.device), 5)[:, 0, 0]),
     (_seeded(lambda: _eval(transformer.EncoderLayer(16, 4, 32))), x), {}),
    ("transformer.DecoderLayer", lambda m, x, y: m(x, y),
     (_seeded(lambda: _eval(transformer.DecoderLayer(16, 4, 32))), x, memory), {}),
    ("transformer.LearnedPositionalEmbedding", lambda m: m(5, offset=2),
     (_seeded(lambda: _eval(transformer.LearnedPositionalEmbedding(10, 16))),), {}),
    ("decoding.repeat_kv", decoding.repeat_kv, (gkv, 2), {}),
    ("decoding.gqa_attention", decoding.gqa_attention, (gq, gkv, gkv), {"causal": True}),
    ("decoding.gqa_attention window", decoding.gqa_attention, (gq, gkv, gkv), {"causal": True, "window": 3}),
    ("decoding.rope_angles", decoding.rope_angles, (torch.arange(6),  8), {}),
    ("decoding.apply_rope", decoding.apply_rope, (gq, torch.arange(6)), {}),
    ("decoding.apply_rope half", decoding.apply_rope, (gq, torch.arange(3, 9)), {"layout": "half"}),
    ("decoding.TinyDecoder", lambda m, t: m(t), (decoding.make_tiny_decoder(seed=0).double().eval(),
                                                  torch.tensor([[1, 5, 9, 2], [3, 3, 7, 0]])), {}),
    ("tiled.piece_state", tiled.piece_state, (random(2, 5, 7), random(2, 5, 7, 6)), {}),
    ("tiled.online_softmax", tiled.online_softmax, (random(3, 10), (3, 5)), {}),
    ("tiled.tiled_attention", tiled.tiled_attention, (tq, tk, tv), {"block_q": 16, "block_k": 8}),
    ("tiled.tiled_attention causal", tiled.tiled_attention, (tq, tk, tv),
     {"block_q": 16, "block_k": 8, "causal": True}),
    ("tiled.tiled_attention window", tiled.tiled_attention, (tq, tk, tv),
     {"block_q": 16, "block_k": 8, "causal": True, "window": 10}),
    ("tiled.tiled_attention keep_mask", tiled.tiled_attention, (tq, tk, tv),
     {"block_q": 16, "block_k": 8, "keep_mask": masks.causal_mask(40, align="bottom_right")}),
    ("tiled.materialised_attention", tiled.materialised_attention, (tq, tk, tv), {"causal": True}),
    ("tiled.flash_attention", tiled.flash_attention, (tq, tk, tv), {"block_q": 16, "block_k": 16, "causal": True}),
    ("tiled.update", lambda x, y: tiled.update(tiled.update(tiled.empty_state(
        (2, 5), 6, dtype=x.dtype, device=x.device), x, y), x.flip(-1), y),
     (random(2, 5, 7, seed=50), random(2, 7, 6, seed=52)), {}),
    ("tiled.merge_states, finish", lambda a, b, y: tiled.finish(tiled.merge_states(
        tiled.piece_state(a, y), tiled.piece_state(b, y))), (random(2, 5, 7, seed=53), random(2, 5, 7, seed=54),
                                                              random(2, 5, 7, 6, seed=55)), {}),
    # the helpers that make a tensor from sizes take a device: given the inputs' (the one of `like`)
    ("tiled.empty_state", lambda like: tiled.empty_state((2, 5), 6, dtype=like.dtype, device=like.device),
     (random(1),), {}),
    ("tiled.keep_of", lambda like: tiled.keep_of(6, 9, causal=True, window=3, device=like.device), (random(1),), {}),
    ("decoding.window_keep_mask", lambda like: decoding.window_keep_mask(4, 9, window=3, device=like.device),
     (random(1),), {}),
    ("probsparse.sample_keys", lambda like: probsparse.sample_keys(
        30, 40, 9, causal=False, generator=torch.Generator().manual_seed(1), device=like.device), (random(1),), {}),
    ("probsparse.select_queries", probsparse.select_queries, (random(1, 2, 64, seed=56), 9), {}),
    ("probsparse.causal_keep", probsparse.causal_keep, (torch.tensor([[[3, 10, 0]]]), 12), {}),
    ("decoding.pool_kv_heads", lambda w, b: decoding.pool_kv_heads(w, 4, 2, bias=b),
     (random(16, 16, seed=57), random(16, seed=58)), {}),
]


@pytest.mark.parametrize("name, function, args, kwargs", CALLS, ids=[call[0] for call in CALLS])
def test_a_helper_given_cuda_inputs_computes_on_the_gpu_what_it_computes_on_the_cpu(name, function, args, kwargs):
    with torch.no_grad():
        expected = function(*args, **kwargs)
        found = function(*moved(args, CUDA), **moved(kwargs, CUDA))
    same(expected, found, name)


def _backward(attention_function, **options):
    def run(q, k, v, d_output, **more):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        output = attention_function(q, k, v, **options, **more)
        output = output[0] if isinstance(output, tuple) else output
        output.backward(d_output)
        return output, q.grad, k.grad, v.grad
    return run


@pytest.mark.parametrize("name, run, options", [
    ("tiled.flash_attention", _backward(tiled.flash_attention, block_q=16, block_k=8, causal=True), {}),
    ("attention.scaled_dot_product_attention", _backward(attention.scaled_dot_product_attention), {}),
    ("probsparse.prob_sparse_attention", _backward(probsparse.prob_sparse_attention), {"index": index}),
], ids=lambda value: value if isinstance(value, str) else "")
def test_gradients_on_the_gpu_are_the_cpus(name, run, options):
    # the options' tensors (ProbSparse's index) go to the GPU with the inputs: a CPU index there is
    # refused, as the helper's contract says (the first GPU run passed it on the CPU and failed)
    inputs = (sq, sk, sv, random(1, 2, 64, 8, seed=40)) if "probsparse" in name else (tq, tk, tv, random(1, 2, 40, 8, seed=40))
    same(run(*inputs, **options), run(*moved(inputs, CUDA), **moved(options, CUDA)), name)


def test_tiled_backward_on_the_gpu_is_the_cpus():
    def run(q, k, v, d_output):
        output, lse = tiled.tiled_attention(q, k, v, block_q=16, block_k=8, causal=True)
        return tiled.tiled_backward(q, k, v, output, lse, d_output, block_q=16, block_k=8, causal=True)
    inputs = (tq, tk, tv, random(1, 2, 40, 8, seed=41))
    same(run(*inputs), run(*moved(inputs, CUDA)), "tiled.tiled_backward")


def test_tiny_decoder_generates_the_same_tokens_cached_and_recomputed_on_the_gpu():
    model = decoding.make_tiny_decoder(seed=0).eval()
    prompt = torch.tensor([[1, 5, 9, 2]])
    on_cpu = model.generate(prompt, 12, cache=True)[0]
    on_gpu = model.to(CUDA)
    cached, recomputed = on_gpu.generate(prompt.to(CUDA), 12, cache=True)[0], on_gpu.generate(prompt.to(CUDA), 12, cache=False)[0]
    assert cached.device.type == CUDA.type and torch.equal(cached, recomputed) and torch.equal(cached.cpu(), on_cpu)


def test_the_course_gqa_is_pytorchs_on_the_gpu():
    qc, kc = moved((gq, gkv), CUDA)
    ours = decoding.gqa_attention(qc, kc, kc, causal=True)
    ours = ours[0] if isinstance(ours, tuple) else ours
    theirs = F.scaled_dot_product_attention(qc, kc, kc, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=RTOL)


# ----------------------------------------------------------------------------- the exercises on CUDA inputs

def _references():
    from course_teacher.exercises import EXERCISES  # the teacher's side: only where the repository is

    return EXERCISES


EXERCISE_IDS = sorted(public.EXERCISES)


@pytest.mark.parametrize("exercise", EXERCISE_IDS)
def test_each_reference_computes_its_public_results_from_cuda_copies_of_its_cases(exercise):
    """A case of numbers alone (02.causal_mask's sizes, 06.sinusoidal_encoding's and offset_rotation's)
    carries no device: its answer is made on torch's default device, the CPU here, as torch's
    factories do (tests/test_devices.py proves the rule for the references without a GPU)."""
    reference, cases = _references()[exercise].reference, public.load(exercise).cases
    atol, rtol = public.load(exercise).tolerance
    for case in cases:
        holds_a_tensor = any(isinstance(item, torch.Tensor) for item in _flat(case.args))
        wanted = CUDA.type if holds_a_tensor else torch.get_default_device().type
        with torch.no_grad():
            found = reference(*moved(case.args, CUDA, dtype=None))
        for i, (expected, got) in enumerate(zip(_flat(case.expected), _flat(found))):
            if isinstance(expected, torch.Tensor):
                assert got.device.type == wanted, f"{exercise} case {case.number}, value {i}: on {got.device}"
                torch.testing.assert_close(got.cpu(), expected, atol=max(atol, ATOL), rtol=max(rtol, RTOL),
                                           msg=lambda text: f"{exercise} case {case.number}, value {i}: {text}")
            else:
                assert got == expected, f"{exercise} case {case.number}, value {i}"


@pytest.mark.parametrize("exercise", EXERCISE_IDS)
def test_the_check_passes_a_reference_that_computes_on_the_gpu(exercise):
    """A learner on a GPU runtime may move the check's CPU inputs to the GPU and the result back:
    values and gradients (through the moves) are judged as for a CPU function."""
    reference = _references()[exercise].reference

    def on_the_gpu(*args):
        found = reference(*(arg.to(CUDA) if isinstance(arg, torch.Tensor) else arg for arg in args))
        return _to_cpu(found)

    verdict = evaluate(exercise, on_the_gpu)
    assert verdict.status == PASSED or verdict.code == "FORBIDDEN", verdict.message


def _flat(value):
    return [item for part in value for item in _flat(part)] if isinstance(value, (list, tuple)) else [value]


def _to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_to_cpu(item) for item in value)
    return value

