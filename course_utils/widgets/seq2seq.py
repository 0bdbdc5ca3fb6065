"""Lesson 06: what the trained encoder–decoder's decoder attends to while it reverses a source."""

import functools

import ipywidgets as w
import torch
from matplotlib.figure import Figure

from .. import seq2seq, validation
from ..i18n import message
from ..viz.seq2seq import decoding, draw_decoding, redraw_decoding
from .explorer import explorer, model_state, reusable

#: How many held-out sources (the first rows of ``seq2seq.held_out()``) the decoding explorer offers.
DECODING_EXAMPLES = 50
#: The width every source is padded to: a held-out batch's (8 letters and the end token).
WIDTH = seq2seq.MAX_LENGTH + 1


@functools.lru_cache(maxsize=1)
def _held_out():
    return seq2seq.held_out()


#: The last letter a source may hold.
LAST = chr(ord("a") + seq2seq.LETTERS - 1)


def _typeable(text):
    """Whether the explorer can decode `text`: a string that is empty once stripped (the slider's
    example), or 1 to MAX_LENGTH letters from a to LAST."""
    if not isinstance(text, str):
        return False
    letters = text.strip()
    return len(letters) <= seq2seq.MAX_LENGTH and all("a" <= c <= LAST for c in letters)


def _source(example, text):
    """The source the view shows (letters, or a held-out row of token ids), and the words that name it."""
    function = "decoding_view"
    if not isinstance(example, int) or isinstance(example, bool) or not 0 <= example < DECODING_EXAMPLES:
        validation.fail(function, "example", validation.describe(example),
                        {"en": f"an int from 0 to {DECODING_EXAMPLES - 1}",
                         "zh": f"0 到 {DECODING_EXAMPLES - 1} 之间的整数"})
    last = chr(ord("a") + seq2seq.LETTERS - 1)
    letters = text.strip() if isinstance(text, str) else None
    if not _typeable(text):
        validation.fail(function, "text", validation.describe(text),
                        {"en": f"an empty string (to show the example) or 1 to {seq2seq.MAX_LENGTH} of the "
                               f"letters a to {last}, e.g. \"abcd\"",
                         "zh": f"空字符串（显示 example 指定的样例），或 1 到 {seq2seq.MAX_LENGTH} 个 a 到 {last} "
                               "的字母，例如 \"abcd\""})
    if letters:
        return letters, message("viz.seq2seq.yours")
    return _held_out().source[example], message("viz.seq2seq.held_out", index=example)


@functools.lru_cache(maxsize=64)
def _decoded(model, state, source):
    """`model`'s greedy decoding of `source` (letters, or a held-out row's token ids as a tuple) with
    its attention weights: computed once per source (and per state of the model's parameters)."""
    tokens = source if isinstance(source, str) else torch.tensor(source)
    return decoding(model, tokens, pad_to=WIDTH, function="decoding_view")


def decoding_view(model, example=0, text="", figure=None):
    """The decoding explorer's view: `model` (a trained ``seq2seq.Reverser``) greedy-decodes one
    source, held-out example number `example` (0 to DECODING_EXAMPLES - 1, a row of
    ``seq2seq.held_out()``), or, when `text` is not empty, the letters of `text` (1 to 8 of a .. j).
    The source is padded to a held-out batch's width (8 letters and the end token), as in training.

    Returns ``(figure, summary)``: the figure shows the decoder's self-attention (target mask) and
    cross-attention (source mask) on its own answer, per head (``viz.seq2seq.draw_decoding``); the
    summary states the source, the greedy answer, the right answer and whether they agree (tokens
    and words only, so it reads the same on every machine). figure: one this view returned before,
    cleared and drawn again (what the explorer passes; faster than a new figure).
    """
    if not isinstance(model, seq2seq.Reverser):
        validation.fail("decoding_view", "model", validation.describe(model),
                        {"en": "a seq2seq.Reverser (e.g. seq2seq.train(seed=0).model)",
                         "zh": "seq2seq.Reverser（例如 seq2seq.train(seed=0).model）"})
    source, which = _source(example, text)
    result = _decoded(model, model_state(model), source if isinstance(source, str) else tuple(source.tolist()))
    key = ("decoding", result.cross_weights.shape[0])  # as many heads: the same maps, moved to the new lengths
    if reusable(figure, key) is not None:
        redraw_decoding(result, figure)
    else:
        figure = draw_decoding(result, Figure(dpi=80))
        figure.explorer_key = key
    real = result.source[result.source != seq2seq.PAD]  # (n + 1,): the letters and the EOS
    target = torch.cat([real[:-1].flip(0), real[-1:]])  # the letters reversed, then the EOS
    summary = message("viz.seq2seq.summary", which=which, source=seq2seq.show(real),
                      answer=seq2seq.show(result.answer), target=seq2seq.show(target),
                      verdict=message("viz.seq2seq.agree" if torch.equal(result.answer, target) else "viz.seq2seq.differ"))
    return figure, summary


def decoding_explorer(model, example=0, text=""):
    """An example slider (0 to DECODING_EXAMPLES - 1) and a box for your own letters (empty: the
    slider's example) over ``decoding_view`` for a trained ``seq2seq.Reverser``. Letters it cannot
    take are explained in the summary, in the notebook's language and in the words of the box
    ("type 1 to 8 letters from a to j"), instead of a picture."""
    if not isinstance(model, seq2seq.Reverser):  # said now, not as every view's summary
        validation.fail("decoding_explorer", "model", validation.describe(model),
                        {"en": "a seq2seq.Reverser (e.g. seq2seq.train(seed=0).model)",
                         "zh": "seq2seq.Reverser（例如 seq2seq.train(seed=0).model）"})
    validation.whole_number("decoding_explorer", "example", example, 0, DECODING_EXAMPLES - 1)
    if not isinstance(text, str):
        validation.fail("decoding_explorer", "text", validation.describe(text),
                        {"en": "a str of letters (empty: the slider's example)", "zh": "由字母组成的 str（为空则用滑块选的例子）"})
    def view(example, text, figure=None):
        if not _typeable(text):
            return None, message("viz.seq2seq.bad_letters", most=seq2seq.MAX_LENGTH, last=LAST, text=text.strip())
        try:
            return decoding_view(model, example=example, text=text, figure=figure)
        except validation.ArgumentError as error:
            return None, str(error)

    return explorer(
        view,
        example=w.IntSlider(value=example, min=0, max=DECODING_EXAMPLES - 1, description=message("viz.seq2seq.example"),
                            continuous_update=False),
        text=w.Text(value=text, placeholder=message("viz.seq2seq.placeholder"),
                    description=message("viz.seq2seq.letters"), continuous_update=False),
    )
