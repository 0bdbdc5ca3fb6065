"""course_utils.probsparse: ProbSparse attention (lesson 05).

- With every query chosen (a factor large enough that u = L_Q) both implementations are full
  attention: values and gradients equal F.scaled_dot_product_attention, causal and not.
- Under the same sampled indices the fast implementation (sampled_addmm, no K_sample) and the
  plain one (the Informer code's steps) choose the same queries and return the same values.
- Causal mode leaks no value from the future; the non-causal mode does (ERRATA 13).
- Randomness comes from the generator only; the trace reproduces the Informer code's printed
  shapes; every bad argument is named, in English and in Chinese; no warning escapes a call.
"""

import math
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from gradients import assert_close_with_grads

from course_utils import i18n, probsparse
from course_utils.probsparse import (
    Trace,
    prob_sparse_attention,
    prob_sparse_attention_plain,
    sample_count,
    sample_keys,
    sampled_scores,
    sparsity_measure,
    walkthrough,
)
from course_utils.validation import ArgumentError

IMPLEMENTATIONS = {"fast": prob_sparse_attention, "plain": prob_sparse_attention_plain}


def tensors(*shapes, dtype=torch.float64, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g, dtype=dtype, requires_grad=requires_grad) for shape in shapes]


def qkv(B, H, L_Q, L_K, D, D_v, **options):
    return tensors((B, H, L_Q, D), (B, H, L_K, D), (B, H, L_K, D_v), **options)


# ----------------------------------------------------------------------------- sizes


def test_sample_count_is_factor_times_ceil_ln_at_most_the_length():
    assert sample_count(96) == 25 and sample_count(4096) == 45 and sample_count(8192) == sample_count(16384) == 50
    assert sample_count(512, 5) == 35 and sample_count(96, 1) == 5
    assert sample_count(10, 5) == 10 and sample_count(1) == 1 and sample_count(2, 5) == 2


def test_causal_samples_only_look_back():
    index = sample_keys(50, 50, 30, causal=True, generator=torch.Generator().manual_seed(0))
    assert index.shape == (50, 30) and index.dtype == torch.int64
    assert bool((index >= 0).all()) and bool((index <= torch.arange(50).unsqueeze(1)).all())
    assert bool((index[:, :] == 0)[0].all())  # query 0 can only sample key 0
    assert int(index[-1].max()) > 25  # the last query samples far back and near


# ----------------------------------------------------------------------------- every query chosen = full attention

# (B, H, L_Q, L_K, D, D_v, causal); factor 10 makes u = L_Q and U = L_K for these lengths
ALL_CHOSEN = [
    (2, 3, 5, 7, 4, 6, False),
    (1, 1, 6, 6, 3, 3, False),
    (1, 2, 1, 4, 5, 2, False),
    (2, 2, 7, 7, 5, 3, True),
    (1, 1, 6, 6, 4, 4, True),
    (3, 1, 1, 1, 2, 5, True),
]


@pytest.mark.parametrize("which", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("shape", ALL_CHOSEN, ids=["x".join(map(str, s[:-1])) + ("-causal" if s[-1] else "") for s in ALL_CHOSEN])
def test_with_every_query_chosen_it_is_full_attention_values_and_gradients(which, dtype, scale, shape):
    B, H, L_Q, L_K, D, D_v, causal = shape
    factor = 10
    assert sample_count(L_Q, factor) == L_Q and sample_count(L_K, factor) == L_K
    q, k, v = qkv(B, H, L_Q, L_K, D, D_v, dtype=dtype, requires_grad=True)
    generator = torch.Generator().manual_seed(1)
    ours, selected = IMPLEMENTATIONS[which](q, k, v, factor=factor, scale=scale, causal=causal, generator=generator)
    assert torch.equal(selected, torch.arange(L_Q).expand(B, H, L_Q))
    assert ours.dtype == dtype and ours.shape == (B, H, L_Q, D_v)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    assert_close_with_grads(ours, theirs, (q, k, v))


@pytest.mark.parametrize("which", IMPLEMENTATIONS)
@pytest.mark.parametrize("causal", [False, True])
def test_with_every_query_chosen_the_weights_are_full_attentions(which, causal):
    q, k, v = qkv(2, 2, 6, 6, 4, 3)
    _, weights = IMPLEMENTATIONS[which](q, k, v, factor=10, causal=causal, scale=0.7, need_weights=True)
    scores = q @ k.transpose(-2, -1) * 0.7
    if causal:
        scores = scores.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(weights, scores.softmax(-1))


# ----------------------------------------------------------------------------- fast == plain


# (B, H, L_Q, L_K, D, D_v, causal): u < L_Q, so a real choice is made
SPARSE = [(2, 3, 64, 64, 8, 5, False), (1, 2, 50, 80, 6, 6, False), (2, 2, 70, 70, 4, 7, True), (1, 1, 200, 200, 16, 8, True)]


@pytest.mark.parametrize("shape", SPARSE, ids=["x".join(map(str, s[:-1])) + ("-causal" if s[-1] else "") for s in SPARSE])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
# floats compared bit for bit: both sides on one thread (the fixture)
def test_fast_equals_plain_under_the_same_index(shape, dtype, one_thread):
    B, H, L_Q, L_K, D, D_v, causal = shape
    q, k, v = qkv(B, H, L_Q, L_K, D, D_v, dtype=dtype, seed=3)
    U, u = sample_count(L_K), sample_count(L_Q)
    assert u < L_Q
    index = sample_keys(L_Q, L_K, U, causal=causal, generator=torch.Generator().manual_seed(4))
    tolerance = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-6}
    fast, selected = prob_sparse_attention(q, k, v, index=index, causal=causal)
    plain, plain_selected = prob_sparse_attention_plain(q, k, v, index=index, causal=causal)
    assert selected.shape == (B, H, u) and selected.dtype == torch.int64
    assert torch.equal(selected, plain_selected)
    assert bool((selected.diff(dim=-1) > 0).all())  # increasing positions
    torch.testing.assert_close(fast, plain, **tolerance)

    fast_w, weights = prob_sparse_attention(q, k, v, index=index, causal=causal, need_weights=True)
    plain_w, plain_weights = prob_sparse_attention_plain(q, k, v, index=index, causal=causal, need_weights=True)
    torch.testing.assert_close(fast_w, fast, **tolerance)
    torch.testing.assert_close(plain_w, plain, **tolerance)
    torch.testing.assert_close(weights, plain_weights, **tolerance)
    assert weights.shape == (B, H, L_Q, L_K)
    torch.testing.assert_close(weights @ v, fast, **tolerance)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, L_Q, dtype=dtype), **tolerance)
    if causal:
        assert bool((weights.triu(1) == 0).all())
    lazy = torch.ones(B, H, L_Q, dtype=torch.bool).scatter(-1, selected, False)
    visible = torch.arange(1, L_K + 1, dtype=dtype) if causal else torch.full((L_Q,), float(L_K), dtype=dtype)
    # a lazy row is uniform over the keys it may see
    torch.testing.assert_close(weights.amax(-1)[lazy], (1 / visible).expand(B, H, L_Q)[lazy], **tolerance)


def test_sampled_scores_are_the_dots_with_the_sampled_keys_on_every_path():
    q, k = tensors((2, 3, 30, 8), (2, 3, 40, 8), seed=5)
    index = sample_keys(30, 40, 17, generator=torch.Generator().manual_seed(6))
    expected = torch.einsum("bhid,bhisd->bhis", q, k[:, :, index, :])
    torch.testing.assert_close(sampled_scores(q, k, index), expected, rtol=1e-12, atol=1e-12)  # sampled_addmm
    q_grad, k_grad = q.clone().requires_grad_(), k.clone().requires_grad_()
    differentiable = sampled_scores(q_grad, k_grad, index)  # gathered, a block at a time
    torch.testing.assert_close(differentiable, expected, rtol=1e-12, atol=1e-12)
    differentiable.sum().backward()
    assert q_grad.grad is not None and k_grad.grad is not None
    half = sampled_scores(q.bfloat16(), k.bfloat16(), index)  # a dtype sampled_addmm lacks
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.double(), expected, rtol=0.05, atol=0.1)
    small_blocks = probsparse._gathered_scores(q, k, index, block_bytes=1)  # one query per block
    torch.testing.assert_close(small_blocks, expected, rtol=1e-12, atol=1e-12)


def test_sampled_scores_are_finite_whatever_memory_held_before():
    # sampled_addmm adds beta · (old value); with old memory holding NaN, 0 · NaN would be NaN
    q, k = tensors((1, 2, 300, 8), (1, 2, 300, 8), dtype=torch.float32, seed=7)
    index = sample_keys(300, 300, 30, generator=torch.Generator().manual_seed(8))
    for _ in range(3):
        junk = torch.full((2 * 300 * 30,), float("nan"))
        del junk
        assert bool(sampled_scores(q, k, index).isfinite().all())


# ----------------------------------------------------------------------------- causal mode


@pytest.mark.parametrize("which", IMPLEMENTATIONS)
@pytest.mark.parametrize("position", [1, 17, 39])
# floats compared bit for bit: both sides on one thread (the fixture)
def test_causal_outputs_never_see_a_later_value(which, position, one_thread):
    q, k, v = qkv(2, 2, 40, 40, 6, 5, seed=9)
    index = sample_keys(40, 40, sample_count(40), causal=True, generator=torch.Generator().manual_seed(10))
    attention = IMPLEMENTATIONS[which]
    before, selected = attention(q, k, v, index=index, causal=True)
    changed_v = v.clone()
    changed_v[:, :, position:] += torch.randn(2, 2, 40 - position, 5, dtype=v.dtype) * 3
    after, selected_after = attention(q, k, changed_v, index=index, causal=True)
    assert torch.equal(selected, selected_after)
    assert torch.equal(after[:, :, :position], before[:, :, :position])
    assert not torch.allclose(after[:, :, position:], before[:, :, position:])

    # later queries and keys too: a small change keeps the same selection here, and then no output moves
    changed = [t.clone() for t in (q, k, v)]
    for t in changed:
        t[:, :, position:] += 1e-6 * torch.randn(2, 2, 40 - position, t.shape[-1], dtype=t.dtype)
    after, selected_after = attention(*changed, index=index, causal=True)
    assert torch.equal(selected, selected_after)
    assert torch.equal(after[:, :, :position], before[:, :, :position])


# floats compared bit for bit: both sides on one thread (the fixture)
def test_a_causal_measure_does_not_depend_on_later_keys(one_thread):
    q, k = tensors((1, 3, 30, 8), (1, 3, 30, 8), seed=11)
    index = sample_keys(30, 30, 20, causal=True, generator=torch.Generator().manual_seed(12))
    measure = sparsity_measure(sampled_scores(q, k, index))
    for i in (0, 9, 28):
        changed = k.clone()
        changed[:, :, i + 1 :] = torch.randn(1, 3, 29 - i, 8, dtype=k.dtype)
        after = sparsity_measure(sampled_scores(q, changed, index))
        assert torch.equal(after[..., : i + 1], measure[..., : i + 1])
        assert not torch.equal(after[..., i + 1 :], measure[..., i + 1 :])


@pytest.mark.parametrize("which", IMPLEMENTATIONS)
# floats compared bit for bit: both sides on one thread (the fixture)
def test_without_causal_mode_the_last_value_moves_the_first_output(which, one_thread):
    # ERRATA 13: the Informer code has no causal mode; lazy queries get mean(V) over all positions
    q, k, v = qkv(1, 2, 64, 64, 8, 8, seed=13)
    index = sample_keys(64, 64, sample_count(64), generator=torch.Generator().manual_seed(14))
    before, _ = IMPLEMENTATIONS[which](q, k, v, index=index)
    changed = v.clone()
    changed[:, :, -1] += 5.0
    after, _ = IMPLEMENTATIONS[which](q, k, changed, index=index)
    assert float((after[:, :, 0] - before[:, :, 0]).abs().max()) > 0.01
    causal, _ = IMPLEMENTATIONS[which](q, k, v, causal=True, generator=torch.Generator().manual_seed(14))
    causal_after, _ = IMPLEMENTATIONS[which](q, k, changed, causal=True, generator=torch.Generator().manual_seed(14))
    assert torch.equal(causal[:, :, :-1], causal_after[:, :, :-1])


# ----------------------------------------------------------------------------- randomness


@pytest.mark.parametrize("which", IMPLEMENTATIONS)
@pytest.mark.parametrize("causal", [False, True])
# floats compared bit for bit: both sides on one thread (the fixture)
def test_the_generator_alone_decides_the_sample(which, causal, one_thread):
    q, k, v = qkv(2, 2, 100, 100, 8, 8, dtype=torch.float32, seed=15)
    attention = IMPLEMENTATIONS[which]
    state = torch.random.get_rng_state()
    first = attention(q, k, v, causal=causal, generator=torch.Generator().manual_seed(0))
    second = attention(q, k, v, causal=causal, generator=torch.Generator().manual_seed(0))
    other = attention(q, k, v, causal=causal, generator=torch.Generator().manual_seed(1))
    given = attention(q, k, v, causal=causal, index=sample_keys(100, 100, sample_count(100), causal=causal,
                                                                 generator=torch.Generator().manual_seed(0)))
    assert torch.equal(torch.random.get_rng_state(), state)  # the global random state is untouched
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert torch.equal(first[0], given[0]) and torch.equal(first[1], given[1])
    assert not torch.equal(first[1], other[1])


def test_different_generator_states_give_different_samples():
    for causal in (False, True):
        a = sample_keys(64, 64, 25, causal=causal, generator=torch.Generator().manual_seed(0))
        b = sample_keys(64, 64, 25, causal=causal, generator=torch.Generator().manual_seed(0))
        c = sample_keys(64, 64, 25, causal=causal, generator=torch.Generator().manual_seed(1))
        assert torch.equal(a, b) and not torch.equal(a, c)
    generator = torch.Generator().manual_seed(0)
    assert not torch.equal(sample_keys(64, 64, 25, generator=generator), sample_keys(64, 64, 25, generator=generator))


# ----------------------------------------------------------------------------- the trace

# The Informer ProbSparse code's printout for B=32, H=8, L=96, D=64, factor 5
INFORMER_SHAPES = {
    "K_expand": (32, 8, 96, 96, 64),
    "index_sample": (96, 25),
    "K_sample": (32, 8, 96, 25, 64),
    "scores_sample": (32, 8, 96, 25),
    "M": (32, 8, 96),
    "selected": (32, 8, 25),
    "Q_reduce": (32, 8, 25, 64),
    "scores_top": (32, 8, 25, 96),
    "V_mean": (32, 8, 64),
    "context": (32, 8, 96, 64),
}


def test_the_walkthrough_reproduces_the_informer_codes_printed_shapes():
    trace = walkthrough()
    for name, shape in INFORMER_SHAPES.items():
        assert trace[name].shape == shape, name
    assert trace["K_expand"].view and trace["K_expand"].bytes == 0
    assert trace["K_expand"].logical_bytes == 32 * 8 * 96 * 96 * 64 * 4
    assert not trace["K_sample"].view and trace["K_sample"].bytes == 157_286_400
    assert trace["index_sample"].dtype == torch.int64 and trace["selected"].dtype == torch.int64
    assert trace["scores_sample"].bytes == 32 * 8 * 96 * 25 * 4
    assert trace.total_bytes == sum(step.bytes for step in trace) > 157_286_400
    assert trace["K_sample"].bytes / trace.total_bytes > 0.8  # K_sample costs (nearly) everything
    with pytest.raises(KeyError):
        trace["nothing"]


def test_the_fast_trace_never_gathers_the_keys():
    fast = walkthrough(fast=True)
    names = [step.name for step in fast]
    assert "K_expand" not in names and "K_sample" not in names
    for name in ("index_sample", "scores_sample", "M", "selected", "Q_reduce", "context"):
        assert fast[name].shape == INFORMER_SHAPES[name], name
    assert fast.total_bytes * 10 < walkthrough().total_bytes


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast"])
@pytest.mark.parametrize("causal", [False, True])
def test_a_real_call_traces_what_the_walkthrough_shows(fast, causal):
    q, k, v = qkv(2, 3, 40, 40, 8, 8, dtype=torch.float32, seed=16)
    trace = Trace()
    attention = prob_sparse_attention if fast else prob_sparse_attention_plain
    attention(q, k, v, causal=causal, generator=torch.Generator().manual_seed(0), trace=trace)
    meta = walkthrough(2, 3, 40, 8, fast=fast, causal=causal)
    assert [step.name for step in trace] == [step.name for step in meta]
    assert [(s.shape, s.dtype, s.view, s.bytes, s.logical_bytes) for s in trace] == \
           [(s.shape, s.dtype, s.view, s.bytes, s.logical_bytes) for s in meta]
    assert len(trace) == len(meta) and list(iter(trace)) == trace.steps


def test_the_walkthrough_costs_nothing_at_any_size():
    trace = walkthrough(64, 16, 1 << 20, 128)  # petabytes of K_expand, no memory
    assert trace["K_expand"].logical_bytes > 2**50 and trace["K_sample"].bytes > 2**38


# ----------------------------------------------------------------------------- bad arguments

q0, k0, v0 = torch.zeros(2, 3, 6, 4), torch.zeros(2, 3, 7, 4), torch.zeros(2, 3, 7, 5)
U0 = sample_count(7)
BAD = {
    "query not 4-D": ({"query": torch.zeros(3, 6, 4)}, "query"),
    "query not a tensor": ({"query": [[1.0]]}, "query"),
    "query integer": ({"query": torch.zeros(2, 3, 6, 4, dtype=torch.int64)}, "query"),
    "key dtype": ({"key": k0.double()}, "key"),
    "key D": ({"key": torch.zeros(2, 3, 7, 5)}, "key"),
    "key batch": ({"key": torch.zeros(1, 3, 7, 4)}, "key"),
    "value L": ({"value": torch.zeros(2, 3, 6, 5)}, "value"),
    "value heads": ({"value": torch.zeros(2, 2, 7, 5)}, "value"),
    "value 3-D": ({"value": torch.zeros(2, 7, 5)}, "value"),
    "empty query": ({"query": torch.zeros(2, 3, 0, 4)}, "query"),
    "empty key": ({"key": torch.zeros(2, 3, 0, 4), "value": torch.zeros(2, 3, 0, 5)}, "key"),
    "factor 0": ({"factor": 0}, "factor"),
    "factor True": ({"factor": True}, "factor"),
    "factor 2.5": ({"factor": 2.5}, "factor"),
    "scale -1": ({"scale": -1}, "scale"),
    "scale 0": ({"scale": 0.0}, "scale"),
    "scale string": ({"scale": "1"}, "scale"),
    "causal 1": ({"causal": 1}, "causal"),
    "causal L_Q != L_K": ({"causal": True}, "key"),
    "generator": ({"generator": 0}, "generator"),
    "index shape": ({"index": torch.zeros(6, U0 + 1, dtype=torch.int64)}, "index"),
    "index dtype": ({"index": torch.zeros(6, U0, dtype=torch.int32)}, "index"),
    "index list": ({"index": [[0] * U0] * 6}, "index"),
    "index negative": ({"index": torch.full((6, U0), -1)}, "index"),
    "index too large": ({"index": torch.full((6, U0), 7)}, "index"),
    "causal index in the future": (
        {"query": torch.zeros(2, 3, 7, 4), "causal": True, "index": torch.full((7, U0), 1)},
        "index",
    ),
}


def call_with(which, overrides):
    arguments = {"query": q0, "key": k0, "value": v0}
    arguments.update(overrides)
    query, key, value = arguments.pop("query"), arguments.pop("key"), arguments.pop("value")
    return IMPLEMENTATIONS[which](query, key, value, **arguments)


@pytest.mark.parametrize("which", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", BAD)
def test_every_bad_argument_is_named_in_english_and_chinese(which, case):
    overrides, argument = BAD[case]
    function = "prob_sparse_attention" if which == "fast" else "prob_sparse_attention_plain"
    with pytest.raises(ArgumentError) as english:
        call_with(which, overrides)
    assert str(english.value).startswith(f"{function}: argument '{argument}' got ")
    i18n.set_language("zh")
    with pytest.raises(ArgumentError) as chinese:
        call_with(which, overrides)
    assert str(chinese.value).startswith(f"{function}：参数 {argument} 收到")
    assert "needs" not in str(chinese.value) and "；需要" in str(chinese.value)


def test_a_causal_index_up_to_the_diagonal_is_accepted():
    q = torch.zeros(1, 1, 7, 4)
    prob_sparse_attention(q, q, q, causal=True, index=torch.arange(7).unsqueeze(1).expand(7, U0).contiguous())


@pytest.mark.parametrize("name", ["batch", "heads", "length", "dim", "factor"])
@pytest.mark.parametrize("bad", [0, True, 2.0])
def test_walkthrough_names_a_bad_size(name, bad):
    with pytest.raises(ArgumentError, match=f"walkthrough: argument '{name}'"):
        walkthrough(**{name: bad})


# ----------------------------------------------------------------------------- nothing printed, nothing warned


def test_no_warning_escapes_a_call():
    q, k, v = qkv(1, 2, 300, 300, 8, 8, dtype=torch.float32, seed=17)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for causal in (False, True):
            for attention in IMPLEMENTATIONS.values():
                attention(q, k, v, causal=causal, generator=torch.Generator().manual_seed(0))
                attention(q, k, v, causal=causal, generator=torch.Generator().manual_seed(0), need_weights=True)
        sampled_scores(q, k, sample_keys(300, 300, 30, generator=torch.Generator().manual_seed(0)))
        walkthrough(fast=True)
    assert [str(w.message) for w in caught] == []


def test_no_warning_escapes_a_fresh_process():
    # torch warns about CSR tensors once per process: only a fresh process sees whether it escapes
    code = (
        "import warnings; warnings.simplefilter('always');"
        "import torch; from course_utils.probsparse import prob_sparse_attention;"
        "x = torch.randn(1, 2, 200, 8);"
        "prob_sparse_attention(x, x, x, generator=torch.Generator().manual_seed(0))"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""


def test_a_call_returns_what_it_documents():
    q, k, v = qkv(2, 3, 100, 100, 8, 5, dtype=torch.float32, seed=18)
    output, selected = prob_sparse_attention(q, k, v, generator=torch.Generator().manual_seed(0))
    u = sample_count(100)
    assert output.shape == (2, 3, 100, 5) and selected.shape == (2, 3, u)
    assert u == 5 * math.ceil(math.log(100))
