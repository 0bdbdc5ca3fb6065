"""Regulated Tang verse as lesson 10 measures it: the poems of a split, their couplets, and how much
attention a character of a couplet's second line pays to the character in the same place of the
first line (a couplet's parallelism, 对仗: the second line answers the first word for word).

The corpus writes one couplet a line, ``AAAAA，BBBBB。`` (five or seven characters each side), and a
blank line between poems. In such a line, the k-th character of B (position n + 1 + k of the line)
and the k-th of A (position k) are **parallel**. ``parallel_attention`` averages, for every head, the
weight each character of B gives to its parallel character of A, and, as the baseline, the mean weight
it gives to the other characters of A: a ratio near 1 says the head does not single out the parallel
place; well above 1, that it looks there.
"""

import torch

from . import gpt
from . import validation as check

#: The line lengths of regulated verse: five or seven characters.
LINE_LENGTHS = (5, 7)


def poems(corpus, split="val"):
    """The poems of `split` of the Tang corpus: the texts between blank lines, in order."""
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
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        check.fail(function, "texts", check.describe(texts), {"en": "a list of poems (str)", "zh": "由诗（str）组成的列表"})
    by_length = {}
    for poem in texts:
        if 1 < len(poem) <= model.config.context and couplets(poem):
            by_length.setdefault(len(poem), []).append(poem)
    parallel, others, pairs = 0.0, 0.0, 0
    for group in by_length.values():  # poems of one length go through the model as one batch
        maps = model.attention_maps(torch.stack([corpus.encode(poem) for poem in group]))  # (layers, B, H, L, L)
        for b, poem in enumerate(group):
            for start, n in couplets(poem):
                queries = torch.arange(start + n + 1, start + 2 * n + 1)  # (n,): the second line's characters
                first = torch.arange(start, start + n)  # (n,): the first line's
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
