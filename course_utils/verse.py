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

``sample_poems(model, corpus, count)`` draws `count` poems from a trained model at once (one batch,
KV-cached), each started after a poem's end (``"。\\n\\n"``) and read up to the next blank line;
``well_formed_share`` is the share of them ``form`` accepts.
"""

import re

import torch

from . import validation as check

#: What a poem's end looks like in the corpus, and so what a sampled poem is started after.
POEM_END = "。\n\n"
#: The longest poem ``form`` accepts: four couplets of two seven-character lines, "，", "。" and "\n".
LONGEST = 4 * (2 * 7 + 2 + 1)
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
    ``LONGEST + 1`` characters is returned as sampled (``form`` refuses it). Drawn in one batch from a
    ``torch.Generator`` seeded with `seed`, on the model's device, with ``GPT.generate``'s cache."""
    function = "sample_poems"
    check.positive_int(function, "count", count)
    missing = [c for c in POEM_END if c not in corpus.vocab]
    if missing:
        check.fail(function, "corpus", f"a corpus without {missing!r}",
                   {"en": "the Tang corpus (corpus.load('tang')), whose poems end with '。' and a blank line",
                    "zh": "唐诗语料（corpus.load('tang')）：诗以“。”和一个空行结尾"})
    device = next(model.parameters()).device
    prompt = corpus.encode(POEM_END).to(device).expand(count, -1).contiguous()  # (count, 3)
    generator = torch.Generator(device=device).manual_seed(check.seed(function, "seed", seed))
    tokens, _ = model.generate(prompt, LONGEST + 2, temperature=temperature, top_k=top_k, generator=generator)
    poems = []
    for row in tokens.cpu():
        text = corpus.decode(row)
        end = text.find("\n\n")
        poems.append(text if end < 0 else text[:end])
    return poems


def well_formed_share(poems):
    """The share of `poems` (a list of str) that ``form`` accepts, from 0 to 1."""
    if not isinstance(poems, (list, tuple)) or not poems:
        check.fail("well_formed_share", "poems", check.describe(poems),
                   {"en": "a non-empty list of poems (str)", "zh": "非空的诗列表（str）"})
    return sum(form(poem) is not None for poem in poems) / len(poems)
