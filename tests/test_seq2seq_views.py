"""Lesson 06, section 5: the plots (course_utils.viz.seq2seq) and the explorer (course_utils.widgets.seq2seq)
of the trained encoder–decoder. Figures and labels in both languages, the masked cells drawn and exactly
zero, the greedy answer's maps taken on what the decoder read, bad arguments named, the explorer's controls.

Almost everything runs on an untrained model (``seq2seq.make_model``): what is drawn does not depend on
training. The one test that reads a trained model's answers is marked `trains` (`make test` runs it under
ATEN_CPU_CAPABILITY=default as well as natively)."""

import itertools
import re
import warnings

import ipywidgets
import pytest
import torch
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure

from course_utils import i18n, seq2seq, viz, widgets
from course_utils.seq2seq import BOS, EOS, PAD
from course_utils.validation import ArgumentError
from course_utils.viz.seq2seq import MASKED_STYLE, NEEDED_COLOUR, decoding

pytestmark = pytest.mark.usefixtures("one_thread")  # as the notebooks run


@pytest.fixture(scope="module")
def untrained():
    return seq2seq.make_model(0).eval()


@pytest.fixture(scope="module")
def trained(one_thread):
    return seq2seq.train(seed=0).model


@pytest.fixture(autouse=True)
def close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def texts(figure):
    """Every title, axis label, tick label and legend text of `figure` (its own title and y label too)."""
    shown = [label.get_text() for label in (figure._suptitle, figure._supylabel) if label]
    for ax in figure.axes:
        shown += [ax.title.get_text(), ax.xaxis.label.get_text(), ax.yaxis.label.get_text()]
        shown += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
    for legend in figure.legends:
        shown += [t.get_text() for t in legend.get_texts()]
    return shown


def hatched_cells(ax):
    """The (row, column) cells an Axes covers with the masked style."""
    cells = set()
    for collection in ax.collections:
        if isinstance(collection, PatchCollection) and collection.get_hatch() == MASKED_STYLE["hatch"]:
            for path in collection.get_paths():
                (x0, y0), (x1, y1) = path.vertices.min(0), path.vertices.max(0)
                assert (x1 - x0, y1 - y0) == (1.0, 1.0)
                cells.add((round(y0 + 0.5), round(x0 + 0.5)))
    return cells


def masked_cells(keep):
    return {(i, j) for i, j in (~keep).nonzero().tolist()}


# ----------------------------------------------------------------------------- decoding one source


def test_the_maps_are_taken_on_what_the_decoder_read_while_it_answered(untrained):
    """target_in is BOS + the answer less its last token, and the decoder run teacher-forced on it
    picks the answer again at every step (row i is the step that chose answer token i)."""
    for source in ("abc", "jihgfedc", seq2seq.held_out().source[3]):
        result = decoding(untrained, source)
        T = len(result.answer)
        assert result.target_in[0] == BOS and torch.equal(result.target_in[1:], result.answer[:-1])
        with torch.no_grad():
            logits = untrained(result.source[None], result.target_in[None])[0]  # (T, VOCAB)
        chosen = logits.gather(-1, result.answer[:, None]).squeeze(-1)  # (T,)
        assert torch.all(chosen >= logits.max(-1).values - 1e-5)  # the answer's token is the top one (ties aside)
        H = result.self_weights.shape[0]
        assert result.self_weights.shape == (H, T, T) and result.cross_weights.shape == (H, T, len(result.source))


def test_masked_cells_get_exactly_zero_weight_and_the_rest_sum_to_one(untrained):
    result = decoding(untrained, "abc", pad_to=seq2seq.MAX_LENGTH + 1)
    assert seq2seq.show(result.source) == "abc⟩·····"
    assert torch.all(result.self_weights[:, ~result.target_keep] == 0)  # the future (causal)
    assert torch.all(result.cross_weights[:, ~result.source_keep] == 0)  # the source's padding
    assert torch.all(result.self_weights.triu(1) == 0)
    assert torch.all(result.cross_weights[..., 4:] == 0)
    for weights in (result.self_weights, result.cross_weights):
        assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)


def test_a_string_source_gets_its_end_token_and_a_held_out_row_keeps_its_padding(untrained):
    assert seq2seq.show(decoding(untrained, "cab").source) == "cab⟩"
    row = seq2seq.held_out().source[0]
    assert seq2seq.show(decoding(untrained, row).source) == seq2seq.show(row) == "gfehi⟩···"


# ----------------------------------------------------------------------------- decoder_maps


@pytest.mark.parametrize("lang, words", [
    ("en", ("head 0: self-attention (target mask)", "head 1: cross-attention (source mask)", "decoder input (key)",
            "source (key in memory)", "step: read → said (query)", "masked: weight exactly 0", "attention weight",
            "greedy decoding of abc⟩")),
    ("zh", ("头 0：自注意力（目标掩码）", "头 1：交叉注意力（源掩码）", "解码器的输入（键）", "源序列（memory 中的键）",
            "每一步：读入 → 输出（查询）", "被遮住：权重恰为 0", "注意力权重", "对 abc⟩ 贪心解码")),
])
def test_decoder_maps_draws_both_maps_of_every_head_in_the_notebooks_language(untrained, lang, words):
    i18n.set_language(lang)
    figure = viz.decoder_maps(untrained, "abc", pad_to=6)
    result = decoding(untrained, "abc", pad_to=6)
    H = result.self_weights.shape[0]
    assert isinstance(figure, Figure) and len(figure.axes) == 2 * H + 1  # the maps and the colour bar
    shown = texts(figure)
    for word in words:
        assert any(word in text for text in shown), (word, shown)
    if lang == "zh":
        assert not any(re.search(r"head|mask|source|query|key\b|weight", text) for text in shown), shown
    maps = figure.axes[: 2 * H]
    reads, says = seq2seq.show(result.target_in), seq2seq.show(result.answer)
    for h in range(H):
        left, right = maps[2 * h], maps[2 * h + 1]
        # each map is its head's weights, as an image, on the colour range [0, 1]
        assert torch.equal(torch.as_tensor(left.images[0].get_array().data), result.self_weights[h].double())
        assert torch.equal(torch.as_tensor(right.images[0].get_array().data), result.cross_weights[h].double())
        assert left.images[0].get_clim() == right.images[0].get_clim() == (0.0, 1.0)
        # tokens on the axes: what each step read and said on the rows; '⟨' + the answer so far, the source
        rows = [f"{r}→{s}" for r, s in zip(reads, says)]
        assert [t.get_text() for t in left.get_yticklabels()] == rows
        assert [t.get_text() for t in right.get_yticklabels()] == rows
        assert [t.get_text() for t in left.get_xticklabels()] == list(reads)
        assert [t.get_text() for t in right.get_xticklabels()] == list("abc⟩··")
        # the masked cells, and only they, are hatched
        assert hatched_cells(left) == masked_cells(result.target_keep)
        assert hatched_cells(right) == masked_cells(result.source_keep)
    assert hatched_cells(maps[1]) == {(i, j) for i in range(len(says)) for j in (4, 5)}


def test_decoder_maps_draws_on_a_given_empty_figure(untrained):
    figure = Figure()
    assert viz.decoder_maps(untrained, seq2seq.held_out().source[2], figure=figure) is figure
    assert [t.get_text() for t in figure.axes[1].get_xticklabels()] == list("dgjejjgb⟩")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_decoder_maps_names_its_bad_arguments(untrained, lang):
    i18n.set_language(lang)
    bad_sources = ["abk", "", "abcdefghi", 3, torch.tensor([3.0, 2.0]), torch.tensor([[3, 2]]),
                   torch.tensor([PAD, 3, EOS]), torch.tensor([3, 99]), torch.tensor([3] * 10)]
    for source in bad_sources:
        with pytest.raises(ArgumentError, match="decoder_maps") as error:
            viz.decoder_maps(untrained, source)
        assert "source" in str(error.value), source
    for pad_to in (3, 10, 5.0, True):  # "abc⟩" is 4 long; at most 9
        with pytest.raises(ArgumentError, match="pad_to"):
            viz.decoder_maps(untrained, "abc", pad_to=pad_to)
    with pytest.raises(ArgumentError, match="model"):
        viz.decoder_maps(torch.nn.Linear(2, 2), "abc")
    used = Figure()
    used.add_subplot()
    with pytest.raises(ArgumentError, match="figure"):
        viz.decoder_maps(untrained, "abc", figure=used)
    if lang == "zh":
        with pytest.raises(ArgumentError, match="参数 source") as error:
            viz.decoder_maps(untrained, "abk")
        assert "letters" not in str(error.value)


# ----------------------------------------------------------------------------- offset_bars


PROFILE = {-3: 0.0, -2: 0.01, -1: 0.1, 0: 0.52, 1: 0.22, 2: 0.1, 3: 0.02}


@pytest.mark.parametrize("lang, words", [("en", ("source position − needed position", "mean cross-attention weight")),
                                         ("zh", ("源位置 − 所需位置", "交叉注意力的平均权重"))])
def test_offset_bars_draws_one_bar_per_offset_in_the_notebooks_language(lang, words):
    i18n.set_language(lang)
    ax = viz.offset_bars(PROFILE, title="t")
    assert (ax.xaxis.label.get_text(), ax.yaxis.label.get_text()) == words
    assert ax.title.get_text() == "t"
    bars = ax.patches
    assert [round(b.get_x() + b.get_width() / 2) for b in bars] == list(PROFILE)
    assert [b.get_height() for b in bars] == list(PROFILE.values())
    centre = bars[list(PROFILE).index(0)]
    assert centre.get_facecolor() != bars[0].get_facecolor()
    assert centre.get_facecolor()[:3] == pytest.approx(tuple(int(NEEDED_COLOUR[k:k + 2], 16) / 255 for k in (1, 3, 5)))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["−3", "−2", "−1", "0", "+1", "+2", "+3"]


def test_offset_bars_draws_offset_profile_on_a_given_axes(untrained):
    batch = seq2seq.held_out(20)
    with torch.no_grad():
        _, (_, cross) = untrained(batch.source, batch.target_in, need_weights=True)
    profile = seq2seq.offset_profile(cross, batch)
    ax = Figure().subplots()
    assert viz.offset_bars(profile, ax=ax) is ax and len(ax.patches) == 7


def test_offset_bars_names_its_bad_argument():
    for bad in ({}, [0.5], {0: "x"}, {0.5: 0.1}, {True: 0.1}, {0: float("nan")}, None):
        with pytest.raises(ArgumentError, match="offset_bars.*profile"):
            viz.offset_bars(bad)


# ----------------------------------------------------------------------------- decoding_view


def test_decoding_view_shows_a_held_out_example_and_says_what_came_out(untrained):
    figure, summary = widgets.decoding_view(untrained, example=5)
    assert isinstance(figure, Figure) and len(figure.axes) == 5
    row = seq2seq.held_out().source[5]
    assert seq2seq.show(row) == "fed⟩·····"
    answer = seq2seq.show(decoding(untrained, row).answer)
    lines = summary.splitlines()
    assert lines[0] == "held-out example 5: source fed⟩"
    assert lines[1] == f"greedy answer {answer}, right answer def⟩: " + ("they agree" if answer == "def⟩" else "they differ")
    # the picture shows the source padded to a held-out batch's width
    assert [t.get_text() for t in figure.axes[1].get_xticklabels()] == list("fed⟩·····")


@pytest.mark.parametrize("lang, first, verdicts", [
    ("en", "your letters: source abcd⟩", ("they agree", "they differ")),
    ("zh", "你输入的字母：源序列 abcd⟩", ("二者一致", "二者不一致")),
])
def test_decoding_view_takes_your_own_letters(untrained, lang, first, verdicts):
    i18n.set_language(lang)
    figure, summary = widgets.decoding_view(untrained, example=7, text=" abcd ")
    lines = summary.splitlines()
    assert lines[0] == first and "dcba⟩" in lines[1] and lines[1].endswith(verdicts)
    assert [t.get_text() for t in figure.axes[1].get_xticklabels()] == list("abcd⟩····")
    assert not re.search(r"\d\.\d", summary)  # tokens and words only: the same on every machine


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_decoding_view_names_its_bad_arguments(untrained, lang):
    i18n.set_language(lang)
    for example in (-1, widgets.DECODING_EXAMPLES, True, "3", 2.0):
        with pytest.raises(ArgumentError, match="decoding_view.*example"):
            widgets.decoding_view(untrained, example=example)
    for text in ("abk", "ABC", "abcdefghi", "a b", None, 5):
        with pytest.raises(ArgumentError, match="decoding_view.*text"):
            widgets.decoding_view(untrained, text=text)
    with pytest.raises(ArgumentError, match="decoding_view.*model"):
        widgets.decoding_view(None)


def test_consecutive_held_out_examples_are_different_sources():
    """The browser test moves the slider one step and waits for the summary to change."""
    rows = [seq2seq.show(r) for r in seq2seq.held_out().source[: widgets.DECODING_EXAMPLES]]
    assert all(a != b for a, b in itertools.pairwise(rows))


@pytest.mark.trains
def test_the_trained_model_reverses_the_examples_the_lesson_shows(trained):
    """Seed 0 (what the notebook trains): the summary the lesson prints, word for word."""
    assert widgets.decoding_view(trained, text="abcdefgh")[1] == (
        "your letters: source abcdefgh⟩\ngreedy answer hgfedcba⟩, right answer hgfedcba⟩: they agree")
    assert widgets.decoding_view(trained, example=0)[1] == (
        "held-out example 0: source gfehi⟩\ngreedy answer ihefg⟩, right answer ihefg⟩: they agree")
    agree = sum("they agree" in widgets.decoding_view(trained, example=k)[1] for k in range(10))
    assert agree == 10


# ----------------------------------------------------------------------------- decoding_explorer


def test_the_explorer_builds_and_its_controls_change_the_summary(untrained):
    box = widgets.decoding_explorer(untrained, example=2)
    slider, text = box.children[0].children
    assert isinstance(slider, ipywidgets.IntSlider) and isinstance(text, ipywidgets.Text)
    assert (slider.min, slider.max, slider.value, text.value) == (0, widgets.DECODING_EXAMPLES - 1, 2, "")
    before, picture = box.summary.value, box.image.value
    assert "held-out example 2" in before and picture
    slider.value = 3  # what the browser test does: one step
    assert box.summary.value != before and box.image.value != picture
    assert "held-out example 3" in box.summary.value and "dgjejjgb⟩" not in box.summary.value
    text.value = "ab"
    assert "your letters" in box.summary.value and "ab⟩" in box.summary.value
    text.value = "abcdz"  # a message in the learner's words instead of a crash, and no picture
    assert "Type 1 to 8 letters from a to j" in box.summary.value and "abcdz" in box.summary.value
    assert "decoding_view" not in box.summary.value and "argument" not in box.summary.value
    assert box.image.layout.display == "none"
    text.value = "abcdefghij"  # too many
    assert "Type 1 to 8 letters" in box.summary.value and box.image.layout.display == "none"
    text.value = ""
    assert "held-out example 3" in box.summary.value and box.image.layout.display is None


def test_the_explorer_speaks_the_notebooks_language(untrained):
    i18n.set_language("zh")
    box = widgets.decoding_explorer(untrained)
    slider, text = box.children[0].children
    assert (slider.description, text.description) == ("样例", "字母") and "留空" in text.placeholder
    assert "留出样例 0" in box.summary.value
    text.value = "abz"
    assert "请输入 1 到 8 个 a 到 j 之间的字母" in box.summary.value and "decoding_view" not in box.summary.value


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_character_of_the_pictures_has_a_glyph(untrained, lang):
    """'⟨', '⟩', '·', '→', '−' and the Chinese labels all render (no missing-glyph warning)."""
    i18n.set_language(lang)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        viz.figure_png(widgets.decoding_view(untrained, example=3)[0])
        ax = Figure().subplots()
        viz.offset_bars(PROFILE, ax=ax)
        viz.figure_png(ax.figure)
