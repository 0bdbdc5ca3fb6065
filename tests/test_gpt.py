"""Lesson 10's engine: the corpora (course_utils.corpus) and the GPT from the course's parts
(course_utils.gpt). The model equals one written with PyTorch's own nn.MultiheadAttention, values and
gradients, under every attention implementation; generation with the KV cache chooses the same tokens
as recomputation, within the context and past it, under every attention implementation, in few
operations a step (counted at the dispatcher, not timed); sampling and the argument checks.
tests/test_train_gpt.py trains it."""

import collections
import hashlib
import lzma
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils import corpus as C
from course_utils import gpt as G
from course_utils.attention import scaled_dot_product_attention
from course_utils.validation import ArgumentError

# one thread, as the notebooks run; the comparisons below have tolerances except the tokens chosen
pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = {"context": 12, "d_model": 32, "heads": 4, "layers": 2, "d_ff": 48}


def _model(positions="learned", attention="course", seed=0, vocab=23, **sizes):
    model = G.make_gpt(vocab, seed=seed, positions=positions, attention=attention, **(SIZES | sizes))
    return model.double()


def _tokens(B, L, vocab=23, seed=1):
    return torch.randint(0, vocab, (B, L), generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- the corpora


@pytest.mark.parametrize("name, characters, distinct", [("shakespeare", 1_115_394, 65), ("tang", 1_761_263, 6_656)])
def test_corpus_loads_checked_with_its_vocabulary_and_a_fixed_split(name, characters, distinct):
    corpus = C.load(name)
    assert len(corpus.text) == characters and corpus.vocab_size == distinct
    assert hashlib.sha256(corpus.text.encode("utf-8")).hexdigest() == C.CORPORA[name].sha256
    assert list(corpus.vocab) == sorted(corpus.vocab)
    assert corpus.decode(corpus.ids[:500]) == corpus.text[:500]
    assert torch.equal(corpus.encode(corpus.text[-300:]), corpus.ids[-300:])
    # val starts after a blank line, a little past 90 % of the text: a whole poem or speech
    assert corpus.text[corpus.boundary - 2: corpus.boundary] == "\n\n"
    assert 0.9 <= corpus.boundary / characters < 0.901
    assert len(corpus.split("train")) + len(corpus.split("val")) == characters


def test_batches_are_windows_and_their_next_characters_drawn_from_the_generator():
    corpus = C.load("shakespeare")
    x, y = corpus.batch("val", 5, 16, torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (5, 16) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    val = corpus.text[corpus.boundary:]
    for row, following in zip(x, y):
        window = corpus.decode(row)
        start = val.find(window)
        assert start >= 0 and val[start + 1: start + 17] == corpus.decode(following)
    again, _ = corpus.batch("val", 5, 16, torch.Generator().manual_seed(3))
    other, _ = corpus.batch("val", 5, 16, torch.Generator().manual_seed(4))
    assert torch.equal(x, again) and not torch.equal(x, other)


@pytest.mark.parametrize("name", ["shakespeare", "tang"])
def test_baselines_order_uniform_then_unigram_then_bigram(name):
    corpus = C.load(name)
    found = corpus.baselines()
    assert C.uniform_loss(corpus.vocab_size) > found["unigram"] > found["bigram"] + 0.5
    assert found["smoothing"] in C.SMOOTHINGS


def test_baselines_are_the_counted_models_cross_entropy_on_a_small_text():
    # train "abab…" and val: a bigram that has seen only a→b and b→a; add-α by hand
    text = "ab" * 50 + "\n\n" + "abba" * 3
    corpus = C.Corpus("custom", text)
    found = corpus.baselines()
    a = found["smoothing"]
    train, val = corpus.split("train"), corpus.split("val")
    V = corpus.vocab_size
    counts = torch.bincount(train, minlength=V).double()
    unigram = -((counts + a) / (counts.sum() + a * V)).log()[val].mean()
    pairs = torch.zeros(V, V, dtype=torch.float64)
    for i, j in zip(train[:-1].tolist(), train[1:].tolist()):
        pairs[i, j] += 1
    p = (pairs + a) / (pairs.sum(dim=1, keepdim=True) + a * V)
    bigram = -p[val[:-1], val[1:]].log().mean()
    assert math.isclose(found["unigram"], unigram.item(), rel_tol=1e-12)
    assert math.isclose(found["bigram"], bigram.item(), rel_tol=1e-12)


def test_a_damaged_corpus_file_is_refused_by_its_checksum(monkeypatch, tmp_path):
    source = C.CORPORA["shakespeare"]
    (tmp_path / f"{source.filename}.xz").write_bytes(lzma.compress(b"To be, or not to be"))
    monkeypatch.setattr(C, "FOLDER", tmp_path)
    with pytest.raises(ArgumentError, match="'name'.*sha256"):
        C.read_text("shakespeare")
    (tmp_path / f"{source.filename}.xz").write_bytes(b"not xz at all")
    with pytest.raises(ArgumentError, match="'name'.*decompressed"):
        C.read_text("shakespeare")


@pytest.mark.parametrize("call, argument", [
    (lambda: C.load("klingon"), "name"),
    (lambda: C.load("shakespeare").split("test"), "name"),
    (lambda: C.load("shakespeare").batch("train", 0, 8, torch.Generator()), "batch"),
    (lambda: C.load("shakespeare").batch("val", 2, 200_000, torch.Generator()), "context"),
    (lambda: C.load("shakespeare").batch("val", 2, 8, 0), "generator"),
    (lambda: C.load("shakespeare").encode("naïve"), "text"),
    (lambda: C.load("shakespeare").decode(torch.tensor([0, 65])), "ids"),
    (lambda: C.Corpus("custom", "a"), "text"),
])
def test_corpus_arguments_are_checked_by_name(call, argument):
    with pytest.raises(ArgumentError, match=f"argument '{argument}'"):
        call()


# ----------------------------------------------------------------------------- the model against PyTorch's own


class TorchGPT(nn.Module):
    """The same model written with PyTorch's modules: nn.MultiheadAttention, nn.Sequential, nn.Embedding."""

    def __init__(self, ours):
        super().__init__()
        config = ours.config
        self.embed = nn.Embedding(config.vocab, config.d_model, dtype=torch.float64)
        self.positions = nn.Embedding(config.context, config.d_model, dtype=torch.float64)
        self.norms1, self.norms2, self.attentions, self.mlps = (nn.ModuleList() for _ in range(4))
        with torch.no_grad():
            self.embed.weight.copy_(ours.embed.weight)
            self.positions.weight.copy_(ours.positions.embedding.weight)
            for block in ours.blocks:
                self.norms1.append(_copy(nn.LayerNorm(config.d_model, dtype=torch.float64), block.norm1))
                self.norms2.append(_copy(nn.LayerNorm(config.d_model, dtype=torch.float64), block.norm2))
                self.attentions.append(block.attention.mha.to_torch())
                ff = block.feed_forward
                mlp = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.GELU(), nn.Linear(config.d_ff, config.d_model)).double()
                _copy(mlp[0], ff.linear1)
                _copy(mlp[2], ff.linear2)
                self.mlps.append(mlp)
            self.norm = _copy(nn.LayerNorm(config.d_model, dtype=torch.float64), ours.norm)

    def forward(self, tokens):
        L = tokens.shape[1]
        x = self.embed(tokens) + self.positions(torch.arange(L))
        hidden = torch.ones(L, L, dtype=torch.bool).triu(1)  # nn.MultiheadAttention's mask: True = may NOT attend
        for norm1, attention, norm2, mlp in zip(self.norms1, self.attentions, self.norms2, self.mlps):
            h = norm1(x)
            x = x + attention(h, h, h, attn_mask=hidden, need_weights=False)[0]
            x = x + mlp(norm2(x))
        return self.norm(x) @ self.embed.weight.T  # tied read-out


def _copy(target, source):
    target.load_state_dict(source.state_dict())
    return target


@pytest.mark.parametrize("attention", ["course", "sdpa", "tiled"])
def test_the_course_model_is_the_one_written_with_nn_multiheadattention_values_and_gradients(attention):
    ours = _model(attention=attention)
    theirs = TorchGPT(ours)
    x, y = _tokens(3, 12), _tokens(3, 12, seed=2)
    logits = ours(x)
    torch.testing.assert_close(logits, theirs(x))
    G.lm_loss(logits, y).backward()
    F.cross_entropy(theirs(x).flatten(0, 1), y.flatten()).backward()
    torch.testing.assert_close(ours.embed.weight.grad, theirs.embed.weight.grad)  # both uses of the tied matrix
    torch.testing.assert_close(ours.positions.embedding.weight.grad, theirs.positions.weight.grad)
    for block, attention_, mlp, norm1 in zip(ours.blocks, theirs.attentions, theirs.mlps, theirs.norms1):
        q, k, v = attention_.in_proj_weight.grad.chunk(3)
        torch.testing.assert_close(block.attention.mha.q_proj.weight.grad, q)
        torch.testing.assert_close(block.attention.mha.k_proj.weight.grad, k)
        torch.testing.assert_close(block.attention.mha.v_proj.weight.grad, v)
        torch.testing.assert_close(block.attention.mha.out_proj.weight.grad, attention_.out_proj.weight.grad)
        torch.testing.assert_close(block.feed_forward.linear1.weight.grad, mlp[0].weight.grad)
        torch.testing.assert_close(block.feed_forward.linear2.bias.grad, mlp[2].bias.grad)
        torch.testing.assert_close(block.norm1.weight.grad, norm1.weight.grad)


@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_every_attention_implementation_gives_the_same_logits_and_gradients(positions):
    x, y = _tokens(2, 12), _tokens(2, 12, seed=2)
    results = {}
    for attention in ("course", "sdpa", "tiled", lambda q, k, v, keep: scaled_dot_product_attention(q, k, v, keep)):
        model = _model(positions, seed=5).use_attention(attention)
        logits = model(x)
        G.lm_loss(logits, y).backward()
        results[str(attention)[:6]] = (logits, [p.grad for p in model.parameters()])
    reference, grads = results.pop("course")
    for logits, other in results.values():
        torch.testing.assert_close(logits, reference)
        for a, b in zip(other, grads):
            torch.testing.assert_close(a, b)


def test_lesson_09s_kernel_gives_the_same_logits_and_gradients_through_the_interpreter():
    pytest.importorskip("triton")
    x = _tokens(1, 12)
    course = _model(seed=5, d_model=16, heads=2, layers=1).float()
    kernel = _model(seed=5, d_model=16, heads=2, layers=1, attention="triton").float()
    torch.testing.assert_close(kernel(x), course(x), atol=1e-5, rtol=1e-5)
    kernel(x).sum().backward()
    course(x).sum().backward()
    for a, b in zip(kernel.parameters(), course.parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4)


def test_attention_maps_are_causal_distributions_per_layer_and_head():
    maps = _model(attention="sdpa").attention_maps(_tokens(2, 9))
    assert maps.shape == (2, 2, 4, 9, 9)
    torch.testing.assert_close(maps.sum(dim=-1), torch.ones(2, 2, 4, 9, dtype=torch.float64))
    assert (maps.triu(1) == 0).all()


def test_the_embedding_and_the_read_out_are_one_matrix():
    model = _model()
    assert model.readout.weight is model.embed.weight
    V, E, P, L, F_ = 23, 32, 12, 2, 48
    block = 4 * E * E + 2 * E * F_ + F_ + E + 4 * E  # attention, MLP (+ biases), two LayerNorms
    assert G.parameter_count(model) == V * E + P * E + L * block + 2 * E


# ----------------------------------------------------------------------------- generation


@pytest.mark.parametrize("positions", ["learned", "rope"])
@pytest.mark.parametrize("keep", [None, 12, 1, 7])
def test_generation_with_the_cache_chooses_recomputations_tokens_past_the_context(positions, keep):
    """30 new tokens after 5 with a context of 12: the window jumps (or slides, keep = 12) 4 to 23 times."""
    model = _model(positions, seed=2).eval()
    prompt = _tokens(3, 5)
    runs = {}
    for cache in (True, False):
        generator = torch.Generator().manual_seed(7)
        runs[cache] = model.generate(prompt, 30, temperature=0.8, top_k=10, generator=generator, cache=cache, keep=keep)
    assert torch.equal(runs[True][0], runs[False][0])
    torch.testing.assert_close(runs[True][1], runs[False][1])
    assert runs[True][0].shape == (3, 30)


@pytest.mark.parametrize("attention", ["course", "sdpa", "tiled", "a function"])
def test_every_attention_implementation_generates_the_same_with_the_cache_as_without(attention):
    """A cached step's single query is given no mask (it sees every key): the same tokens as recomputation."""
    implementation = (lambda q, k, v, keep: scaled_dot_product_attention(q, k, v, keep)) \
        if attention == "a function" else attention
    model = _model(seed=4).eval().use_attention(implementation)
    runs = [model.generate(_tokens(2, 3), 25, temperature=0.8, top_k=8, generator=torch.Generator().manual_seed(3),
                           cache=cache) for cache in (True, False)]
    assert torch.equal(runs[0][0], runs[1][0])
    torch.testing.assert_close(runs[0][1], runs[1][1])


def test_generation_returns_ordinary_tensors():
    """generate steps under torch.inference_mode; what it returns may be changed in place and used with autograd."""
    tokens, logits = _model().eval().generate(_tokens(1, 3), 4, temperature=0)
    assert not tokens.is_inference() and not logits.is_inference()
    logits[0, 0, 0] = 0.0
    weight = torch.ones(1, requires_grad=True)
    (logits * weight).sum().backward()
    assert weight.grad is not None


class _Operations(TorchDispatchMode):
    """Counts the aten operations that run, by name."""

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("attention", ["course", "sdpa"])
def test_a_cached_step_runs_few_operations_per_layer_and_none_that_grow_the_cache_or_make_a_mask(attention):
    """What a cached step costs at these sizes is mostly the fixed price of each small operation: counted at the
    dispatcher, per layer and step (the difference between 3 layers and 1, and between 30 steps and 10, all in
    one window). Measured with torch 2.13: 21 ("sdpa") and 25 ("course"); before the cache was written in
    place and the checks moved out of the steps, 42 and 65 (a torch.cat of the whole cache, a causal mask for
    a single query, q, k and v in three products)."""
    counts = {}
    for layers in (1, 3):
        model = _model(attention=attention, layers=layers, context=40).eval()
        for steps in (10, 30):
            with _Operations() as seen:
                model.generate(_tokens(1, 4), steps, temperature=0.8, top_k=5,
                               generator=torch.Generator().manual_seed(0))
            counts[layers, steps] = seen.counts
    per_layer = (counts[3, 30] - counts[3, 10]) - (counts[1, 30] - counts[1, 10])  # 2 layers × 20 steps
    assert sum(per_layer.values()) / 40 <= 26, per_layer
    made = {"cat", "ones", "tril_", "arange", "masked_fill", "empty", "add"} & set(per_layer)
    assert not made, per_layer  # in place: no concatenation, no mask, no positions, no new residual per layer and step
    assert per_layer["add_"] == 2 * 40, per_layer  # the two residuals, added into the step's own tensor


def test_a_cached_step_calls_no_module_inside_a_block():
    """At one character a step, calling nn.LayerNorm and nn.Linear costs about as much as their arithmetic: a cached
    step calls F.layer_norm and F.linear with the weights gathered once (gpt._GenerationCache). Counted per layer and
    step as above: only the block and its attention are called (before: their five modules too)."""
    counts = {}

    def count(module, arguments):
        seen[type(module).__name__] += 1

    for layers in (1, 3):
        model = _model(layers=layers, context=40).eval()
        for steps in (10, 30):
            seen = collections.Counter()
            hook = nn.modules.module.register_module_forward_pre_hook(count)
            try:
                model.generate(_tokens(1, 4), steps, temperature=0.8, top_k=5,
                               generator=torch.Generator().manual_seed(0))
            finally:
                hook.remove()
            counts[layers, steps] = seen
    per_layer = (counts[3, 30] - counts[3, 10]) - (counts[1, 30] - counts[1, 10])  # 2 layers × 20 steps
    assert per_layer == {"Block": 40, "CausalSelfAttention": 40}, per_layer


@pytest.mark.parametrize("seed", range(4))
def test_float32_generation_with_the_cache_chooses_recomputations_tokens(seed):
    """In float32 a cached step's GELU runs PyTorch's kernel, recomputation's oneDNN's (gpt._pytorch_gelu): values a
    few ulps apart, the same characters, past the context too."""
    model = G.make_gpt(23, seed=seed, **(SIZES | {"d_model": 64, "d_ff": 256})).eval()
    runs = [model.generate(_tokens(2, 5, seed=seed), 40, temperature=0.8, top_k=10,
                           generator=torch.Generator().manual_seed(seed), cache=cache) for cache in (True, False)]
    assert torch.equal(runs[0][0], runs[1][0])
    torch.testing.assert_close(runs[0][1], runs[1][1])


def test_onednn_is_off_during_cached_steps_only_and_its_setting_is_put_back():
    """torch.backends.mkldnn.enabled is the process's: off while the cache steps, untouched by recomputation, and put
    back after, whatever it was, also when a step fails."""
    seen = []

    def attention(q, k, v, keep):
        seen.append(torch.backends.mkldnn.enabled)
        return scaled_dot_product_attention(q, k, v, keep)

    model = _model().eval().use_attention(attention)
    before = torch.backends.mkldnn.enabled
    try:
        for setting in (True, False):
            torch.backends.mkldnn.enabled = setting
            for cache in (True, False):
                seen.clear()
                model.generate(_tokens(1, 3), 5, temperature=0, cache=cache)
                assert seen and set(seen) == {setting and not cache}
                assert torch.backends.mkldnn.enabled is setting

        def failing(q, k, v, keep):
            raise ValueError("a broken attention")

        torch.backends.mkldnn.enabled = True
        with pytest.raises(ValueError, match="a broken attention"):
            model.use_attention(failing).generate(_tokens(1, 3), 5, temperature=0)
        assert torch.backends.mkldnn.enabled is True
    finally:
        torch.backends.mkldnn.enabled = before


def test_recomputation_reads_the_window_window_start_says():
    """Step by step, the logits of a generation are the model's on window_start's window of the text."""
    model = _model(seed=3).eval()
    prompt = _tokens(1, 4)
    tokens, logits = model.generate(prompt, 20, temperature=0, keep=6)
    text = torch.cat([prompt, tokens], dim=1)
    for i in range(20):
        n = 4 + i
        start = G.window_start(n, 12, 6)
        torch.testing.assert_close(logits[:, i], model(text[:, start:n])[:, -1])
        assert tokens[0, i] == logits[0, i].argmax()


def test_window_start_keeps_the_last_context_characters_or_jumps():
    assert [G.window_start(n, 8, 8) for n in (1, 8, 9, 20)] == [0, 0, 1, 12]  # nanoGPT's crop
    starts = [G.window_start(n, 8, 4) for n in range(1, 25)]
    assert starts == [0] * 8 + [5] * 5 + [10] * 5 + [15] * 5 + [20]
    assert all(4 <= n - s <= 8 for n, s in zip(range(9, 25), starts[8:]))


def test_sampling_temperature_zero_and_top_k_one_take_the_argmax_and_a_seed_repeats_draws():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(0))
    assert torch.equal(G.sample_next(logits, temperature=0), logits.argmax(dim=-1))
    assert torch.equal(G.sample_next(logits, top_k=1, generator=torch.Generator()), logits.argmax(dim=-1))
    draws = [G.sample_next(logits[:1].expand(500, 30), generator=torch.Generator().manual_seed(s)) for s in (1, 1, 2)]
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    top = logits[0].topk(3).indices
    sampled = G.sample_next(logits[:1].expand(500, 30), top_k=3, generator=torch.Generator().manual_seed(0))
    assert set(sampled.tolist()) == set(top.tolist())


def test_temperature_sharpens_and_flattens_the_distribution_it_samples():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).expand(4000, 4)
    counts = {t: torch.bincount(G.sample_next(logits, t, generator=torch.Generator().manual_seed(0)), minlength=4)
              for t in (0.3, 1.0, 3.0)}
    assert counts[0.3][0] > counts[1.0][0] > counts[3.0][0]
    expected = logits[0].softmax(-1) * 4000  # at temperature 1, the softmax's own frequencies (±5 standard errors)
    assert ((counts[1.0] - expected).abs() <= 5 * expected.sqrt() + 1).all()


def test_lm_loss_is_the_mean_cross_entropy_of_every_position():
    logits = torch.randn(2, 5, 7, dtype=torch.float64)
    targets = _tokens(2, 5, vocab=7)
    by_hand = -logits.log_softmax(-1).gather(-1, targets[..., None]).mean()
    torch.testing.assert_close(G.lm_loss(logits, targets), by_hand)


@pytest.mark.parametrize("call, argument", [
    (lambda: G.GPTConfig(23, d_model=30, heads=4), "heads"),
    (lambda: G.GPTConfig(23, d_model=12, heads=4, positions="rope"), "heads"),
    (lambda: G.GPTConfig(23, positions="sinusoidal"), "positions"),
    (lambda: G.GPTConfig(23, attention="flash"), "attention"),
    (lambda: G.GPTConfig(0), "vocab"),
    (lambda: G.GPT({"vocab": 23}), "config"),
    (lambda: _model()(_tokens(1, 13)), "tokens"),
    (lambda: _model()(_tokens(1, 4, vocab=30)), "tokens"),
    (lambda: _model()(_tokens(1, 4), start=12), "start"),
    (lambda: _model().use_attention("fast"), "implementation"),
    (lambda: _model().generate(_tokens(1, 3), 5), "generator"),
    (lambda: _model().generate(_tokens(1, 3), 5, temperature=-1), "temperature"),
    (lambda: _model().generate(_tokens(1, 3), 5, temperature=0, top_k=24), "top_k"),
    (lambda: _model().generate(_tokens(1, 3), 5, temperature=0, keep=13), "keep"),
    (lambda: _model().generate(_tokens(1, 3), 0, temperature=0), "new_tokens"),
    (lambda: G.sample_next(torch.zeros(3), generator=torch.Generator()), "logits"),
    (lambda: G.lm_loss(torch.zeros(2, 5, 7), torch.zeros(2, 4, dtype=torch.int64)), "logits"),
    (lambda: G.make_gpt(23, seed=2**70), "seed"),
])
def test_model_arguments_are_checked_by_name(call, argument):
    with pytest.raises(ArgumentError, match=f"argument '{argument}'"):
        call()
