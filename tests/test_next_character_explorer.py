"""Lesson 10's explorer (course_utils.widgets.next_character): temperature and top-k against a GPT's
next-character distribution and the text it generates. A tiny untrained model is enough: what is
checked is what the bars and the text are (the distribution sampling uses, the generator's draws),
not what a trained model says."""

import io
import warnings

import numpy as np
import pytest
import torch
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from PIL import Image

from course_utils import gpt, i18n, viz
from course_utils.corpus import Corpus, load
from course_utils.validation import ArgumentError
from course_utils.widgets import next_character_distribution, next_character_explorer, next_character_view
from course_utils.widgets.next_character import CONTINUATION, DROPPED, KEPT, SHOWN, fused_attention

# the bars' colours and the drawn text are compared exactly: one thread, the same float path both sides
pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "First Citizen:\nYou are all resolved rather to die than to famish?\n")
PROMPT = "First Citizen:\nBefore we "


@pytest.fixture(scope="module")
def corpus():
    return Corpus("custom", TEXT)


@pytest.fixture(scope="module")
def model(corpus):
    # a larger spread of the weights than GPT-2's 0.02, so that the untrained model's logits differ
    # visibly from one character to the next (the most likely about 0.22, the next 0.09, ...)
    model = gpt.make_gpt(corpus.vocab_size, seed=3, context=32, d_model=32, heads=2, layers=2).eval()
    with torch.no_grad():
        model.embed.weight.mul_(5)
    return model


def bars(box_or_figure):
    figure = getattr(box_or_figure, "figure", box_or_figure)
    return [(bar.get_height(), bar.get_facecolor()) for bar in figure.next_bars]


def colour(name):
    from matplotlib.colors import to_rgba
    return to_rgba(name)


def continuation(summary):
    return summary.split("\n", 4)[4]  # prompt line, distribution line, blank, heading: the text follows


def test_the_bars_are_the_distribution_sampling_uses(model, corpus):
    with torch.no_grad(), fused_attention(model):
        logits = model(corpus.encode(PROMPT)[None])[0, -1]
    for temperature, top_k in ((1.0, None), (0.7, 5), (1.5, 1)):
        order, probability, before_cut, kept = next_character_distribution(model, corpus, PROMPT, temperature, top_k)
        assert torch.equal(order.sort().values, torch.arange(corpus.vocab_size))
        assert bool((logits[order][:-1] >= logits[order][1:]).all())  # most likely first
        expected = torch.softmax(logits.double() / temperature, -1)
        assert torch.allclose(before_cut.double(), expected[order], atol=1e-6)
        allowed = logits >= logits.topk(top_k).values[-1] if top_k else torch.ones_like(logits, dtype=torch.bool)
        assert torch.equal(kept, allowed[order])
        restricted = torch.where(allowed, expected, 0.0)
        assert torch.allclose(probability.double(), (restricted / restricted.sum())[order], atol=1e-6)
        figure, _ = next_character_view(model, corpus, PROMPT, temperature=temperature, top_k=top_k)
        shown = bars(figure)
        assert len(shown) == min(SHOWN, corpus.vocab_size)
        for (height, face), p, q, keep in zip(shown, probability, before_cut, kept):
            assert face == colour(KEPT if keep else DROPPED)
            assert height == pytest.approx((p if keep else q).item(), abs=1e-6)  # grey: its chance before the cut


def test_a_redraw_changes_the_picture_and_the_text_and_keeps_the_figure(model, corpus):
    box = next_character_explorer(model, corpus, PROMPT, temperature=1.0)
    figure, picture, heights, text = box.figure, bytes(box.image.value), bars(box), box.summary.value
    assert picture.startswith(b"\x89PNG")  # drawn on the figure's own Agg canvas: no display needed
    box.controls["temperature"].value = 0.3
    assert box.figure is figure  # updated in place
    assert bytes(box.image.value) != picture and bars(box) != heights and box.summary.value != text
    box.controls["top_k"].value = 3
    assert [face for _, face in bars(box)].count(colour(KEPT)) == 3
    box.controls["top_k"].value = 0  # 0 on the slider: no cut
    assert all(face == colour(KEPT) for _, face in bars(box))


def _pixels(png):
    return np.asarray(Image.open(io.BytesIO(bytes(png))))


def test_the_figure_is_laid_out_once_and_an_updated_one_shows_exactly_what_a_new_one_would(model, corpus):
    box = next_character_explorer(model, corpus, PROMPT, temperature=0.2)  # the most likely bar above 0.5
    # laid out once (viz.keep_layout): a redraw measures no text again
    assert isinstance(box.figure.get_layout_engine(), (type(None), PlaceHolderLayoutEngine))
    for control, value in (("temperature", 1.9), ("top_k", 2), ("top_k", 4), ("seed", 7)):  # other y limits, cuts
        box.controls[control].value = value
    assert box.figure.axes[0].get_ylim() != (0, 1.05)
    assert len(box.image.value) <= 96 * 1024  # what every redraw sends to the browser (tests/test_widget_redraw.py)
    fresh, _ = next_character_view(model, corpus, PROMPT, temperature=1.9, top_k=4, seed=7)
    assert fresh is not box.figure
    assert np.array_equal(_pixels(box.image.value), _pixels(viz.figure_png(fresh)))


def test_a_model_changed_in_place_is_read_again(corpus):
    model = gpt.make_gpt(corpus.vocab_size, seed=5, context=16, d_model=16, heads=2, layers=1).eval()
    before = next_character_distribution(model, corpus, "All")[1]
    with torch.no_grad():
        model.embed.weight.mul_(10)  # a step of training would change the weights in place too
    after = next_character_distribution(model, corpus, "All")[1]
    assert not torch.allclose(before, after)


def test_temperature_zero_is_greedy_decoding(model, corpus):
    figure, summary = next_character_view(model, corpus, PROMPT, temperature=0, top_k=7, seed=5)
    heights = [height for height, _ in bars(figure)]
    assert heights[0] == 1.0 and not any(heights[1:])
    assert [face for _, face in bars(figure)] == [colour(KEPT)] + [colour(DROPPED)] * (len(heights) - 1)
    ids = corpus.encode(PROMPT)[None]
    with fused_attention(model):  # what the explorer computes with (the model's own choice restored after)
        greedy, _ = model.generate(ids, CONTINUATION, temperature=0, cache=False)  # recomputed, argmax every step
        with torch.no_grad():
            assert greedy[0, 0] == model(ids)[0, -1].argmax()
    assert continuation(summary) == corpus.decode(greedy[0])
    assert summary.split("\n")[1].startswith("temperature 0: nothing is drawn")


def test_top_k_one_greys_every_bar_but_the_most_likely(model, corpus):
    figure, _ = next_character_view(model, corpus, PROMPT, temperature=1.0, top_k=1)
    faces = [face for _, face in bars(figure)]
    assert faces == [colour(KEPT)] + [colour(DROPPED)] * (len(faces) - 1)
    assert bars(figure)[0][0] == 1.0  # all the probability on the one character kept


def test_the_draw_is_the_seeded_generators_and_reproducible(model, corpus):
    _, first = next_character_view(model, corpus, PROMPT, temperature=1.2, top_k=8, seed=11)
    _, again = next_character_view(model, corpus, PROMPT, temperature=1.2, top_k=8, seed=11)
    _, other = next_character_view(model, corpus, PROMPT, temperature=1.2, top_k=8, seed=12)
    assert first == again and continuation(first) != continuation(other)
    with fused_attention(model):
        drawn, _ = model.generate(corpus.encode(PROMPT)[None], CONTINUATION, temperature=1.2, top_k=8,
                                  generator=torch.Generator().manual_seed(11))
    assert continuation(first) == corpus.decode(drawn[0]) and len(drawn[0]) == CONTINUATION
    state = torch.random.get_rng_state()
    next_character_view(model, corpus, PROMPT, temperature=1.0, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global generator untouched


def test_the_explorer_computes_with_fused_attention_and_gives_the_model_its_own_back(model, corpus):
    seen = []

    def course_attention(q, k, v, keep_mask):  # the model's own choice: records that it ran
        seen.append(q.shape)
        return gpt.causal_attention(q, k, v, "course", need_weights=True)

    model.use_attention(course_attention)
    try:
        next_character_view(model, Corpus("custom", TEXT), PROMPT + "f", temperature=0.8, seed=1)
        assert model.implementation is course_attention and seen == []
        with fused_attention(model):
            assert model.implementation == "sdpa"
            with pytest.raises(RuntimeError), fused_attention(model):
                raise RuntimeError("a failed redraw")
            assert model.implementation == "sdpa"
        assert model.implementation is course_attention
    finally:
        model.use_attention("course")


def test_a_prompt_longer_than_the_context_is_read_through_its_last_window(model, corpus):
    long_prompt = TEXT[:100]  # the model reads 32 positions
    order, _, _, _ = next_character_distribution(model, corpus, long_prompt)
    last = corpus.encode(long_prompt[-32:])[None]
    with torch.no_grad(), fused_attention(model):
        assert order[0] == model(last)[0, -1].argmax()
    _, summary = next_character_view(model, corpus, long_prompt, temperature=0)
    assert summary.startswith("prompt: …")


def test_both_languages_and_every_glyph_of_the_tang_poems(model, corpus):
    tang = load("tang")
    poet = gpt.make_gpt(tang.vocab_size, seed=0, context=16, d_model=16, heads=2, layers=1).eval()
    i18n.set_language("zh")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a missing glyph warns: here it fails
            box = next_character_explorer(poet, tang, "床前明月光，", temperature=0.9, top_k=20)
            box.controls["temperature"].value = 0.0
        summary = box.summary.value
        title = box.figure.axes[0].get_title()
        _, shakespeare_summary = next_character_view(model, corpus, PROMPT, temperature=0.5, top_k=2)
    finally:
        i18n.set_language("en")
    assert "提示：床前明月光，" in summary and "温度 0：不再抽样" in summary and "贪心生成的 80 个字符" in summary
    assert box.controls["top_k"].description == "top-k（0：不截断）" and box.controls["temperature"].description == "温度"
    assert title == "“床前明月光，”之后的下一个字符"
    assert "top-k = 2" in shakespeare_summary and "可被抽中" in shakespeare_summary


def test_a_character_no_font_draws_is_labelled_by_its_code_point(corpus):
    rare = Corpus("custom", "床前明月光，\U00025767\n")  # 𥝧, in the Tang poems, beyond the CJK font's glyphs
    poet = gpt.make_gpt(rare.vocab_size, seed=0, context=8, d_model=8, heads=2, layers=1).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        box = next_character_explorer(poet, rare, "床前\U00025767")
    labels = [label.get_text() for label in box.figure.axes[0].get_xticklabels()]
    assert sorted(labels) == sorted(["床", "前", "明", "月", "光", "，", "↵", "U+25767"])
    assert "“床前U+25767”" in box.figure.axes[0].get_title()  # the prompt repeated in the title
    assert "提示" not in box.summary.value and "prompt: 床前\U00025767" in box.summary.value  # the page draws it


@pytest.mark.parametrize("call, argument", [
    (lambda m, c: next_character_view(torch.nn.Linear(2, 2), c, PROMPT), "model"),
    (lambda m, c: next_character_view(m, "shakespeare", PROMPT), "corpus"),
    (lambda m, c: next_character_view(m, Corpus("custom", "abc"), "ab"), "corpus"),
    (lambda m, c: next_character_view(m, c, ""), "prompt"),
    (lambda m, c: next_character_view(m, c, "Zebra"), "prompt"),
    (lambda m, c: next_character_view(m, c, 42), "prompt"),
    (lambda m, c: next_character_view(m, c, PROMPT, temperature=-0.5), "temperature"),
    (lambda m, c: next_character_view(m, c, PROMPT, temperature=float("nan")), "temperature"),
    (lambda m, c: next_character_view(m, c, PROMPT, top_k=0), "top_k"),
    (lambda m, c: next_character_view(m, c, PROMPT, top_k=c.vocab_size + 1), "top_k"),
    (lambda m, c: next_character_view(m, c, PROMPT, seed=1.5), "seed"),
    (lambda m, c: next_character_distribution(m, c, PROMPT, top_k=2.0), "top_k"),
    (lambda m, c: next_character_explorer(m, c, PROMPT, temperature=3.0), "temperature"),
    (lambda m, c: next_character_explorer(m, c, PROMPT, seed=1000), "seed"),
])
def test_a_bad_argument_is_named(model, corpus, call, argument):
    with pytest.raises(ArgumentError, match=rf"argument '{argument}' got"):
        call(model, corpus)
