"""A small GPT: a decoder-only character model assembled from the course's own parts (lesson 10).

    tokens (B, T) -> embedding (+ learned positions) -> layers × Block -> LayerNorm -> logits (B, T, V)

    Block (pre-norm, as GPT-2 and nanoGPT):
        x = x + attention(LayerNorm(x))      masked multi-head self-attention, lessons 01, 02 and 04
        x = x + FeedForward(LayerNorm(x))    lesson 06's position-wise MLP (GELU)

Every part is one the course built and checked against PyTorch's own: lesson 04's
``FusedMultiheadAttention`` holds the projections (so ``to_torch`` gives the ``nn.MultiheadAttention``
with the same weights), lesson 06's ``FeedForward`` and ``LearnedPositionalEmbedding``, lesson 07's
``apply_rope`` (``positions="rope"``) and ``KVCache``. What runs between the projections is
switchable (``ATTENTIONS``; ``GPT.use_attention``), the same weights throughout:

- ``"course"``: lesson 01's ``scaled_dot_product_attention`` with lesson 02's causal keep mask: the
  whole (T, T) matrix of weights, which ``GPT.attention_maps`` returns to be looked at;
- ``"sdpa"``: PyTorch's fused ``F.scaled_dot_product_attention``;
- ``"tiled"``: lesson 08's ``tiled.flash_attention`` (tiles, online softmax, its own backward);
- ``"triton"``: lesson 09's kernels, ``flash_triton.flash_attention`` (compiled on a GPU; on a CPU
  Triton's interpreter runs them, slowly);
- or a function ``f(q, k, v, keep_mask) -> (output, weights)`` of (B, H, L_q, d) tensors, as
  ``course_utils.attention.scaled_dot_product_attention`` is (a learner's own).

The embedding and the read-out share one matrix (weight tying, as GPT-2 and nanoGPT): with the Tang
poems' 6,656 characters that alone saves a third of a 5 M-parameter model.

**Generation** (``GPT.generate``) samples one character at a time with temperature and top-k from a
seeded ``torch.Generator`` (``sample_next``), with lesson 07's KV cache or by recomputing every
step; both read the same window of the text and give the same tokens. A model knows ``context``
positions only. Past them the window slides in jumps (``window_start``): when the next character
would not fit, the window restarts at the last ``keep`` characters (which are prefilled into fresh
caches once), then grows again, one cached step per character, up to ``context``. ``keep = context``
is nanoGPT's crop (the last ``context`` characters every step: exact, but each step past the context
is a whole prefill, no faster than recomputing); the default ``context // 2`` keeps a cached step
O(context) at the price of a shorter memory just after each jump.
"""

import contextlib
import contextvars
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import tiled
from . import validation as check
from .attention import scaled_dot_product_attention
from .decoding import KVCache, apply_rope, window_keep_mask
from .multihead import FusedMultiheadAttention
from .transformer import FeedForward, LearnedPositionalEmbedding

ATTENTIONS = ("course", "sdpa", "tiled", "triton")
POSITIONS = ("learned", "rope")


# ----------------------------------------------------------------------------- the model's sizes


#: The function GPTConfig's checks name in their errors: make_gpt's own name while it builds one.
_CONFIG_CALLER = contextvars.ContextVar("config_caller", default="GPTConfig")


@dataclass(frozen=True)
class GPTConfig:
    """A GPT's sizes: ``vocab`` characters, ``context`` positions it reads at most, ``d_model`` = E
    features, ``heads`` (dividing E), ``layers`` blocks, ``d_ff`` the MLP's width (default 4·E),
    ``positions`` "learned" (a table, GPT-2) or "rope" (lesson 07's rotations), ``attention`` one of
    ``ATTENTIONS``."""

    vocab: int
    context: int = 128
    d_model: int = 128
    heads: int = 4
    layers: int = 4
    d_ff: int = None
    positions: str = "learned"
    attention: str = "course"

    def __post_init__(self):
        function = _CONFIG_CALLER.get()
        for argument in ("vocab", "context", "d_model", "heads", "layers"):
            check.positive_int(function, argument, getattr(self, argument))
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        check.positive_int(function, "d_ff", self.d_ff)
        check.one_of(function, "positions", self.positions, POSITIONS)
        check.one_of(function, "attention", self.attention, ATTENTIONS)
        _block_sizes(function, self.d_model, self.heads, self.positions == "rope")
        sizes = {"vocab": self.vocab, "context": self.context, "d_model": self.d_model, "layers": self.layers,
                 "d_ff": self.d_ff}
        check.parameters_fit(function, sizes, self.layers * self.d_model * (4 * self.d_model + 2 * self.d_ff)
                             + (self.vocab + self.context) * self.d_model)
        check.modules_fit(function, "layers", self.layers, 12 * self.layers + 5)

    def as_dict(self):
        return asdict(self)


# ----------------------------------------------------------------------------- attention, four ways


def _keep(L_q, L_k, device):
    """The causal keep mask when the L_q queries are the last positions of the L_k keys (a cached
    step: bottom-right aligned, lesson 02)."""
    return window_keep_mask(L_q, L_k, device=device)  # (L_q, L_k)


def causal_attention(q, k, v, implementation="course", need_weights=False):
    """Causal attention of the queries q (B, H, L_q, d), the last L_q of the L_k positions of k and v
    (B, H, L_k, d) (L_q = L_k in training; L_q = 1 at a cached step), by `implementation` (a name of
    ``ATTENTIONS`` or a function ``f(q, k, v, keep_mask) -> (output, weights)``).

    Returns ``(output (B, H, L_q, d), weights (B, H, L_q, L_k) or None)``: weights only from "course"
    or a function, and only with `need_weights`."""
    function = "causal_attention"
    implementation = _implementation(function, "implementation", implementation)
    check.flag(function, "need_weights", need_weights)
    for argument, value in (("q", q), ("k", k), ("v", v)):
        check.tensor(function, argument, value, min_ndim=4, layout="(B, H, L, d)")
        if value.ndim != 4:
            check.fail(function, argument, check.describe(value),
                       {"en": "a floating-point tensor of shape (B, H, L, d)", "zh": "形状为 (B, H, L, d) 的浮点张量"})
    check.attention_inputs(function, q, k, v, names=("q", "k", "v"))
    if not q.shape[-2] or q.shape[-2] > k.shape[-2]:
        check.fail(function, "q", check.describe(q),
                   {"en": f"1 … L_k = {k.shape[-2]} queries (the last positions of the keys)",
                    "zh": f"1 … L_k = {k.shape[-2]} 个查询（键的最后几个位置）"})
    return _attend(q, k, v, implementation, need_weights)


def _attend(q, k, v, implementation, need_weights):
    """causal_attention without its checks (the model's layers call it once per layer and character)."""
    L_q, L_k = q.shape[-2], k.shape[-2]
    square = L_q == L_k  # the alignment is_causal means; a single query (the last) sees every key anyway
    if callable(implementation):
        output, weights = implementation(q, k, v, _keep(L_q, L_k, q.device))
        return output, weights if need_weights else None
    if implementation == "course":  # a single query (a cached step) sees every key: no mask to make
        keep = None if L_q == 1 else _keep(L_q, L_k, q.device)
        output, weights = scaled_dot_product_attention(q, k, v, keep_mask=keep)
        return output, weights if need_weights else None
    if implementation == "sdpa":
        if square or L_q == 1:
            return F.scaled_dot_product_attention(q, k, v, is_causal=square and L_q > 1), None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_keep(L_q, L_k, q.device)), None
    if implementation == "tiled":
        if square or L_q == 1:
            return tiled.flash_attention(q, k, v, causal=square)[0], None
        return tiled.flash_attention(q, k, v, keep_mask=_keep(L_q, L_k, q.device))[0], None
    # "triton": imported only when asked for: Triton is an optional install (make triton), lesson 09's
    from . import flash_triton

    if not (square or L_q == 1):
        check.fail("causal_attention", "q", check.describe(q),
                   {"en": f"L_q = L_k (= {L_k}) or L_q = 1 with implementation 'triton' (its kernel's causal mask is "
                          "aligned at the top left)",
                    "zh": f"implementation 为 'triton' 时 L_q = L_k（= {L_k}）或 L_q = 1（它的核函数的因果掩码左上对齐）"})
    return flash_triton.flash_attention(q, k, v, causal=square and L_q > 1)[0], None


def _implementation(function, argument, value):
    if callable(value):
        return value
    return check.one_of(function, argument, value, ATTENTIONS)


# ----------------------------------------------------------------------------- the block


def _block_sizes(function, d_model, heads, rope):
    """The sizes of a model or a layer said as `function`'s (the parts inside would name theirs:
    embed_dim, num_heads): heads divide d_model, leaving an even head size with RoPE."""
    check.positive_int(function, "d_model", d_model)
    check.positive_int(function, "heads", heads)
    check.flag(function, "rope", rope)
    if d_model % heads or (rope and d_model // heads % 2):
        even = {"en": ", leaving an even head size (RoPE rotates pairs)", "zh": "，且每个头的大小为偶数（RoPE 两两旋转）"} \
            if rope else {"en": "", "zh": ""}
        check.fail(function, "heads", check.describe(heads),
                   {"en": f"a divisor of d_model = {d_model}{even['en']}", "zh": f"d_model = {d_model} 的约数{even['zh']}"})


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention: lesson 04's fused projections (``self.mha``, no biases),
    lesson 07's rotations when ``rope``, and the causal attention of ``implementation``."""

    def __init__(self, d_model, heads, rope=False):
        _block_sizes("CausalSelfAttention", d_model, heads, rope)
        super().__init__()
        self.mha = FusedMultiheadAttention(d_model, heads, bias=False)  # q_proj, k_proj, v_proj, out_proj
        self.heads, self.rope = heads, rope

    def forward(self, x, positions, cache=None, implementation="course", need_weights=False):
        """x (B, L, E), positions (L,) int64 -> ``(output (B, L, E), weights or None)``; with a
        KVCache the earlier positions' keys and values come from it and the new ones go into it."""
        m, H = self.mha, self.heads
        B, L, E = x.size()
        generating = isinstance(cache, _GenerationCache)  # generate's steps: the same sums, cheaper (its docstring)
        if generating:  # the three projections as one product
            q, k, v = F.linear(x, cache.qkv_weight).view(B, L, 3, H, E // H).permute(2, 0, 3, 1, 4).unbind(0)
        else:  # lesson 04's split_heads without its checks (this runs once per layer and generated character)
            q = m.q_proj(x).view(B, L, H, E // H).transpose(1, 2)  # (B, H, L, d)
            k = m.k_proj(x).view(B, L, H, E // H).transpose(1, 2)
            v = m.v_proj(x).view(B, L, H, E // H).transpose(1, 2)
        if self.rope:  # rotated at their absolute positions before caching: a cached key is never turned again
            q, k = apply_rope(q, positions), apply_rope(k, positions)
        if cache is not None:
            k, v, _ = cache.update(k, v)  # (B, H, T + L, d): every key the new queries may see
        out, weights = _attend(q, k, v, implementation, need_weights)  # (B, H, L, d)
        out = out.transpose(1, 2).reshape(B, L, E)  # (B, L, E): the heads side by side again
        return (F.linear(out, cache.out_weight) if generating else m.out_proj(out)), weights


class Block(nn.Module):
    """A pre-norm decoder block: x + attention(LayerNorm(x)), then x + FeedForward(LayerNorm(x))."""

    def __init__(self, d_model, heads, d_ff, rope=False):
        _block_sizes("Block", d_model, heads, rope)
        check.positive_int("Block", "d_ff", d_ff)
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = CausalSelfAttention(d_model, heads, rope)
        self.norm2 = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, activation="gelu")  # E -> d_ff -> E

    def forward(self, x, positions, cache=None, implementation="course", need_weights=False):
        if isinstance(cache, _GenerationCache):  # generate's steps: the same sums as below, cheaper (its docstring)
            attended, weights = self.attention(F.layer_norm(x, *cache.norm1), positions, cache, implementation,
                                               need_weights)
            x += attended  # in place: x is the step's own (GPT._run made it), and no autograd to keep it for
            x += F.linear(F.gelu(F.linear(F.layer_norm(x, *cache.norm2), *cache.linear1)), *cache.linear2)
            return x, weights
        attended, weights = self.attention(self.norm1(x), positions, cache, implementation, need_weights)
        x = x + attended  # the residual stream: each sub-layer adds to it
        # lesson 06's FeedForward, its layers called directly: its forward checks its input at every call,
        # which is once per layer and generated character here (x comes from this block: it is right)
        ff = self.feed_forward
        return x + ff.linear2(F.gelu(ff.linear1(self.norm2(x)))), weights


# ----------------------------------------------------------------------------- the model


class GPT(nn.Module):
    """A decoder-only character model (module docstring). ``GPT(config)`` or ``make_gpt(...)``.

    ``forward(tokens, start=0, caches=None)``: tokens (B, L) int64 at positions start … start + L − 1
    (≤ context) -> logits (B, L, V); with ``caches`` (one KVCache per block, holding ``start`` tokens)
    the earlier positions come from them.
    """

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, GPTConfig):
            check.fail("GPT", "config", check.describe(config),
                       {"en": "a GPTConfig, e.g. GPTConfig(vocab=65)", "zh": "GPTConfig，例如 GPTConfig(vocab=65)"})
        self.config = config
        E = config.d_model
        self.embed = nn.Embedding(config.vocab, E)
        self.positions = LearnedPositionalEmbedding(config.context, E) if config.positions == "learned" else None
        self.blocks = nn.ModuleList(Block(E, config.heads, config.d_ff, config.positions == "rope")
                                    for _ in range(config.layers))
        self.norm = nn.LayerNorm(E)
        self.readout = nn.Linear(E, config.vocab, bias=False)
        self.readout.weight = self.embed.weight  # tied: one (V, E) matrix reads characters in and out
        self.implementation = config.attention
        self._initialise()

    def _initialise(self):
        """GPT-2's initialisation: weights N(0, 0.02), and the projections that write into the residual
        stream scaled down by √(2·layers), so that the stream's variance does not grow with depth."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for block in self.blocks:
            for projection in (block.attention.mha.out_proj, block.feed_forward.linear2):
                nn.init.normal_(projection.weight, mean=0.0, std=0.02 / math.sqrt(2 * self.config.layers))

    def use_attention(self, implementation):
        """Switch what computes attention (a name of ``ATTENTIONS`` or a function); returns the model."""
        self.implementation = _implementation("GPT.use_attention", "implementation", implementation)
        return self

    def _check_tokens(self, function, argument, tokens, start=0):
        check.tokens(function, argument, tokens, self.config.vocab, ndim=2, layout="(B, L)")
        check.on_device(function, argument, tokens, self.embed.weight.device,
                        {"en": "the model's parameters", "zh": "模型参数"})
        C = self.config.context
        if not 1 <= start + tokens.shape[1] <= C or not tokens.shape[1]:
            check.fail(function, argument, check.describe(tokens),
                       {"en": f"1 to {C - start} positions on the last axis: the model reads context = {C} positions "
                              f"(positions {start} … {start + tokens.shape[1] - 1} asked for)",
                        "zh": f"最后一维有 1 到 {C - start} 个位置：模型最多读 context = {C} 个位置"
                              f"（这里要的是位置 {start} … {start + tokens.shape[1] - 1}）"})
        return tokens

    def forward(self, tokens, start=0, caches=None):
        return self._run("GPT.forward", tokens, start, caches, False)[0]

    def _run(self, function, tokens, start, caches, need_weights, checked=True, last=False):
        """The forward pass; `last`: the logits of the last position only (all generation needs)."""
        if checked:  # generate checks its prompt once; the characters it samples are valid by construction
            check.whole_number(function, "start", start, 0, self.config.context - 1)
            self._check_tokens(function, "tokens", tokens, start)
            if caches is not None and (not isinstance(caches, (list, tuple)) or len(caches) != len(self.blocks)
                                       or not all(isinstance(c, KVCache) for c in caches)):
                check.fail(function, "caches", check.describe(caches),
                           {"en": f"None or a list of {len(self.blocks)} KVCache, one per block",
                            "zh": f"None，或由 {len(self.blocks)} 个 KVCache 组成的列表（每个块一个）"})
        L = tokens.shape[1]
        positions = torch.arange(start, start + L, device=tokens.device)  # (L,)
        x = self.embed(tokens)  # (B, L, E)
        if self.positions is not None:  # the table's rows, read without the checks start and L passed above
            x = x + self.positions.embedding(positions)  # (L, E) broadcast over B
        maps = []
        for i, block in enumerate(self.blocks):
            x, weights = block(x, positions, None if caches is None else caches[i], self.implementation, need_weights)
            maps.append(weights)
        if last and L > 1:
            x = x[:, -1:]  # (B, 1, E)
        return self.readout(self.norm(x)), maps  # (B, L, V), or (B, 1, V)

    @torch.no_grad()
    def attention_maps(self, tokens):
        """Every head's attention weights on `tokens` (B, L): (layers, B, H, L, L), computed with the
        "course" attention (the only one that holds them) whatever the model uses otherwise."""
        implementation = self.implementation
        self.implementation = "course" if not callable(implementation) else implementation
        try:
            _, maps = self._run("GPT.attention_maps", tokens, 0, None, True)
        finally:
            self.implementation = implementation
        return torch.stack(maps)

    def generate(self, prompt, new_tokens, *, temperature=1.0, top_k=None, generator=None, cache=True, keep=None):
        """`new_tokens` characters after `prompt` (B, P): returns ``(tokens (B, new_tokens), logits
        (B, new_tokens, V))``, each step's logits before temperature and top-k.

        Each step samples with ``sample_next(logits, temperature, top_k, generator)``
        (temperature 0: the most likely character, no generator needed). With ``cache`` the window's
        text is prefilled once and each step feeds one character through the KV caches (lesson 07's,
        written in place: ``_GenerationCache``); without, each step recomputes the whole window. The
        window is ``window_start``'s, `keep` characters kept when it jumps (1 … context; default
        context // 2; context: nanoGPT's crop). The arguments are checked here, once: the steps run
        without checks (the characters it samples are valid by construction)."""
        function = "GPT.generate"
        C = self.config.context
        check.tokens(function, "prompt", prompt, self.config.vocab, ndim=2, layout="(B, P)")
        if not prompt.shape[1]:
            check.fail(function, "prompt", check.describe(prompt),
                       {"en": "at least one token per sequence", "zh": "每条序列至少一个词元"})
        check.on_device(function, "prompt", prompt, self.embed.weight.device,
                        {"en": "the model's parameters", "zh": "模型参数"})
        check.positive_int(function, "new_tokens", new_tokens)
        check.flag(function, "cache", cache)
        keep = max(1, C // 2) if keep is None else check.whole_number(function, "keep", keep, 1, C)
        check_sampling(function, temperature, top_k, generator, self.config.vocab)
        def last_logits(text, position, caches):  # (B, V): the logits after `text` at `position` on
            return self._run(function, text, position, caches, False, checked=False, last=True)[0][:, -1]

        # the loop stays in this method: lesson 10's generation exercise refuses GPT.generate by its code, and a
        # helper that held the loop would be a way around that
        # inference_mode: no autograd bookkeeping at all, so a step's ~150 small operations each cost less
        with torch.inference_mode(), _pytorch_gelu() if cache else contextlib.nullcontext():
            tokens, chosen, logits = prompt, [], []
            start = _window_start(prompt.shape[1], C, keep)
            caches = [_GenerationCache(block, C) for block in self.blocks] if cache else None
            step = last_logits(tokens[:, start:], 0, caches)  # the prefill, or the first recomputation
            for i in range(new_tokens):
                following = _draw(step, temperature, top_k, generator)  # (B,)
                chosen.append(following)
                logits.append(step)
                if i == new_tokens - 1:
                    break
                tokens = torch.cat([tokens, following[:, None]], dim=1)
                n = tokens.shape[1]
                now = _window_start(n, C, keep)
                if not cache:  # recompute: the whole window again
                    step = last_logits(tokens[:, now:], 0, None)
                elif now == start:  # the same window, one character longer: one cached step
                    step = last_logits(following[:, None], n - 1 - start, caches)
                else:  # the window jumped: the caches emptied, then prefilled with its text
                    start = now
                    for emptied in caches:
                        emptied.seen = 0
                    step = last_logits(tokens[:, start:], 0, caches)
        return torch.stack(chosen, dim=1), torch.stack(logits, dim=1)  # stacked outside: ordinary tensors


@contextlib.contextmanager
def _pytorch_gelu():
    """oneDNN off while generate steps with the cache (``torch.backends.mkldnn.enabled``: a setting of the
    whole process, other threads' meanwhile too; put back after). Of what a cached step runs, only GELU
    goes to oneDNN, and each of its calls sets up a oneDNN primitive: a fixed price of about 10 µs, several
    times that just after a step has read its 19 MB of weights through the processor's caches, far more
    than PyTorch's own kernel takes to compute the same function (the values differ in the last bits; the
    characters sampled do not: tests/test_gpt.py). At the lesson's size, measured on a busy 2-CPU
    machine, that was about a tenth of a step."""
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = enabled


class _GenerationCache:
    """What one block keeps through ``GPT.generate``: lesson 07's KV cache, made cheaper to step.

    A cached step feeds one character through the model: every product is a matrix times a vector, so
    a step costs one read of the weights plus the fixed price of each operation and of each Python call
    around it, about as much again at the lesson's size. So when the cache is one of these, ``Block``
    and ``CausalSelfAttention`` take a shorter road to the same sums:

    - The keys and values are written in place into buffers made once for the whole window, (B, H,
      context, d) each, and ``update`` returns views of their first ``seen`` positions. ``KVCache``
      concatenates instead: a copy of everything it holds at every step, per layer.
    - ``qkv_weight`` is the block's q, k and v projections stacked into one (3E, E) matrix (rows: q's,
      then k's, then v's, as ``nn.MultiheadAttention``'s ``in_proj_weight``), stacked once per
      generation: one matrix-vector product per character and layer instead of three, the same numbers.
    - The block's other weights are gathered here once, as the arguments of ``F.layer_norm`` and
      ``F.linear``: the step calls those functions directly, not the modules (``nn.LayerNorm``,
      ``nn.Linear``) around them, whose calls and attribute look-ups cost as much as a small operation.
    - The residual additions write into the step's own tensor (no new one per addition).
    - ``update`` checks nothing: generate feeds it the keys it made; it empties it (``seen = 0``) when
      the window jumps, the buffers kept.
    """

    def __init__(self, block, context):
        m, ff = block.attention.mha, block.feed_forward
        self.qkv_weight = torch.cat([m.q_proj.weight, m.k_proj.weight, m.v_proj.weight])  # (3E, E)
        self.out_weight = m.out_proj.weight  # (E, E), no bias
        self.norm1, self.norm2 = ((n.normalized_shape, n.weight, n.bias, n.eps) for n in (block.norm1, block.norm2))
        self.linear1, self.linear2 = (ff.linear1.weight, ff.linear1.bias), (ff.linear2.weight, ff.linear2.bias)
        self.context, self.seen = context, 0
        self.keys = self.values = None  # (B, H, context, d), made at the first update

    def update(self, key, value):
        """key, value (B, H, L_new, d) -> (keys, values, None): views (B, H, seen + L_new, d) of the buffers."""
        if self.keys is None:
            B, H, _, d = key.shape
            self.keys, self.values = key.new_empty((B, H, self.context, d)), value.new_empty((B, H, self.context, d))
        end = self.seen + key.shape[2]  # ≤ context: generate's windows fit
        self.keys.narrow(2, self.seen, end - self.seen).copy_(key)
        self.values.narrow(2, self.seen, end - self.seen).copy_(value)
        self.seen = end
        return self.keys.narrow(2, 0, end), self.values.narrow(2, 0, end), None


def window_start(length, context, keep):
    """Where the window a model reads begins when the text has `length` characters (``GPT.generate``).

    Up to `context` characters: 0, all of them. Past it the window restarts at the last `keep`
    characters when the next one would not fit, then grows one character a step back to `context`:
    it moves in jumps of context − keep + 1. `keep` = `context` gives the last `context` characters
    every time (nanoGPT's crop)."""
    function = "window_start"
    check.positive_int(function, "length", length)
    check.positive_int(function, "context", context)
    check.whole_number(function, "keep", keep, 1, context)
    return _window_start(length, context, keep)


def _window_start(length, context, keep):
    """window_start without its checks (generate checks its arguments once, not once per character)."""
    if length <= context:
        return 0
    return length - keep - (length - context - 1) % (context - keep + 1)


#: The positive temperatures sampling takes: past them logits / temperature leave float32 (inf, then
#: NaN probabilities) or every character is equally likely to the last digit. 0 is the argmax.
TEMPERATURES = (1e-6, 100.0)


def check_sampling(function, temperature, top_k, generator, vocab=None):
    """The checks of ``sample_next``'s `temperature`, `top_k` and `generator` (top_k ≤ `vocab` when
    given), said as `function`'s: for the functions that sample with them (``GPT.generate``,
    ``verse.sample_poems``)."""
    check.number(function, "temperature", temperature, non_negative=True)
    low, high = TEMPERATURES
    if temperature and not low <= temperature <= high:
        check.fail(function, "temperature", check.describe(temperature),
                   {"en": f"0 (always the most likely character) or a number from {low:g} to {high:g}",
                    "zh": f"0（总取最可能的字符）或 {low:g} 到 {high:g} 之间的数"})
    if top_k is not None:
        check.positive_int(function, "top_k", top_k)
        if vocab is not None and top_k > vocab:
            check.fail(function, "top_k", check.describe(top_k),
                       {"en": f"None or 1 … {vocab} (the vocabulary's size)", "zh": f"None 或 1 … {vocab}（词表大小）"})
    if temperature > 0:
        if generator is None:
            check.fail(function, "generator", check.describe(generator),
                       {"en": "a torch.Generator to sample from, e.g. torch.Generator().manual_seed(0) (only "
                              "temperature=0, which always takes the most likely character, needs none)",
                        "zh": "用来采样的 torch.Generator，例如 torch.Generator().manual_seed(0)（只有 temperature=0，"
                              "即总取最可能的字符时，才不需要）"})
        check.generator(function, "generator", generator)


def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    """One character per row of `logits` (B, V) -> (B,) int64.

    The logits are divided by `temperature` (below 1 sharper, above 1 flatter; 0: the argmax, no
    sampling); with `top_k` only the k largest keep a chance (ties with the k-th kept too); then one
    draw from the softmax with `generator` (the same generator state, the same draws). The draw
    happens on the generator's device; the result is on the logits'."""
    function = "sample_next"
    check.tensor(function, "logits", logits, min_ndim=2, layout="(B, V)")
    if logits.ndim != 2 or not logits.shape[1]:
        check.fail(function, "logits", check.describe(logits),
                   {"en": "a floating-point tensor of shape (B, V), V ≥ 1", "zh": "形状为 (B, V)（V ≥ 1）的浮点张量"})
    check.has_values(function, "logits", logits)
    if torch.isnan(logits).any():
        check.fail(function, "logits", check.describe(logits),
                   {"en": "logits without NaN (a NaN gives no probabilities to draw from)",
                    "zh": "不含 NaN 的 logits（有 NaN 就没有可供抽样的概率）"})
    check_sampling(function, temperature, top_k, generator, logits.shape[1])
    return _draw(logits, temperature, top_k, generator)


def _draw(logits, temperature, top_k, generator):
    """sample_next without its checks (generate checks its arguments once, not once per character)."""
    if top_k is not None:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if temperature == 0:
        return logits.argmax(dim=-1)
    probabilities = (logits / temperature).softmax(dim=-1)  # (B, V)
    drawn = torch.multinomial(probabilities.to(generator.device), 1, generator=generator)  # (B, 1)
    return drawn[:, 0].to(logits.device)


def lm_loss(logits, targets):
    """The language-model loss: the mean cross-entropy of `targets` (B, T) under `logits` (B, T, V),
    every position a prediction (flattened to B·T rows; the softmax is inside F.cross_entropy)."""
    function = "lm_loss"
    check.tensor(function, "logits", logits, min_ndim=3, layout="(B, T, V)")
    check.has_values(function, "logits", logits)
    if not logits.shape[-1]:
        check.fail(function, "logits", check.describe(logits),
                   {"en": "a floating-point tensor of shape (B, T, V), V ≥ 1", "zh": "形状为 (B, T, V)（V ≥ 1）的浮点张量"})
    check.tokens(function, "targets", targets, logits.shape[-1], ndim=2, layout="(B, T)")
    if logits.ndim != 3 or tuple(logits.shape[:2]) != tuple(targets.shape):
        check.fail(function, "logits", check.describe(logits),
                   {"en": f"shape (B, T, V) with (B, T) = {tuple(targets.shape)}, targets' shape",
                    "zh": f"形状 (B, T, V)，其中 (B, T) = {tuple(targets.shape)}，与 targets 一致"})
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten().long())  # int32 ids too, as the model takes


def parameter_count(model):
    """The parameters of `model`, each counted once (the tied embedding and read-out are one matrix)."""
    check.module("parameter_count", "model", model)
    return sum(p.numel() for p in model.parameters())


def make_gpt(vocab, seed=0, **sizes):
    """A new GPT with ``GPTConfig(vocab, **sizes)``, its weights drawn from `seed` (the global random
    state untouched), on the CPU, in training mode."""
    check.seed("make_gpt", "seed", seed)
    named = _CONFIG_CALLER.set("make_gpt")  # a size it refuses is said as make_gpt's, the function called
    try:
        config = GPTConfig(vocab, **sizes)
    finally:
        _CONFIG_CALLER.reset(named)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT(config)
