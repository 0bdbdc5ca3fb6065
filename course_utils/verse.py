"""Is a sampled Tang poem well formed? Lesson 10's measure of what a model learned of regulated verse.

The Tang corpus (``corpus.load("tang")``) holds regulated poems, one couplet a line and a blank line
between poems. A couplet is two lines of the poem: ``五个字，五个字。`` or ``七个字子，七个字子。``.
A poem is **well formed** (``form``) when

- it has 2 couplets (a jueju, 绝句: four lines) or 4 couplets (a lüshi, 律诗: eight lines);
- every line of the poem has the same length, 5 characters or 7 (五言 or 七言);
- each couplet is a line, "，", the paired line and its end, "。" (or "？", "！", as 135 of the corpus's
  poems end a couplet), with no other punctuation inside.

That is the form alone: not the tones (平仄), the rhyme or the parallelism a poet also obeys. A
character model learns it only from the text, since nothing in it counts characters.

``sample_poems(model, corpus, count)`` draws `count` poems from a trained model (batches of
``BATCH``, KV-cached), each started after a poem's end (``"。\\n\\n"``) and read up to the next blank line;
``well_formed_share`` is the share of them ``form`` accepts.

**Parallelism** (对仗: the second line of a couplet answers the first word for word). In a couplet
line ``A，B。``, the k-th character of B (position n + 1 + k of the line) and the k-th of A (position k)
are parallel. ``parallel_attention`` averages, for every head of a model, the weight each character
of B gives to its parallel character of A and, as the baseline, the mean weight it gives to the other
characters of A: a ratio near 1 says the head does not single out the parallel place; well above 1,
that it looks there. ``poems(corpus, split)`` gives a split's poems, ``couplets(poem)`` where each
couplet line of one starts.
"""

import re

import torch

from . import gpt
from . import validation as check
from .corpus import check_corpus

#: What a poem's end looks like in the corpus, and so what a sampled poem is started after.
POEM_END = "。\n\n"
#: The longest poem ``form`` accepts: four couplets of two seven-character lines, "，", "。" and "\n".
LONGEST = 4 * (2 * 7 + 2 + 1)
#: Poems drawn per batch. ``GPT.generate`` returns every step's logits, (B, LONGEST + 2, V) float32:
#: lesson 10's 200 poems of the Tang corpus's 6,656 characters in one batch held 370 MB of them, and as
#: much again while it stacked them, which took the lesson's kernel from 0.7 GB to 1.5 GB, its budget.
#: Batches of 50 hold a quarter of that, and cost a few per cent more time in small operations.
BATCH = 50
_COUPLET = re.compile(r"^([^，。？！\s]{5}|[^，。？！\s]{7})，([^，。？！\s]{5}|[^，。？！\s]{7})[。？！]$")


def form(poem):
    """The poem's form, ``"五言绝句"``, ``"七言绝句"``, ``"五言律诗"`` or ``"七言律诗"``, or None when it is not
    well formed (module docstring). `poem`: its couplets, one a line (a trailing newline is allowed)."""
    if not isinstance(poem, str):
        check.fail("form", "poem", check.describe(poem),
                   {"en": "a str: the poem's couplets, one a line", "zh": "str：诗的各联，每联一行"})
    couplets = poem.rstrip("\n").split("\n")
    if len(couplets) not in (2, 4):
        return None
    matches = [_COUPLET.match(line) for line in couplets]
    if not all(matches):
        return None
    lengths = {len(part) for m in matches for part in m.groups()}
    if len(lengths) != 1:
        return None
    (length,) = lengths
    return ("五言" if length == 5 else "七言") + ("绝句" if len(couplets) == 2 else "律诗")


@torch.no_grad()
def sample_poems(model, corpus, count=200, *, temperature=1.0, top_k=None, seed=0):
    """`count` poems sampled from `model` (a ``gpt.GPT`` trained on `corpus`, the Tang corpus), each
    begun after ``POEM_END`` and ended at the next blank line; a poem that has not ended within
    ``LONGEST + 1`` characters is returned as sampled (``form`` refuses it). Drawn in batches of
    ``BATCH`` poems, one after another from one ``torch.Generator`` seeded with `seed`, on the model's
    device, with ``GPT.generate``'s cache."""
    function = "sample_poems"
    check.module(function, "model", model, gpt.GPT)
    check_corpus(function, "corpus", corpus)
    check.positive_int(function, "count", count)
    check.fits_in_memory(function, "count", count, count * (len(POEM_END) + LONGEST + 2), 8)
    missing = [c for c in POEM_END if c not in corpus.vocab]
    if missing:
        check.fail(function, "corpus", f"a corpus without {missing!r}",
                   {"en": "the Tang corpus (corpus.load('tang')), whose poems end with '。' and a blank line",
                    "zh": "唐诗语料（corpus.load('tang')）：诗以“。”和一个空行结尾"})
    if model.config.vocab != corpus.vocab_size:
        check.fail(function, "model", {"en": f"a GPT of {model.config.vocab} characters",
                                        "zh": f"{model.config.vocab} 个字符的 GPT"},
                   {"en": f"a GPT trained on the corpus, {corpus.vocab_size} characters",
                    "zh": f"在该语料上训练的 GPT（{corpus.vocab_size} 个字符）"})
    gpt.check_sampling(function, temperature, top_k, None if temperature == 0 else torch.Generator(), model.config.vocab)
    device = next(model.parameters()).device
    end_of_poem = corpus.encode(POEM_END).to(device)  # (3,)
    generator = torch.Generator(device=device).manual_seed(check.seed(function, "seed", seed))
    poems = []
    for first in range(0, count, BATCH):
        prompt = end_of_poem.expand(min(BATCH, count - first), -1).contiguous()  # (B, 3)
        tokens, _ = model.generate(prompt, LONGEST + 2, temperature=temperature, top_k=top_k, generator=generator)
        for row in tokens.cpu():
            text = corpus.decode(row)
            end = text.find("\n\n")
            poems.append(text if end < 0 else text[:end])
    return poems


def well_formed_share(poems):
    """The share of `poems` (a list of str) that ``form`` accepts, from 0 to 1."""
    if not isinstance(poems, (list, tuple)) or not poems or not all(isinstance(poem, str) for poem in poems):
        check.fail("well_formed_share", "poems", check.describe(poems),
                   {"en": "a non-empty list of poems (str)", "zh": "非空的诗列表（str）"})
    return sum(form(poem) is not None for poem in poems) / len(poems)


# ----------------------------------------------------------------------------- parallelism, measured

#: The line lengths of regulated verse: five or seven characters.
LINE_LENGTHS = (5, 7)


def poems(corpus, split="val"):
    """The poems of `split` of the Tang corpus: the texts between blank lines, in order."""
    check_corpus("poems", "corpus", corpus)
    check.one_of("poems", "split", split, ("train", "val"))
    text = corpus.text[corpus.boundary:] if split == "val" else corpus.text[:corpus.boundary]
    return [poem for poem in text.split("\n\n") if poem.strip()]


def couplets(poem):
    """[(start, n)]: where each couplet line of `poem` starts (an index into the poem) and the length
    n of its two halves, for the lines written ``A，B。`` with n = |A| = |B| of 5 or 7."""
    if not isinstance(poem, str):
        check.fail("couplets", "poem", check.describe(poem), {"en": "a poem, a str", "zh": "一首诗（str）"})
    found, start = [], 0
    for line in poem.split("\n"):
        n = line.find("，")
        if n in LINE_LENGTHS and len(line) == 2 * n + 2 and line.endswith("。"):
            found.append((start, n))
        start += len(line) + 1
    return found


@torch.no_grad()
def parallel_attention(model, corpus, texts):
    """{"parallel": (layers, H), "others": (layers, H), "pairs": int}: for every head, the mean weight
    a character of a couplet's second line gives to its parallel character in the first line, and the
    mean weight it gives to each of the other characters of the first line, over every couplet of
    `texts` (poems of at most the model's context; longer ones are left out)."""
    function = "parallel_attention"
    check.module(function, "model", model, gpt.GPT)
    check_corpus(function, "corpus", corpus)
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        check.fail(function, "texts", check.describe(texts), {"en": "a list of poems (str)", "zh": "由诗（str）组成的列表"})
    unknown = sorted({c for poem in texts for c in poem if c not in corpus.vocab})
    if unknown:
        check.fail(function, "texts", {"en": f"poems with characters outside the corpus, {''.join(unknown[:5])!r}",
                                        "zh": f"含语料之外字符 {''.join(unknown[:5])!r} 的诗"},
                   {"en": f"poems written in the {corpus.name} corpus's characters",
                    "zh": f"只用 {corpus.name} 语料中字符写的诗"})
    by_length = {}
    for poem in texts:
        if 1 < len(poem) <= model.config.context and couplets(poem):
            by_length.setdefault(len(poem), []).append(poem)
    parallel, others, pairs = 0.0, 0.0, 0
    device = next(model.parameters()).device
    for group in by_length.values():  # poems of one length go through the model as one batch
        tokens = torch.stack([corpus.encode(poem) for poem in group]).to(device)  # (B, L)
        maps = model.attention_maps(tokens)  # (layers, B, H, L, L)
        for b, poem in enumerate(group):
            for start, n in couplets(poem):
                queries = torch.arange(start + n + 1, start + 2 * n + 1, device=device)  # (n,): the second line's
                first = torch.arange(start, start + n, device=device)  # (n,): the first line's characters
                weights = maps[:, b][:, :, queries][..., first]  # (layers, H, n, n): query k on key i
                on_parallel = weights.diagonal(dim1=-2, dim2=-1)  # (layers, H, n)
                parallel = parallel + on_parallel.sum(-1)
                others = others + (weights.sum(-1) - on_parallel).sum(-1) / (n - 1)
                pairs += n
    if not pairs:
        check.fail(function, "texts", check.describe(texts),
                   {"en": "poems with at least one couplet line 'A，B。' (5 or 7 characters a side) that fit the "
                          "model's context",
                    "zh": "至少含有一行“A，B。”形式的对句（每边 5 或 7 个字）、且不超过模型上下文长度的诗"})
    return {"parallel": parallel / pairs, "others": others / pairs, "pairs": pairs}
