"""The helper package's contract at every boundary (issue 32): each finding of the independent
tester, as its reproducer, fixed.

- the two multi-head layers agree for every keep mask their docstrings allow (a 3-D mask is
  (H, L_q, L_k) in both), with B = H and B ≠ H;
- no silent wrong result: a NaN, infinite or past-the-dtype scale, step size or ε is refused, and so
  are an accuracy of no example, token ids outside the vocabulary and a step past the schedule;
- every size guard counts what its function allocates (measured with ``tiled.peak_bytes``), the
  whole model and not one of its layers or heads, and its modules;
- every error names the function the learner called and the argument, says what it got and what it
  needs, in English and in Chinese: the low-level helpers of ``tiled`` check their tensors, decoding
  steps stop at the model's positions, integers past int64 are refused before they overflow, and
  an empty target or query gives an empty result.

Fast on purpose (seconds): small sizes, and where a guard's verdict depends on the machine's
memory, a limit on the process's address space that the guards read (``small_machine``).
"""

import contextlib
import math
import re

import pytest
import torch
from torch import nn

import test_validation
from course_utils import (decoding, multihead, norm_study, optim, probsparse, seq2seq, session, tiled, toy,
                          transformer)
from course_utils import attention as attn

GiB = 2**30


@contextlib.contextmanager
def small_machine():
    """While it lasts, the process may map only 2 GiB more than it does (``ulimit -v``, which the
    size guards read) and a call may run 10 s: a guard's verdict is then the same on every machine,
    and a call that slips past a missing guard fails fast instead of taking the machine's memory or
    running for minutes. Only around a call: pytest's own reporting runs without the limits."""
    resource = pytest.importorskip("resource")
    import signal

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm", encoding="ascii") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    limit = mapped + 2 * GiB if hard == resource.RLIM_INFINITY else min(mapped + 2 * GiB, hard)

    def too_long(*_):
        raise TimeoutError("ran past 10 s: no guard stopped it")

    previous = signal.signal(signal.SIGALRM, too_long)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def bounded(call):
    """`call` run on a small_machine."""
    def run():
        with small_machine():
            return call()

    return run


def refused(call, function, argument, lang="en"):
    """The message of the ArgumentError that `call` raises, checked to name `function` and `argument`."""
    text = test_validation.raised(call, lang)
    start = f"{function}: argument '{argument}' got " if lang == "en" else f"{function}：参数 {argument} 收到"
    assert text.startswith(start), text
    return text


# ----------------------------------------------------------------------------- the semantic bug


L_Q, L_K = 4, 5  # neither equal to B nor to H, so that no axis can pass for another


def _mask_shapes(B, H):
    """Every shape the docstrings allow: broadcastable to (B, H, L_q, L_k), 0 to 4 axes, each axis
    full or 1 (31 shapes)."""
    full = (B, H, L_Q, L_K)
    shapes = []
    for ndim in range(5):
        axes = full[4 - ndim:]
        for ones in range(2**ndim):
            shapes.append(tuple(1 if ones >> i & 1 else size for i, size in enumerate(axes)))
    return shapes


@pytest.mark.parametrize(("B", "H"), [(2, 2), (3, 2)], ids=["B=H=2", "B=3,H=2"])
def test_the_naive_and_fused_layers_agree_on_every_mask_shape(B, H):
    """Issue 32's semantic bug: a 3-D keep mask was (B, L_q, L_k) in the naive layer and (H, L_q, L_k)
    in the fused one (outputs 0.41 apart with B = H = 2; with B ≠ H the naive layer raised an error
    naming AttentionHead.forward). Broadcasting reads axes from the right, so both read (H, L_q, L_k)."""
    g = torch.Generator().manual_seed(0)
    fused = multihead.FusedMultiheadAttention(8, H, kdim=6, vdim=7).double()
    naive = multihead.NaiveMultiheadAttention(8, H, kdim=6, vdim=7).double().copy_weights_from(fused)
    query, key, value = (torch.randn(B, L, E, generator=g, dtype=torch.float64)
                         for L, E in ((L_Q, 8), (L_K, 6), (L_K, 7)))
    padding = torch.zeros(B, L_K, dtype=torch.bool)
    padding[0, -2:] = True
    shapes = _mask_shapes(B, H)
    assert len(set(shapes)) == 31 and (H, L_Q, L_K) in shapes and (B, 1, L_Q, L_K) in shapes
    for shape in shapes:
        keep = torch.rand(shape, generator=g) > 0.4
        # with the padding mask too for the masks with a head axis (where the two were read apart)
        for options in ({}, {"key_padding_mask": padding}) if len(shape) >= 3 and shape[-3] == H else ({},):
            for need_weights in (True, False):
                ours, weights = naive(query, key, value, keep_mask=keep, need_weights=need_weights, **options)
                theirs, expected = fused(query, key, value, keep_mask=keep, need_weights=need_weights, **options)
                torch.testing.assert_close(ours, theirs, msg=f"mask {shape} {options} need_weights={need_weights}")
                if need_weights:
                    torch.testing.assert_close(weights, expected, msg=f"mask {shape}")


# ----------------------------------------------------------------------------- silent wrong results


def _qkv(shape=(2, 3, 4)):
    g = torch.Generator().manual_seed(1)
    return tuple(torch.randn(shape, generator=g) for _ in range(3))


q3, k3, v3 = _qkv()
q4, k4, v4 = _qkv((1, 2, 10, 4))
SCALED = {
    "scaled_dot_product_attention": lambda scale: attn.scaled_dot_product_attention(q3, k3, v3, scale=scale),
    "prob_sparse_attention": lambda scale: probsparse.prob_sparse_attention(q4, k4, v4, scale=scale),
    "prob_sparse_attention_plain": lambda scale: probsparse.prob_sparse_attention_plain(q4, k4, v4, scale=scale),
    "tiled_attention": lambda scale: tiled.tiled_attention(q3, k3, v3, scale=scale),
    "materialised_attention": lambda scale: tiled.materialised_attention(q3, k3, v3, scale=scale),
    "flash_attention": lambda scale: tiled.flash_attention(q3, k3, v3, scale=scale),
    "tiled_backward": lambda scale: tiled.tiled_backward(q3, k3, v3, *tiled.tiled_attention(q3, k3, v3),
                                                         torch.ones_like(v3), scale=scale),
}


@pytest.mark.parametrize("function", SCALED)
@pytest.mark.parametrize("scale", [math.nan, math.inf, -math.inf, 1e300], ids=["nan", "inf", "-inf", "1e300"])
def test_a_scale_that_would_make_every_weight_nan_is_refused(function, scale):
    """scaled_dot_product_attention(q, k, v, scale=nan) gave all NaN, prob_sparse_attention with inf
    or 1e300 (∞ in float32) too; tiled refused a non-finite scale only. Now every one refuses all."""
    text = refused(lambda: SCALED[function](scale), function, "scale")
    assert "float32" in text
    SCALED[function](0.5)  # a finite scale still works


def test_a_scale_tensor_is_read_and_checked():
    refused(lambda: SCALED["scaled_dot_product_attention"](torch.tensor(math.nan)),
            "scaled_dot_product_attention", "scale")
    out, _ = attn.scaled_dot_product_attention(q3, k3, v3, scale=torch.tensor(0.5))
    torch.testing.assert_close(out, attn.scaled_dot_product_attention(q3, k3, v3, scale=0.5)[0])
    # float64 holds 1e300: past float32's range, not float64's
    attn.scaled_dot_product_attention(q3.double(), k3.double(), v3.double(), scale=1e300)


@pytest.mark.parametrize("lr", [math.nan, math.inf, -math.inf, -0.1, 1e300, torch.tensor(math.nan)],
                         ids=["nan", "inf", "-inf", "negative", "1e300", "nan_tensor"])
def test_adam_refuses_a_step_that_would_ruin_the_parameters(lr):
    """optim.Adam([p]).step(nan) (or inf) turned every parameter into NaN; a negative step climbs
    the loss; 1e300 overflows float32. torch.optim.Adam refuses them too. The parameters stay."""
    parameter = nn.Parameter(torch.ones(3))
    parameter.grad = torch.ones(3)
    adam = optim.Adam([parameter])
    refused(lambda: adam.step(lr), "Adam.step", "lr")
    assert torch.equal(parameter.detach(), torch.ones(3)) and adam.steps == 0
    adam.step(torch.tensor(0.1))
    assert adam.steps == 1 and torch.isfinite(parameter).all()


@pytest.mark.parametrize("eps", [math.nan, math.inf, -1.0])
def test_adam_refuses_a_non_finite_or_negative_eps(eps):
    refused(lambda: optim.Adam([nn.Parameter(torch.ones(3))], eps=eps), "Adam", "eps")


def test_an_accuracy_of_no_example_is_refused():
    """toy.train(..., held_out=0).accuracy, toy.accuracy and toy.side_accuracy on zero examples were
    NaN: the fraction right of no answer has no value, so the calls are refused."""
    refused(lambda: toy.train("reverse", steps=1, batch=2, held_out=0), "train", "held_out")
    refused(lambda: toy.train_neighbours(steps=1, batch=2, held_out=0), "train_neighbours", "held_out")
    none = torch.zeros(0, 8, dtype=torch.int64)
    refused(lambda: toy.accuracy(toy.make_model("reverse"), none, none), "accuracy", "tokens")
    refused(lambda: toy.side_accuracy(toy.NeighboursModel(), none, torch.zeros(0, 8, 2, dtype=torch.int64)),
            "side_accuracy", "tokens")
    tokens, targets = toy.make_batch("reverse", 3, torch.Generator().manual_seed(0))
    assert 0 <= toy.accuracy(toy.make_model("reverse"), tokens, targets) <= 1


@pytest.mark.parametrize("letters", [torch.tensor([[99, -5]]), torch.tensor([[3, 13]]), torch.tensor([[2, 4]]),
                                     torch.tensor([[3.0, 4.0]]), torch.tensor([[True, False]])],
                         ids=["outside", "past_vocab", "eos", "float", "bool"])
def test_make_batch_refuses_what_is_no_letter(letters):
    """seq2seq.make_batch(torch.tensor([2]), torch.tensor([[99, -5]])) accepted ids outside the
    vocabulary, and float letters; the special tokens are no letters either."""
    refused(lambda: seq2seq.make_batch(torch.tensor([2]), letters), "make_batch", "letters")


def test_make_batch_keeps_taking_letters():
    """Letters past a source's length are never read: padding there is no error."""
    batch = seq2seq.make_batch(torch.tensor([2, 1]), torch.tensor([[3, 4], [12, 0]]))
    assert seq2seq.show(batch.source[0]) == "ab⟩" and seq2seq.show(batch.target_out[1]) == "j⟩·"


@pytest.mark.parametrize(("args", "argument"), [((20, 10, 0.1), "step"), ((0, 0, 0.1), "steps"),
                                                ((0, 10, 0.1, 10), "warmup"), ((-1, 10, 0.1), "step"),
                                                ((0, 10, -0.1), "lr"), ((0, 10, math.nan), "lr"),
                                                ((0.5, 10, 0.1), "step")])
def test_learning_rate_refuses_a_step_outside_the_schedule(args, argument):
    """learning_rate(20, 10, 0.1) returned −0.1; (0, 0, 0.1) and (0, 10, 0.1, 10) divided by zero."""
    refused(lambda: seq2seq.learning_rate(*args), "learning_rate", argument)


def test_every_rate_of_the_schedule_is_between_0_and_lr():
    for steps in (1, 2, 7):
        for warmup in range(steps):
            rates = [seq2seq.learning_rate(t, steps, 0.5, warmup) for t in range(steps)]
            assert all(0 < rate <= 0.5 for rate in rates), (steps, warmup, rates)


# ----------------------------------------------------------------------------- size guards


def test_keep_of_counts_the_one_byte_per_entry_it_makes():
    """keep_of counted 1 byte per entry and built an int64 offset table (32 GiB at 2**16 × 2**16;
    12.8 GB at 40,000²): now it cuts a band of bools in place, exactly L_q · L_k bytes, so its
    guard counts what it allocates. The same for causal_mask and window_keep_mask."""
    from course_utils import masks

    for call, size in ((lambda: tiled.keep_of(300, 200, causal=True, window=7), 300 * 200),
                       (lambda: tiled.keep_of(200, 300, window=5), 200 * 300),
                       (lambda: masks.causal_mask(300, 200, align="bottom_right"), 300 * 200),
                       (lambda: decoding.window_keep_mask(200, 300, window=4), 200 * 300)):
        assert tiled.peak_bytes(call)[1] == size
    refused(bounded(lambda: tiled.keep_of(2**16, 2**16, causal=True)), "keep_of", "L_k")  # 4 GiB of bools


def test_the_band_is_the_mask_its_offsets_say():
    """keep_of's band (tril_ and triu_ in place) keeps exactly the keys whose offset j − i is allowed."""
    i, j = torch.arange(9)[:, None], torch.arange(11)[None, :]
    for causal in (False, True):
        for window in (None, 1, 3, 20, 2**100):
            if not causal and window is None:
                continue
            keep = tiled.keep_of(9, 11, causal=causal, window=window)
            expected = torch.ones(9, 11, dtype=torch.bool)
            if causal:
                expected &= j <= i
            if window is not None and window < 100:
                expected &= (j > i - window) & (causal | (j < i + window))
            assert torch.equal(keep, expected), (causal, window)


@pytest.mark.parametrize(("call", "function", "argument"), [
    (lambda: probsparse.sample_keys(8, 8, 2**31), "sample_keys", "count"),
    (lambda: probsparse.causal_keep(torch.tensor([1, 2]), 2**40), "causal_keep", "length_k"),
    (lambda: tiled.tile_kinds(2**20, 2**20, 1, 1), "tile_kinds", "block_q"),
    (lambda: toy.neighbour_positions(10**8), "neighbour_positions", "length"),
    (lambda: multihead.NaiveMultiheadAttention(1024, 1024, head_dim=1024), "NaiveMultiheadAttention", "embed_dim"),
    (lambda: seq2seq.make_model(0, layers=2**31), "make_model", "layers"),
], ids=["sample_keys", "causal_keep", "tile_kinds", "neighbour_positions", "naive_heads", "make_model_layers"])
def test_a_call_larger_than_memory_is_refused(call, function, argument):
    """No check at all (sample_keys, causal_keep, tile_kinds: 8 TiB, neighbour_positions), or a
    check of one head (NaiveMultiheadAttention(1024, 1024, head_dim=1024): each head 12 MB, the
    whole 16 GB) or one layer (make_model(layers=2**31)) instead of the whole."""
    assert "fits in memory" in refused(bounded(call), function, argument)


def test_the_whole_model_is_counted_not_one_head():
    with small_machine():
        multihead.AttentionHead(1024, 1024)  # one head of the layer above: 12 MB, it fits
        multihead.NaiveMultiheadAttention(64, 4, head_dim=64)  # a small layer still fits


@pytest.mark.parametrize(("call", "function", "argument"), [
    (lambda: decoding.TinyDecoder(vocab=2, d_model=2, heads=1, kv_heads=1, layers=10**6, d_ff=1), "TinyDecoder",
     "layers"),
    (lambda: multihead.NaiveMultiheadAttention(8, 2**20, head_dim=1), "NaiveMultiheadAttention", "num_heads"),
    (lambda: seq2seq.make_model(0, d_model=2, nhead=1, d_ff=1, layers=10**4), "make_model", "layers"),
], ids=["TinyDecoder", "naive_heads", "make_model"])
def test_a_model_of_too_many_modules_is_refused(call, function, argument):
    """TinyDecoder(layers=10**6, ...) fit in memory but built a million modules (minutes);
    NaiveMultiheadAttention(8, 2**20, head_dim=1) had no limit on heads."""
    assert "modules" in refused(bounded(call), function, argument)


@pytest.mark.parametrize("function", [toy.train, toy.train_neighbours, toy.examples, seq2seq.train,
                                      decoding.TinyDecoder.generate, multihead.milliseconds])
def test_a_count_without_bound_says_so(function):
    """train(steps=2**31) or generate(p, 2**31) run for ever by request: acceptable, if the docstring
    says it runs as many steps as asked and how long one takes."""
    assert re.search("as many (times )?as asked", " ".join(function.__doc__.split())), function.__doc__


# ----------------------------------------------------------------------------- clear errors


def _state(rows=(2, 3), d_v=2):
    g = torch.Generator().manual_seed(2)
    return tiled.piece_state(torch.randn(*rows, 4, generator=g), torch.randn(*rows, 4, d_v, generator=g))


S = tiled.SoftmaxState
BROKEN_STATES = {
    "str_ell": lambda s: S(s.m, "x", s.acc), "int": lambda s: S(s.m.long(), s.ell.long(), s.acc.long()),
    "ell_rows": lambda s: S(s.m, s.ell[:1], s.acc), "ell_float64": lambda s: S(s.m, s.ell.double(), s.acc),
    "acc_rows": lambda s: S(s.m, s.ell, s.acc[:1]), "acc_str": lambda s: S(s.m, s.ell, "acc"),
    "acc_float64": lambda s: S(s.m, s.ell, s.acc.double()), "sparse": lambda s: S(s.m.to_sparse(), s.ell, s.acc),
}


@pytest.mark.parametrize("broken", BROKEN_STATES)
def test_the_online_softmax_helpers_check_the_tensors_of_a_state(broken):
    """update, merge_states and finish checked only the container type (64 of tiled's 69 unclear
    errors): now each checks the state's tensors, and update its tile's scores and values."""
    state = BROKEN_STATES[broken](_state())
    scores, values = torch.randn(2, 3, 5), torch.randn(2, 5, 2)
    refused(lambda: tiled.finish(state), "finish", "state")
    refused(lambda: tiled.merge_states(_state(), state), "merge_states", "b")
    refused(lambda: tiled.merge_states(state, _state()), "merge_states", "a")
    refused(lambda: tiled.update(state, scores, values), "update", "state")


def test_update_checks_its_tile_against_the_state():
    state, scores, values = tiled.empty_state((2, 3), 2), torch.randn(2, 3, 5), torch.randn(2, 5, 2)
    refused(lambda: tiled.update(state, scores[:, :2], values), "update", "scores")
    refused(lambda: tiled.update(state, scores, values[..., :1]), "update", "values")
    refused(lambda: tiled.update(state, scores, values[:, :4]), "update", "values")
    refused(lambda: tiled.update(tiled.empty_state((2, 3)), scores, values), "update", "state")
    refused(lambda: tiled.merge_states(_state(), _state((2, 3), 3)), "merge_states", "b")
    output, lse = tiled.finish(tiled.update(state, scores, values))
    weights = torch.softmax(scores, dim=-1)
    torch.testing.assert_close(output, weights @ values)
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1))


@pytest.mark.parametrize("max_steps", [0, 11, 20, 2**64])
def test_decoding_stops_at_the_models_positions(max_steps):
    """CachedReverser(...).decode(source, max_steps=20) raised IndexError (index 10 is out of bounds),
    max_steps=0 "stack expects a non-empty TensorList", greedy_decode(..., max_steps=20) a size
    mismatch (11 vs 10): the model has 10 positions, so max_steps is 1 … 10."""
    model, source = seq2seq.make_model(0, d_model=8, nhead=2, d_ff=8), torch.tensor([[3, 4, 2]])
    refused(lambda: decoding.CachedReverser(model).decode(source, max_steps=max_steps), "CachedReverser.decode",
            "max_steps")
    refused(lambda: seq2seq.greedy_decode(model, source, max_steps=max_steps), "greedy_decode", "max_steps")


def test_decoding_runs_to_the_last_position():
    model, source = seq2seq.make_model(0, d_model=8, nhead=2, d_ff=8), torch.tensor([[3, 4, 2]])
    cached, _ = decoding.CachedReverser(model).decode(source, max_steps=10)
    assert torch.equal(cached, seq2seq.greedy_decode(model, source, max_steps=10))


def test_a_batch_without_letters_has_no_offset_profile():
    """offset_profile on all-zero lengths divided by zero."""
    batch = seq2seq.make_batch(torch.tensor([0, 0]), torch.full((2, 3), 4))
    weights = torch.rand(2, 2, batch.target_out.shape[1], batch.source.shape[1])
    refused(lambda: seq2seq.offset_profile(weights, batch), "offset_profile", "batch")


def test_an_offset_outside_every_source_has_weight_0():
    batch = seq2seq.make_batch(torch.tensor([1, 2]), torch.full((2, 2), 4))
    weights = torch.softmax(torch.randn(2, 2, 3, 3), dim=-1)
    profile = seq2seq.offset_profile(weights, batch, reach=50)
    assert len(profile) == 101 and all(profile[offset] == 0.0 for offset in range(-50, 51) if abs(offset) >= 3)
    assert {o: profile[o] for o in range(-2, 3)} == seq2seq.offset_profile(weights, batch, reach=2)


@pytest.mark.parametrize("function", ["prob_sparse_attention", "prob_sparse_attention_plain"])
def test_probsparse_refuses_queries_without_features(function):
    """prob_sparse_attention with D = 0 raised ZeroDivisionError (both versions)."""
    empty = torch.randn(1, 1, 4, 0)
    refused(lambda: getattr(probsparse, function)(empty, empty, torch.randn(1, 1, 4, 3)), function, "query")


@pytest.mark.parametrize("window", [None, 8, 3])
def test_the_cache_takes_keys_and_values_of_different_sizes_with_or_without_a_window(window):
    """KVCache(window=2).update(k, v) with d_k ≠ d_v failed with a raw shape mismatch, while without a
    window the same call was accepted: both accept it, and a window wider than the tokens seen
    returns what the growing cache does."""
    g = torch.Generator().manual_seed(3)
    grown, cache = decoding.KVCache(), decoding.KVCache(window)
    for length in (2, 1, 1, 3):
        key, value = torch.randn(1, 2, length, 4, generator=g), torch.randn(1, 2, length, 6, generator=g)
        expected, got = grown.update(key, value), cache.update(key, value)
        if window is None or window >= grown.seen:
            for a, b in zip(expected, got, strict=True):
                assert torch.equal(a, b)
        else:
            assert got[1].shape[-1] == 6 and got[0].shape[-1] == 4
    refused(lambda: cache.update(key, value[..., :5]), "KVCache.update", "value")


@pytest.mark.parametrize(("call", "function", "argument"), [
    (lambda: seq2seq.make_model(2**64), "make_model", "seed"),
    (lambda: seq2seq.held_out(2, 2**64), "held_out", "seed"),
    (lambda: seq2seq.train(2**64, steps=1), "train", "seed"),
    (lambda: decoding.make_tiny_decoder(2**64), "make_tiny_decoder", "seed"),
    (lambda: toy.make_model("reverse", 2**64), "make_model", "seed"),
    (lambda: toy.example("reverse", 2**64 - 10_000), "example", "index"),
    (lambda: toy.neighbours_example(-(2**63) - toy.NEIGHBOURS_EXAMPLES_FROM - 1), "neighbours_example", "index"),
    (lambda: toy.train("reverse", 2**64 - 10, steps=1), "train", "seed"),
    (lambda: toy.train_neighbours(seed=2**64 - 10, steps=1), "train_neighbours", "seed"),
    (lambda: norm_study.layer_gradients(True, seed=2**64 - 10), "layer_gradients", "seed"),
    (lambda: norm_study.warmup_run(True, 0, seed=2**64), "warmup_run", "seed"),
    (lambda: session.setup(seed=2**32), "setup", "seed"),
    (lambda: decoding.gqa_attention(q4, k4, v4, causal=True, window=2**63), "gqa_attention", "window"),
    (lambda: decoding.KVCache(window=2**100), "KVCache", "window"),
    (lambda: decoding.TinyDecoder(window=2**64), "TinyDecoder", "window"),
], ids=["s2s_make_model", "held_out", "s2s_train", "make_tiny_decoder", "toy_make_model", "example",
        "neighbours_example", "toy_train", "train_neighbours", "layer_gradients", "warmup_run", "setup", "gqa_window", "KVCache_window", "TinyDecoder_window"])
def test_integers_past_int64_are_refused_before_they_overflow(call, function, argument):
    """Seeds ≥ 2**64 passed the checks and overflowed inside torch ("Overflow when unpacking long
    long"), an example's index too once 10,000 is added to it; setup seeds NumPy too, which takes
    seeds below 2**32 only."""
    refused(call, function, argument)


def test_the_largest_seeds_and_windows_still_work():
    seq2seq.make_model(2**64 - 1, d_model=8, nhead=2, d_ff=8)
    toy.example("reverse", 2**64 - 1 - toy.EXAMPLES_FROM)
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 4, 6, 8, generator=g) for _ in range(3))
    torch.testing.assert_close(decoding.gqa_attention(q, k, v, causal=True, window=2**63 - 1),
                               decoding.gqa_attention(q, k, v, causal=True))


def test_a_window_past_int64_is_no_window_in_tiled():
    """tiled_attention(..., causal=True, window=2**100) overflowed ("can't convert negative int to
    unsigned"): a window wider than the sequence hides nothing, whatever its size."""
    for function in (tiled.tiled_attention, tiled.materialised_attention, tiled.flash_attention):
        torch.testing.assert_close(function(q3, k3, v3, causal=True, window=2**100), function(q3, k3, v3, causal=True))
    assert torch.equal(tiled.tile_kinds(9, 9, 2, 2, causal=True, window=2**100), tiled.tile_kinds(9, 9, 2, 2, causal=True))


def test_a_start_past_int64_is_refused():
    """TinyDecoder(...)(tokens, 2**63 - 1): "value cannot be converted to type int64_t without overflow"."""
    tiny = decoding.make_tiny_decoder(vocab=8, d_model=8, heads=2, kv_heads=1, layers=1, d_ff=8)
    tokens = torch.tensor([[1, 2]])
    refused(lambda: tiny(tokens, 2**63 - 1), "TinyDecoder.forward", "start")
    assert torch.isfinite(tiny(tokens, 2**63 - 1 - tokens.shape[1])).all()  # the last start that fits


def test_an_empty_target_or_query_gives_an_empty_result():
    """DecoderLayer(8, 2, 16)(torch.randn(2, 0, 8), mem) blamed causal_mask: argument 'L_q';
    gqa_attention with L_q = 0 and causal=True blamed window_keep_mask: nothing to hide, an empty
    result, as without causal."""
    layer = transformer.DecoderLayer(8, 2, 16)
    assert layer(torch.randn(2, 0, 8), torch.randn(2, 3, 8)).shape == (2, 0, 8)
    q, kv = torch.randn(1, 4, 0, 8), torch.randn(1, 2, 3, 8)
    output, weights = decoding.gqa_attention(q, kv, kv, causal=True)
    assert output.shape == (1, 4, 0, 8) and weights.shape == (1, 4, 0, 3)


SPARSE = torch.eye(3).to_sparse()
SPARSE_CALLS = {
    "scaled_dot_product_attention": (lambda: attn.scaled_dot_product_attention(SPARSE, SPARSE, SPARSE), "query"),
    "masked_softmax": (lambda: __import__("course_utils.masks").masks.masked_softmax(
        torch.zeros(3, 3), torch.eye(3, dtype=torch.bool).to_sparse()), "keep_mask"),
    "FusedMultiheadAttention.forward": (lambda: multihead.FusedMultiheadAttention(4, 2)(
        torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4),
        key_padding_mask=torch.zeros(2, 3, dtype=torch.bool).to_sparse()), "key_padding_mask"),
    "make_batch": (lambda: seq2seq.make_batch(torch.tensor([1, 2]).to_sparse(), torch.full((2, 2), 4)), "lengths"),
    "prob_sparse_attention": (lambda: probsparse.prob_sparse_attention(
        q4, k4, v4, index=torch.zeros(10, probsparse.sample_count(10), dtype=torch.int64).to_sparse()), "index"),
    "apply_rope": (lambda: decoding.apply_rope(torch.randn(1, 1, 3, 4), torch.arange(3).to_sparse()), "positions"),
}


@pytest.mark.parametrize("function", SPARSE_CALLS)
def test_a_sparse_tensor_is_named(function):
    """83 raw errors from sparse tensors ("Could not run 'aten::...' with arguments from the
    'SparseCPU' backend"): the checks took them for tensors. Now they are named as sparse, with the
    way out."""
    call, argument = SPARSE_CALLS[function]
    assert ".to_dense()" in refused(call, function, argument)


# ----------------------------------------------------------------------------- in both languages


#: The refusals above, to read in both languages: (call, function, argument).
REFUSALS = {
    "scale": (lambda: SCALED["tiled_attention"](math.inf), "tiled_attention", "scale"),
    "scale_positive": (lambda: SCALED["prob_sparse_attention"](-1.0), "prob_sparse_attention", "scale"),
    "adam_lr": (lambda: optim.Adam([nn.Parameter(torch.ones(2))]).step(math.nan), "Adam.step", "lr"),
    "held_out": (lambda: toy.train("reverse", steps=1, held_out=0), "train", "held_out"),
    "accuracy": (lambda: toy.accuracy(toy.make_model("reverse"), torch.zeros(0, 8, dtype=torch.int64),
                                      torch.zeros(0, 8, dtype=torch.int64)), "accuracy", "tokens"),
    "letters": (lambda: seq2seq.make_batch(torch.tensor([2]), torch.tensor([[99, -5]])), "make_batch", "letters"),
    "float_letters": (lambda: seq2seq.make_batch(torch.tensor([2]), torch.tensor([[3.0, 4.0]])), "make_batch",
                      "letters"),
    "learning_rate": (lambda: seq2seq.learning_rate(20, 10, 0.1), "learning_rate", "step"),
    "memory": (lambda: tiled.tile_kinds(2**20, 2**20, 1, 1), "tile_kinds", "block_q"),
    "modules": (lambda: multihead.NaiveMultiheadAttention(8, 2**20, head_dim=1), "NaiveMultiheadAttention",
                "num_heads"),
    "state": (lambda: tiled.finish(S(torch.zeros(2), "x")), "finish", "state"),
    "state_acc": (lambda: tiled.finish(S(torch.zeros(2), torch.zeros(2), torch.zeros(3, 1))), "finish", "state"),
    "merge": (lambda: tiled.merge_states(_state(), _state((2, 3), 3)), "merge_states", "b"),
    "update_scores": (lambda: tiled.update(tiled.empty_state((2, 3), 2), torch.randn(2, 2, 5), torch.randn(2, 5, 2)),
                      "update", "scores"),
    "update_values": (lambda: tiled.update(tiled.empty_state((2, 3), 2), torch.randn(2, 3, 5), torch.randn(2, 5, 3)),
                      "update", "values"),
    "update_no_acc": (lambda: tiled.update(tiled.empty_state((2, 3)), torch.randn(2, 3, 5), torch.randn(2, 5, 3)),
                      "update", "state"),
    "max_steps": (lambda: seq2seq.greedy_decode(seq2seq.make_model(0), torch.tensor([[3, 2]]), max_steps=20),
                  "greedy_decode", "max_steps"),
    "offset_profile": (lambda: seq2seq.offset_profile(torch.rand(1, 1, 1, 1), seq2seq.make_batch(
        torch.tensor([0]), torch.full((1, 1), 4))), "offset_profile", "batch"),
    "seed": (lambda: seq2seq.make_model(2**64), "make_model", "seed"),
    "start": (lambda: decoding.make_tiny_decoder(vocab=8, d_model=8, heads=2, kv_heads=1, layers=1, d_ff=8)(
        torch.tensor([[1]]), 2**63), "TinyDecoder.forward", "start"),
    "window": (lambda: decoding.KVCache(window=2**63), "KVCache", "window"),
    "sparse": (SPARSE_CALLS["make_batch"][0], "make_batch", "lengths"),
    "walkthrough": (lambda: probsparse.walkthrough(length=2**31), "walkthrough", "length"),
    "offset_rotation": (lambda: transformer.offset_rotation(2**64, 4), "offset_rotation", "k"),
    "source_device": (lambda: seq2seq.greedy_decode(seq2seq.make_model(0).to("meta"), torch.tensor([[3, 2]])),
                      "greedy_decode", "source"),
}

#: Code a Chinese message may show beside its words: names of the package's tensors and fields.
CODE = {"acc", "ell", "m", "rows", "b_k", "d_v", "state", "GiB", "dense", "to_dense", "meta", "torch", "manual_seed",
        "SoftmaxState", "cpu", "to", "id", "Python"}


@pytest.mark.parametrize("case", REFUSALS)
def test_every_new_refusal_reads_in_chinese_with_the_same_facts(case):
    call, function, argument = REFUSALS[case]
    en, zh = refused(call, function, argument, "en"), refused(call, function, argument, "zh")
    english = [word for word in test_validation.english_words(zh, function, argument) if word not in CODE]
    assert not english, f"English words {english} in: {zh}"
    assert not test_validation.stray_spaces(zh), zh
    en_facts = test_validation.facts(en.removeprefix(f"{function}: argument '{argument}' "))
    zh_facts = test_validation.facts(zh.removeprefix(f"{function}：参数 {argument} "))
    assert en_facts == zh_facts, f"\n{en}\n{zh}"
    assert not re.search(r"\bneeds?\b", zh)


# ============================================================================= issue 41

# ----------------------------------------------------------------------------- scores materialised whole

from course_utils import layers, masks, measured, validation  # noqa: E402 (this section's own)
from course_utils.widgets import models as model_widgets  # noqa: E402

LIMIT = 4096  # bytes: the tests lower the limit, so that a small input stands for a long one


def _x(shape=(1, 40, 8)):
    return torch.randn(shape, generator=torch.Generator().manual_seed(5))


#: Each forward that materialises (.., L_q, L_k) scores: (call on L = 40, whose scores take 6,400
#: bytes or more, the function its error names, the argument it blames).
MATERIALISED = {
    "scaled_dot_product_attention": (lambda x: attn.scaled_dot_product_attention(x, x, x),
                                     "scaled_dot_product_attention", "query"),
    "dot_scores": (lambda x: attn.dot_scores(x, x), "dot_scores", "query"),
    "scaled_dot_scores": (lambda x: attn.scaled_dot_scores(x, x), "scaled_dot_scores", "query"),
    "bilinear_scores": (lambda x: attn.bilinear_scores(x, x, torch.eye(8)), "bilinear_scores", "query"),
    "additive_scores": (lambda x: attn.additive_scores(x, x, torch.ones(8, 1), torch.ones(8, 1), torch.ones(1)),
                        "additive_scores", "query"),
    "masked_softmax": (lambda x: masks.masked_softmax(x @ x.transpose(-2, -1)), "masked_softmax", "scores"),
    "materialised_attention": (lambda x: tiled.materialised_attention(x, x, x), "materialised_attention", "query"),
    "tiled_attention": (lambda x: tiled.tiled_attention(x, x, x, block_q=40, block_k=40), "tiled_attention",
                        "block_q"),
    "flash_attention": (lambda x: tiled.flash_attention(x, x, x, block_q=40, block_k=40), "flash_attention",
                        "block_q"),
    "naive": (lambda x: multihead.NaiveMultiheadAttention(8, 2)(x, x, x), "NaiveMultiheadAttention.forward",
              "query"),
    "fused": (lambda x: multihead.FusedMultiheadAttention(8, 2)(x, x, x), "FusedMultiheadAttention.forward",
              "query"),
    "head": (lambda x: multihead.AttentionHead(8, 4)(x, x, x), "AttentionHead.forward", "query"),
    "self_attention": (lambda x: layers.SelfAttention(8)(x), "SelfAttention.forward", "x"),
    "cross_attention": (lambda x: layers.CrossAttention(8)(x, x), "CrossAttention.forward", "x"),
    "gqa_attention": (lambda x: decoding.gqa_attention(x[None].expand(1, 2, *x.shape[1:]), x[None], x[None]),
                      "gqa_attention", "query"),
    "encoder_layer": (lambda x: transformer.EncoderLayer(8, 2, 16)(x, need_weights=True), "EncoderLayer.forward",
                      "x"),
    "decoder_layer": (lambda x: transformer.DecoderLayer(8, 2, 16)(x, x[:, :4], need_weights=True),
                      "DecoderLayer.forward", "x"),
    "prob_sparse_attention": (lambda x: probsparse.prob_sparse_attention(x[None], x[None], x[None], need_weights=True),
                              "prob_sparse_attention", "query"),
    "exact_measure": (lambda x: __import__("course_utils.probsparse_study").probsparse_study.exact_measure(x[None], x[None]),
                      "exact_measure", "query"),
    "tiny_decoder": (lambda x: decoding.make_tiny_decoder(vocab=8, d_model=8, heads=2, kv_heads=1, layers=1, d_ff=8)(
        torch.zeros(1, x.shape[1], dtype=torch.int64)), "TinyDecoder.forward", "tokens"),
}


@pytest.mark.parametrize("case", MATERIALISED)
def test_scores_past_the_limit_are_refused_before_they_exist(case, monkeypatch):
    """Issue 41: a (1, 40000, 64) input (10 MB) asked for 6.4 GB of scores, a raw allocator error or
    a killed kernel. Every forward that builds them whole checks their bytes first, with one limit,
    validation.MAX_SCORE_BYTES, that a learner can raise (or set to None)."""
    call, function, argument = MATERIALISED[case]
    monkeypatch.setattr(validation, "MAX_SCORE_BYTES", LIMIT)
    text = refused(bounded(lambda: call(_x())), function, argument)
    assert "bytes" in text and f"{LIMIT:,} bytes allowed" in text and "MAX_SCORE_BYTES" in text, text
    assert "tiled.tiled_attention" in text, text  # the way out
    call(_x((1, 20, 8)))  # 1,600 bytes of scores: under the limit
    monkeypatch.setattr(validation, "MAX_SCORE_BYTES", None)
    call(_x())  # no limit but the machine's memory


def test_the_issues_input_is_refused_at_the_default_limit():
    query = torch.empty(1, 40_000, 64)
    text = refused(bounded(lambda: attn.scaled_dot_product_attention(query, query, query)),
                   "scaled_dot_product_attention", "query")
    assert "(1, 40000, 40000)" in text and "6,400,000,000 bytes" in text, text
    assert validation.MAX_SCORE_BYTES == 2**30


def test_without_a_limit_the_machines_memory_still_refuses(monkeypatch):
    """MAX_SCORE_BYTES = None lifts the setting, not the memory: scores past what the process may
    still map are refused, and the message does not offer a setting that would not help."""
    monkeypatch.setattr(validation, "MAX_SCORE_BYTES", None)
    query = torch.empty(1, 40_000, 64)
    text = refused(bounded(lambda: attn.scaled_dot_product_attention(query, query, query)),
                   "scaled_dot_product_attention", "query")
    assert "memory left here" in text and "MAX_SCORE_BYTES" not in text, text


def test_the_fused_path_and_small_tiles_are_not_limited(monkeypatch):
    """What the message points to works under the same limit: need_weights=False, small tiles."""
    monkeypatch.setattr(validation, "MAX_SCORE_BYTES", LIMIT)
    x = _x()
    multihead.FusedMultiheadAttention(8, 2)(x, x, x, need_weights=False)
    transformer.EncoderLayer(8, 2, 16)(x)
    output, _ = tiled.tiled_attention(x, x, x, block_q=8, block_k=8)
    torch.testing.assert_close(output, torch.nn.functional.scaled_dot_product_attention(x, x, x))


def test_a_walkthrough_on_meta_tensors_is_not_limited():
    """Lesson 05's walkthrough computes shapes only: its sizes are not limited by the scores' bytes,
    and batch=2**31 blamed causal_keep's length_k (a memory check of a meta tensor)."""
    trace = probsparse.walkthrough(batch=2**31, causal=True)
    assert trace is not None


# ----------------------------------------------------------------------------- silent wrong results


@pytest.mark.parametrize("eps", [0, 0.0, 1e-45, 1e300, 1e39, 2.0, "1e-8", True], ids=str)
def test_an_epsilon_outside_float32s_range_is_refused(eps):
    """Adam([p], eps=0) turned p into [nan, -inf, 0.99] for grads [0, 1e-30, 1]; eps=1e300 (∞ in
    float32) changed nothing; layer_norm_eps=1e39 made every output 0."""
    refused(lambda: optim.Adam([nn.Parameter(torch.ones(3))], eps=eps), "Adam", "eps")
    refused(lambda: transformer.EncoderLayer(8, 2, 16, layer_norm_eps=eps), "EncoderLayer", "layer_norm_eps")
    refused(lambda: transformer.DecoderLayer(8, 2, 16, layer_norm_eps=eps), "DecoderLayer", "layer_norm_eps")


def test_adam_steps_stay_finite_for_tiny_gradients():
    parameter = nn.Parameter(torch.ones(3))
    parameter.grad = torch.tensor([0.0, 1e-30, 1.0])
    optim.Adam([parameter]).step(0.01)
    assert torch.isfinite(parameter).all()


def test_a_parameter_given_twice_to_adam_is_refused():
    """Adam([p, p]) stepped p twice per step without a word."""
    p = nn.Parameter(torch.ones(3))
    refused(lambda: optim.Adam([p, p]), "Adam", "parameters")
    model = nn.Linear(2, 2)
    refused(lambda: optim.Adam([*model.parameters(), model.weight]), "Adam", "parameters")


@pytest.mark.parametrize("selected", [[111], [-1], [3, 12]], ids=["past", "negative", "at_length"])
def test_causal_keep_refuses_a_position_outside_the_keys(selected):
    """causal_keep(tensor([111]), 12) kept every key; a negative position kept none."""
    refused(lambda: probsparse.causal_keep(torch.tensor(selected), 12), "causal_keep", "selected")
    assert probsparse.causal_keep(torch.tensor([0, 11]), 12).sum().item() == 13


def test_accuracy_refuses_targets_outside_the_vocabulary():
    """toy.accuracy counted an out-of-vocabulary target as wrong (0.0) though such tokens are refused."""
    model = toy.make_model("reverse")
    tokens, targets = toy.make_batch("reverse", 3, torch.Generator().manual_seed(0))
    refused(lambda: toy.accuracy(model, tokens, targets + 100), "accuracy", "targets")
    refused(lambda: toy.accuracy(model, tokens, targets - 100), "accuracy", "targets")


#: Booleans given as strings ('no' is True to Python): (call, function, argument).
STRINGS = {
    "SelfAttention": (lambda: layers.SelfAttention(4, bias="no"), "SelfAttention", "bias"),
    "CrossAttention": (lambda: layers.CrossAttention(4, bias="no"), "CrossAttention", "bias"),
    "AttentionHead": (lambda: multihead.AttentionHead(4, 2, bias="no"), "AttentionHead", "bias"),
    "Naive": (lambda: multihead.NaiveMultiheadAttention(4, 2, bias="no"), "NaiveMultiheadAttention", "bias"),
    "Fused": (lambda: multihead.FusedMultiheadAttention(4, 2, bias="no"), "FusedMultiheadAttention", "bias"),
    "Naive.forward": (lambda: multihead.NaiveMultiheadAttention(4, 2)(q3, q3, q3, need_weights="no"),
                      "NaiveMultiheadAttention.forward", "need_weights"),
    "Fused.forward": (lambda: multihead.FusedMultiheadAttention(4, 2)(q3, q3, q3, need_weights="no"),
                      "FusedMultiheadAttention.forward", "need_weights"),
    "AttentionHead.forward": (lambda: multihead.AttentionHead(4, 2)(q3, q3, q3, need_weights="no"),
                              "AttentionHead.forward", "need_weights"),
    "ReverseModel": (lambda: toy.ReverseModel(positions="no"), "ReverseModel", "positions"),
    "train": (lambda: seq2seq.train(steps=1, batch=4, evaluate="no"), "train", "evaluate"),
    "operators": (lambda: multihead.operators(lambda: q3 + 1, sizes="no"), "operators", "sizes"),
    "heatmap": (lambda: __import__("course_utils.viz").viz.heatmap(torch.rand(2, 2), ax=_AX, colorbar="no"), "heatmap",
                "colorbar"),
    "tile_grid": (lambda: __import__("course_utils.viz").viz.tile_grid([[1, 2]], ax=_AX, legend="no"), "tile_grid",
                  "legend"),
    "mask_view": (lambda: __import__("course_utils.widgets.attention").widgets.attention.mask_view(causal="no"),
                  "mask_view", "causal"),
}
_AX = None  # no axes is needed: the flag is refused before anything is drawn


@pytest.mark.parametrize("case", STRINGS)
def test_a_string_is_no_boolean(case):
    """SelfAttention(4, bias='no') had a bias: every flag is True or False."""
    call, function, argument = STRINGS[case]
    refused(call, function, argument)


@pytest.mark.parametrize("scale", [1e300, 101.0, -1.0, math.nan])
def test_the_position_scale_is_bounded(scale):
    """NeighboursModel(position_scale=1e300) gave NaN logits."""
    refused(lambda: toy.NeighboursModel(position_scale=scale), "NeighboursModel", "position_scale")
    logits, _ = toy.NeighboursModel(position_scale=100.0)(torch.zeros(1, 8, dtype=torch.int64))
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize(("kwargs", "argument"), [
    ({"window": 0}, "window"), ({"d_model": 7}, "heads"), ({"heads": 3}, "heads"), ({"kv_heads": 3}, "kv_heads"),
    ({"d_ff": 0}, "d_ff"), ({"layout": "diagonal"}, "layout"), ({"d_model": "8"}, "d_model"),
], ids=["window0", "odd_d_model", "heads_not_divisor", "kv_heads", "d_ff", "layout", "str"])
def test_tinyblock_checks_its_constructor(kwargs, argument):
    """decoding.TinyBlock checked nothing: window=0 gave a finite, meaningless result, and a bad size
    was blamed later on apply_rope or gqa_attention."""
    sizes = {"d_model": 8, "heads": 2, "kv_heads": 1, "d_ff": 8, **kwargs}
    refused(lambda: decoding.TinyBlock(**sizes), "TinyBlock", argument)


def test_tinyblock_checks_its_inputs():
    block, x = decoding.TinyBlock(8, 2, 1, 8), torch.randn(1, 3, 8)
    refused(lambda: block(x, torch.arange(4)), "TinyBlock.forward", "positions")
    refused(lambda: block(x, torch.arange(3.0)), "TinyBlock.forward", "positions")
    refused(lambda: block(x[..., :6], torch.arange(3)), "TinyBlock.forward", "x")
    refused(lambda: block(x, torch.arange(3), cache="cache"), "TinyBlock.forward", "cache")
    assert block(x, torch.arange(3)).shape == (1, 3, 8)


# ----------------------------------------------------------------------------- wrong blame


@pytest.mark.parametrize(("call", "function", "argument"), [
    (lambda: tiled.empty_state((3,), 2**31), "empty_state", "d_v"),
    (lambda: tiled.empty_state((2**20, 2**20), 2), "empty_state", "rows"),
    (lambda: tiled.tile_kinds(2**31, 7, 2, 3), "tile_kinds", "L_q"),
    (lambda: tiled.tile_kinds(5, 2**31, 2, 3), "tile_kinds", "L_k"),
], ids=["empty_state_d_v", "empty_state_rows", "tile_kinds_L_q", "tile_kinds_L_k"])
def test_the_size_that_is_too_large_is_blamed(call, function, argument):
    """empty_state((3,), 2**31) blamed rows, not d_v; tile_kinds(L_q=2**31) blamed block_q."""
    refused(bounded(call), function, argument)


def test_online_softmax_of_no_column_names_the_scores():
    """online_softmax with 0 columns asked for "ints between 1 and -1"."""
    text = refused(lambda: tiled.online_softmax(torch.randn(2, 0), []), "online_softmax", "scores")
    assert "-1" not in text


@pytest.mark.parametrize("bad", [None, "model", torch.empty(2, device="meta")], ids=["None", "str", "meta"])
def test_the_explorers_name_their_own_arguments(bad):
    """attention_maps_explorer(None, None) blamed predict's 'model'."""
    refused(lambda: model_widgets.attention_maps_explorer(bad, bad), "attention_maps_explorer", "reverse_model")
    refused(lambda: model_widgets.attention_maps_view(toy.make_model("reverse"), bad), "attention_maps_view",
            "double_model")
    refused(lambda: model_widgets.heads_explorer(bad), "heads_explorer", "model")


# ----------------------------------------------------------------------------- unclear errors


@pytest.mark.parametrize(("call", "function", "argument"), [
    (lambda: measured.milliseconds(lambda: None, repeat=0), "milliseconds", "repeat"),
    (lambda: measured.milliseconds(None), "milliseconds", "call"),
    (lambda: measured.milliseconds(lambda: None, device="gpu0"), "milliseconds", "device"),
    (lambda: measured.milliseconds(lambda: None, warmup=-1), "milliseconds", "warmup"),
    (lambda: measured.ratio("a", 2.0), "ratio", "numerator"),
    (lambda: measured.ratio(1.0, "b"), "ratio", "denominator"),
    (lambda: measured.ratio(1.0, 2.0, digits="2"), "ratio", "digits"),
    (lambda: measured.ratio(1.0, 2.0, digits=-1), "ratio", "digits"),
    (lambda: measured.device_name(None), "device_name", "device"),
    (lambda: measured.load(None), "load", "benchmark"),
    (lambda: measured.load("probsparse", "tpu"), "load", "device"),
    (lambda: measured.table("probsparse", None), "table", "columns"),
    (lambda: masks.check_keep_mask("f", [True, False], torch.zeros(2, 2)), "f", "keep_mask"),
    (lambda: masks.check_keep_mask("f", torch.ones(2, dtype=torch.bool), [[0.0, 1.0]]), "f", "scores"),
], ids=["repeat0", "call", "device", "warmup", "numerator", "denominator", "digits_str", "digits_negative",
        "device_name", "load", "load_device", "table", "keep_mask_list", "scores_list"])
def test_the_main_modules_name_the_argument(call, function, argument):
    """measured.milliseconds(repeat=0) raised StatisticsError, ratio a format-spec error, masks'
    check_keep_mask an AttributeError on a list."""
    refused(call, function, argument)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a GPU: 'cuda' is a device here")
def test_asking_for_a_gpu_on_a_cpu_names_the_device():
    """device_name('cuda') and cuda_peak_bytes on a CPU raised torch's raw CUDA assertions."""
    refused(lambda: measured.device_name("cuda"), "device_name", "device")
    refused(lambda: measured.cuda_peak_bytes(lambda: None), "cuda_peak_bytes", "device")


def test_cuda_peak_bytes_needs_a_cuda_device():
    refused(lambda: measured.cuda_peak_bytes(lambda: None, "cpu"), "cuda_peak_bytes", "device")
    refused(lambda: measured.cuda_peak_bytes(None, "cpu"), "cuda_peak_bytes", "call")


def test_the_measured_helpers_still_work():
    assert measured.ratio(1.0, 4.0) == "0.25×" and measured.ratio(None, 4.0) == "–" and measured.ratio(1, 0) == "–"
    assert measured.milliseconds(lambda: None, repeat=1, warmup=0) >= 0
    assert isinstance(measured.device_name("cpu"), str)


#: The new refusals, read in both languages (the check of test_every_new_refusal_reads_in_chinese...).
REFUSALS_41 = {
    "scores": (lambda: attn.scaled_dot_product_attention(*(_x(),) * 3), "scaled_dot_product_attention", "query"),
    "scores_layer": (lambda: multihead.FusedMultiheadAttention(8, 2)(*(_x(),) * 3), "FusedMultiheadAttention.forward",
                     "query"),
    "tile": (lambda: tiled.tiled_attention(*(_x(),) * 3, block_q=40, block_k=40), "tiled_attention", "block_q"),
    "eps": (lambda: optim.Adam([nn.Parameter(torch.ones(2))], eps=0), "Adam", "eps"),
    "twice": (lambda: optim.Adam([nn.Parameter(torch.ones(2))] * 2), "Adam", "parameters"),
    "causal_keep": (lambda: probsparse.causal_keep(torch.tensor([111]), 12), "causal_keep", "selected"),
    "online_softmax": (lambda: tiled.online_softmax(torch.randn(2, 0), []), "online_softmax", "scores"),
    "repeat": (lambda: measured.milliseconds(lambda: None, repeat=0), "milliseconds", "repeat"),
    "device": (lambda: measured.milliseconds(lambda: None, device="gpu0"), "milliseconds", "device"),
    "explorer": (lambda: model_widgets.attention_maps_explorer(None, None), "attention_maps_explorer",
                 "reverse_model"),
}


@pytest.mark.parametrize("case", REFUSALS_41)
def test_the_new_refusals_read_in_chinese_with_the_same_facts(case, monkeypatch):
    monkeypatch.setattr(validation, "MAX_SCORE_BYTES", LIMIT)  # small inputs stand for long ones
    call, function, argument = REFUSALS_41[case]
    call = bounded(call)  # where a guard is missing, the call fails fast instead of taking the machine
    en, zh = refused(call, function, argument, "en"), refused(call, function, argument, "zh")
    english = [word for word in test_validation.english_words(zh, function, argument)
               if word not in CODE | {"GiB", "need_weights", "ReverseModel", "EncoderDecoder", "train", "model",
                                      "toy", "lambda", "layer", "cpu", "gpu0", "device"}]
    assert not english, f"English words {english} in: {zh}"
    assert not test_validation.stray_spaces(zh), zh
    en_facts = test_validation.facts(en.removeprefix(f"{function}: argument '{argument}' "))
    zh_facts = test_validation.facts(zh.removeprefix(f"{function}：参数 {argument} "))
    assert en_facts == zh_facts, f"\n{en}\n{zh}"
