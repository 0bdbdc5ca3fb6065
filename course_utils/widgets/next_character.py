"""Lesson 10: what temperature and top-k do to a trained GPT's next character, and to the text it writes.

``next_character_view`` shows, for a prompt, the model's distribution over the next character as it
is sampled: the 20 most likely characters as bars, each bar's height its probability after the
temperature and the top-k cut (renormalised over the characters that survive it), the characters
the cut drops in grey at the probability they had before it; and under the picture ~80 characters
``GPT.generate`` writes after the prompt with the same temperature and top-k, drawn from a
``torch.Generator`` seeded with ``seed`` (the same seed, the same text) through the KV cache.
Temperature 0 is greedy decoding: one bar of probability 1, the most likely character every step.
``next_character_explorer`` puts sliders for the temperature, top-k and the seed on it.

The prompt's logits are computed once per prompt (and per state of the model's weights); a redraw
generates the continuation again and updates the figure drawn the first time. Both run with
PyTorch's fused attention (``fused_attention``), the model's own choice restored afterwards.
"""

import contextlib
import functools

import ipywidgets as w
import matplotlib
import torch
from matplotlib import font_manager
from matplotlib.patches import Patch
from matplotlib.ticker import FormatStrFormatter

from .. import validation
from ..corpus import Corpus
from ..gpt import GPT
from ..i18n import language, message
from ..viz import keep_layout, new_figure
from .explorer import explorer, model_state, reusable

#: How many of the most likely characters the picture shows.
SHOWN = 20
#: How many characters the view generates after the prompt.
CONTINUATION = 80
#: The temperature slider's range (0: greedy) and step.
TEMPERATURE_MAX, TEMPERATURE_STEP = 2.0, 0.05
#: The top-k slider's largest k (0 on the slider: no cut), unless the vocabulary is smaller.
TOP_K_MOST = 40
#: The seed slider's range.
SEEDS = 100
#: The most characters of the prompt the picture's title and the summary repeat.
PROMPT_SHOWN = 40
#: Colours of the bars: a character that can be drawn, one the cut drops.
KEPT, DROPPED = "#4a7ab5", "#c8c8c8"
#: How characters that draw no glyph of their own are labelled under their bar.
VISIBLE = {"\n": "↵", " ": "␣", "\t": "⇥"}


def _arguments(function, model, corpus, prompt):
    """The prompt's ids (P,) after checking that `model` and `corpus` belong together and that every
    character of `prompt` is one of the corpus's."""
    validation.module(function, "model", model, GPT,
                      {"en": "a course_utils.gpt.GPT, e.g. the one pretrained.load returns",
                       "zh": "course_utils.gpt.GPT，例如 pretrained.load 返回的模型"})
    if not isinstance(corpus, Corpus):
        validation.fail(function, "corpus", validation.describe(corpus),
                        {"en": "a course_utils.corpus.Corpus, e.g. corpus.load('shakespeare')",
                         "zh": "course_utils.corpus.Corpus，例如 corpus.load('tang')"})
    if corpus.vocab_size != model.config.vocab:
        validation.fail(function, "corpus", validation.describe(corpus),
                        {"en": f"the corpus the model was trained on: the model reads {model.config.vocab} characters, "
                               f"this corpus has {corpus.vocab_size}",
                         "zh": f"训练这个模型用的语料：模型认识 {model.config.vocab} 个字符，这份语料有 {corpus.vocab_size} 个"})
    if not isinstance(prompt, str) or not prompt:
        validation.fail(function, "prompt", validation.describe(prompt),
                        {"en": "a non-empty str, the text the model continues", "zh": "非空的 str，即模型要续写的文本"})
    known = set(corpus.vocab)
    unknown = next((c for c in prompt if c not in known), None)
    if unknown is not None:  # named here as the prompt (Corpus.encode would name its own argument, text)
        validation.fail(function, "prompt", validation.describe(prompt),
                        {"en": f"characters of the {corpus.name} corpus only; {unknown!r} is not one of its "
                               f"{corpus.vocab_size}",
                         "zh": f"只含 {corpus.name} 语料中的字符；{unknown!r} 不在它的 {corpus.vocab_size} 个字符之中"})
    return corpus.encode(prompt)


def _sampling(function, vocab, temperature, top_k, seed):
    validation.number(function, "temperature", temperature, non_negative=True, maximum=100.0)
    if top_k is not None:
        validation.whole_number(function, "top_k", top_k, 1, vocab)
    validation.seed(function, "seed", seed)


@functools.lru_cache(maxsize=16)
def _next_logits(model, state, ids):
    """The model's logits (V,) for the character after `ids` (a tuple: its last `context` are read),
    on the CPU; computed once per prompt and per state of the model's weights."""
    window = torch.tensor(ids[-model.config.context:], dtype=torch.int64, device=model.embed.weight.device)
    with torch.no_grad(), fused_attention(model):
        return model(window[None])[0, -1].float().cpu()  # (V,)


@contextlib.contextmanager
def fused_attention(model):
    """`model` computing its attention with PyTorch's fused F.scaled_dot_product_attention ("sdpa")
    inside the block, whatever it used before (restored on exit). The same weights give the same
    function (lesson 10 swaps the implementations and compares them); on a CPU a generated character
    costs about a quarter less than with the course's "course" attention, which materialises the
    weights, and the explorer's redraw stays within 0.3 s of one thread's time on a 5 M-parameter model
    (benchmarks/bench_widgets.py measures it)."""
    before = model.implementation
    model.use_attention("sdpa")
    try:
        yield model
    finally:
        model.implementation = before


def next_character_distribution(model, corpus, prompt, temperature=1.0, top_k=None):
    """The next character after `prompt` as `model` samples it: ``(order, probability, before_cut,
    kept)``, each (V,) and sorted from the most likely character down (``order``: the ids, int64).

    ``probability``: what each character is drawn with at this `temperature` after the `top_k` cut
    (the characters kept renormalised to sum to 1); ``before_cut``: at this temperature without the
    cut; ``kept``: bool, the characters that can be drawn (the k largest logits, ties with the k-th
    kept, as ``gpt.sample_next`` keeps them). Temperature 0: the most likely character alone, with
    probability 1 (greedy decoding; ``torch.argmax``'s choice among ties)."""
    function = "next_character_distribution"
    ids = _arguments(function, model, corpus, prompt)
    _sampling(function, model.config.vocab, temperature, top_k, 0)
    return _distribution(_next_logits(model, model_state(model), tuple(ids.tolist())), temperature, top_k)


def _distribution(logits, temperature, top_k):
    # a stable sort: equal logits keep the order of their ids, the order torch.argmax breaks ties in
    order = torch.sort(logits, descending=True, stable=True).indices  # (V,)
    sorted_logits = logits[order]
    if temperature == 0:
        before_cut = torch.zeros_like(sorted_logits)
        before_cut[0] = 1.0  # the argmax: the first of the largest, as stable sort puts it
        kept = before_cut > 0
    else:
        before_cut = torch.softmax(sorted_logits.double() / temperature, dim=0).float()
        kept = torch.ones_like(sorted_logits, dtype=torch.bool) if top_k is None else \
            sorted_logits >= sorted_logits[top_k - 1]  # ties with the k-th kept, as gpt.sample_next keeps them
    probability = torch.where(kept, before_cut, 0.0)
    return order, probability / probability.sum(), before_cut, kept


def _shown(character):
    """A character as a bar's label: the invisible ones (newline, space, tab) as a sign for them, one
    that no font of the figure draws as its code point (a few rare characters of the Tang poems)."""
    if character in VISIBLE:
        return VISIBLE[character]
    return character if _drawable(character, tuple(matplotlib.rcParams["font.family"])) else f"U+{ord(character):04X}"


@functools.lru_cache(maxsize=8)
def _fonts(families):
    """The fonts of `families` (the figures' rcParams["font.family"]: viz.use_course_style sets it), loaded."""
    found = []
    for family in families:
        try:
            path = font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
        except ValueError:  # a font that is not installed: nothing to draw with
            continue
        found.append(font_manager.get_font(path))
    return tuple(found)


@functools.lru_cache(maxsize=8192)
def _drawable(character, families):
    """Whether a font of `families` has a glyph for `character` (else matplotlib draws an empty box)."""
    return any(font.get_char_index(ord(character)) for font in _fonts(families))


def _tail(text, drawn=False):
    """The end of `text` as the summary (or, `drawn`, the figure's title) repeats it: at most PROMPT_SHOWN
    characters on one line, a newline or a tab as its sign (in the title, a character no font draws too)."""
    cut = text[-PROMPT_SHOWN:]
    if drawn:
        shown = (c if c == " " else _shown(c) for c in cut)
    else:
        shown = (VISIBLE.get(c, c) if c in "\n\t" else c for c in cut)
    return ("…" if len(text) > PROMPT_SHOWN else "") + "".join(shown)


def next_character_view(model, corpus, prompt, temperature=1.0, top_k=None, seed=0, figure=None):
    """The explorer's view (module docstring): ``(figure, summary)`` for `model` (a ``gpt.GPT``)
    continuing `prompt` (a str of `corpus`'s characters) at `temperature` (≥ 0; 0: greedy) with the
    `top_k` cut (None: none; 1 … vocabulary) and the generator seeded with `seed`. The figure: the
    SHOWN most likely next characters, coloured where they can be drawn, grey where the cut drops
    them; the summary: how much probability the kept characters hold and the CONTINUATION characters
    generated. figure: one this view returned before, updated in place (what the explorer passes)."""
    function = "next_character_view"
    ids = _arguments(function, model, corpus, prompt)
    _sampling(function, model.config.vocab, temperature, top_k, seed)
    logits = _next_logits(model, model_state(model), tuple(ids.tolist()))
    order, probability, before_cut, kept = _distribution(logits, temperature, top_k)
    shown = min(SHOWN, len(order))
    labels = [_shown(corpus.vocab[i]) for i in order[:shown].tolist()]

    key = ("next_character", tuple(labels), _tail(prompt, drawn=True), language())  # what the layout holds
    figure = reusable(figure, key)
    if figure is None:  # laid out once: the labels are the prompt's characters, the y ticks one format
        figure, axes = new_figure(size=(7.6, 3.1))
        ax = axes[0, 0]
        figure.next_bars = ax.bar(range(shown), [0.0] * shown, color=KEPT, edgecolor="#7a7a7a", linewidth=0.6)
        ax.set_xticks(range(shown), labels, fontsize=11)
        for label in ax.get_xticklabels():
            if label.get_text().startswith("U+"):  # a code point in place of a glyph: smaller, to fit its bar
                label.set_fontsize(6)
        ax.set_xlim(-0.6, shown - 0.4)
        ax.set_ylim(0, 1.05)
        ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
        ax.set_ylabel(message("next_char.probability"))
        ax.set_title(message("next_char.title", tail=_tail(prompt, drawn=True)), fontsize=10)
        ax.legend(handles=[Patch(color=KEPT, label=message("next_char.kept")),
                           Patch(color=DROPPED, label=message("next_char.dropped"))],
                  loc="upper right", fontsize=8, frameon=False)
        keep_layout(figure)
        figure.explorer_key = key
    ax = figure.axes[0]
    heights = torch.where(kept, probability, before_cut)[:shown].tolist()
    for bar, height, can_be_drawn in zip(figure.next_bars, heights, kept[:shown].tolist()):
        bar.set_height(height)
        bar.set_facecolor(KEPT if can_be_drawn else DROPPED)
    top = max(heights)
    ax.set_ylim(0, 1.05 if top > 0.5 else 0.55 if top > 0.2 else 0.21)  # few ranges: the y labels keep their width
    text = _continuation(model, ids, temperature, top_k, seed)
    count = int(kept.sum())
    cut = message("next_char.no_cut") if top_k is None else message("next_char.cut", k=top_k)
    best = corpus.vocab[order[0]]
    best = VISIBLE.get(best, best)
    lines = [message("next_char.prompt", tail=_tail(prompt))]
    if temperature == 0:
        lines.append(message("next_char.greedy", best=best))
    else:
        lines.append(message("next_char.summary", temperature=temperature, cut=cut, count=count,
                             vocab=model.config.vocab, best=best, p=probability[0].item(),
                             kept_mass=before_cut[kept].sum().item()))
    lines += ["", message("next_char.greedy_text" if temperature == 0 else "next_char.sampled_text",
                          n=CONTINUATION, seed=seed), corpus.decode(text)]
    return figure, "\n".join(lines)


def _continuation(model, ids, temperature, top_k, seed):
    """CONTINUATION characters `model` writes after `ids` (P,), with the KV cache (GPT.generate)."""
    prompt = ids[None].to(model.embed.weight.device)  # (1, P)
    generator = torch.Generator().manual_seed(seed) if temperature > 0 else None
    with torch.inference_mode(), fused_attention(model):  # no autograd bookkeeping at all: a few % of a redraw
        tokens, _ = model.generate(prompt, CONTINUATION, temperature=temperature, top_k=top_k, generator=generator,
                                   cache=True)
    return tokens[0].cpu()  # (CONTINUATION,)


def next_character_explorer(model, corpus, prompt, temperature=1.0, top_k=None, seed=0):
    """Sliders for the temperature (0 … TEMPERATURE_MAX), top-k (0: no cut … TOP_K_MOST) and the
    seed over ``next_character_view`` of `model` continuing `prompt` (characters of `corpus`)."""
    function = "next_character_explorer"
    _arguments(function, model, corpus, prompt)
    _sampling(function, model.config.vocab, temperature, top_k, seed)
    if temperature > TEMPERATURE_MAX:
        validation.fail(function, "temperature", validation.describe(temperature),
                        {"en": f"a number from 0 to {TEMPERATURE_MAX:g} (the slider's range)",
                         "zh": f"0 到 {TEMPERATURE_MAX:g} 之间的数（滑块的范围）"})
    if not 0 <= seed < SEEDS:
        validation.fail(function, "seed", validation.describe(seed),
                        {"en": f"an int from 0 to {SEEDS - 1} (the slider's range)",
                         "zh": f"0 到 {SEEDS - 1} 之间的整数（滑块的范围）"})
    most_k = min(model.config.vocab, max(TOP_K_MOST, top_k or 0))

    def view(temperature, top_k, seed, figure=None):
        return next_character_view(model, corpus, prompt, temperature=temperature, top_k=top_k or None, seed=seed,
                                   figure=figure)

    style = {"description_width": "initial"}
    return explorer(
        view,
        temperature=w.FloatSlider(value=temperature, min=0.0,
                                  max=TEMPERATURE_MAX, step=TEMPERATURE_STEP, readout_format=".2f",
                                  description=message("next_char.temperature"), continuous_update=False, style=style),
        top_k=w.IntSlider(value=top_k or 0, min=0, max=most_k, description=message("next_char.top_k"),
                          continuous_update=False, style=style),
        seed=w.IntSlider(value=seed, min=0, max=SEEDS - 1, description=message("next_char.seed"),
                         continuous_update=False, style=style),
    )
