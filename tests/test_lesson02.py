"""Lesson 02: the mask explorer's view and widget, the mask pictures, and the lesson's exercises
beyond the generic checks of test_exercises.py."""

import re
import warnings

import ipywidgets as w
import pytest
import torch
from matplotlib.figure import Figure

from course_utils import evaluate, i18n, viz
from course_utils.exercises import EXERCISES, PASSED
from course_utils.validation import ArgumentError
from course_utils.widgets import MASK_MAX_LEN, mask_explorer, mask_view

LESSON02 = sorted(e for e in EXERCISES if e.startswith("02."))


def visible(summary):
    """The per-query visible-key counts of both sequences and the fully-masked-row count."""
    counts = [eval(found) for found in re.findall(r"\[[\d, ]*\]", summary)]
    hidden = int(re.search(r"fully masked rows: (\d+)", summary).group(1))
    return counts, hidden


# ----------------------------------------------------------------------------- mask_view

def test_padding_only_every_query_sees_the_real_tokens():
    figure, summary = mask_view(length_1=6, length_2=3, causal=False)
    assert isinstance(figure, Figure) and len(figure.axes) >= 4
    assert visible(summary) == ([[6] * 6, [3] * 6], 0)
    assert "lengths (6, 3)" in summary and "causal mask: False" in summary


def test_causal_counts_grow_along_the_queries_up_to_the_length():
    _, summary = mask_view(length_1=4, length_2=2, causal=True)
    assert visible(summary) == ([[1, 2, 3, 4, 4, 4], [1, 2, 2, 2, 2, 2]], 0)


def test_an_empty_sequence_gives_fully_masked_rows_with_zero_weights():
    figure, summary = mask_view(length_1=0, length_2=5, causal=True)
    assert visible(summary) == ([[0] * 6, [1, 2, 3, 4, 5, 5]], 6)
    weights = figure.axes[1].images[0].get_array()  # the weights heatmap of sequence 1
    assert float(abs(weights).sum()) == 0.0


def test_the_summary_changes_with_the_lengths_and_with_causal():
    summaries = {mask_view(length_1=a, length_2=b, causal=c)[1] for a in (2, 6) for b in (1, 5) for c in (False, True)}
    assert len(summaries) == 8


def test_the_weights_rows_sum_to_one_and_hide_the_padding():
    figure, _ = mask_view(length_1=5, length_2=2, causal=False)
    for ax, length in ((figure.axes[1], 5), (figure.axes[3], 2)):
        weights = torch.tensor(ax.images[0].get_array().data)
        torch.testing.assert_close(weights.sum(-1), torch.ones(MASK_MAX_LEN, dtype=weights.dtype))
        assert bool((weights[:, length:] == 0).all())


@pytest.mark.parametrize("bad", [-1, MASK_MAX_LEN + 1, 2.0, True, "3"])
def test_a_bad_length_gets_a_clear_error(bad):
    with pytest.raises(ArgumentError, match="mask_view: argument 'length_2'"):
        mask_view(length_1=3, length_2=bad)


def test_the_view_speaks_chinese_and_renders_without_missing_glyphs():
    i18n.set_language("zh")
    figure, summary = mask_view(length_1=3, length_2=6, causal=True)
    assert "因果掩码" in summary and "全遮蔽行" in summary
    assert figure.axes[0].get_title() == "保留掩码，序列 1"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        viz.figure_png(figure)


# ----------------------------------------------------------------------------- mask_explorer

def test_the_explorer_is_two_int_sliders_then_a_checkbox_and_moving_the_first_changes_the_summary():
    box = mask_explorer()
    controls, image, summary = box.children
    first, second, causal = controls.children
    assert isinstance(first, w.IntSlider) and isinstance(second, w.IntSlider) and isinstance(causal, w.Checkbox)
    assert (first.min, first.max, first.value, second.value, causal.value) == (0, MASK_MAX_LEN, 6, 3, False)
    assert image.value[:8] == b"\x89PNG\r\n\x1a\n"
    before_image, before_text = image.value, summary.value
    first.value = 2
    assert summary.value != before_text and image.value != before_image
    assert "lengths (2, 3)" in summary.value
    causal.value = True
    assert mask_view(length_1=2, length_2=3, causal=True)[1] in summary.value


# ----------------------------------------------------------------------------- pictures

def test_mask_picture_draws_kept_cells_light_and_hidden_cells_dark():
    ax = viz.mask_picture(torch.tensor([[True, False], [True, True]]))
    assert ax.images[0].get_array().tolist() == [[1.0, 0.0], [1.0, 1.0]]


def test_head_slots_follow_the_two_orders():
    # head-major Q/K/V: slot n = h·B + b; seed 002's mask is batch-major: slot n holds item n // H
    assert viz.head_slots(3, 2, "batch") == [(0, 0, 0), (0, 1, 0), (0, 2, 1), (1, 0, 1), (1, 1, 2), (1, 2, 2)]
    assert all(item == mask_item for _, item, mask_item in viz.head_slots(3, 2, "head"))
    assert all(item == mask_item for _, item, mask_item in viz.head_slots(1, 4, "batch"))  # B = 1 hides it
    # the same slots as torch's own reshapes give
    B, H = 3, 2
    qkv_item = torch.arange(B).view(B, 1, 1).expand(B, 1, H).permute(2, 0, 1).reshape(H * B)  # (B, L, H) -> (H·B)
    mask_item = torch.arange(B).view(B, 1).repeat(1, H).view(B * H)
    assert [(i, m) for _, i, m in viz.head_slots(B, H, "batch")] == list(zip(qkv_item.tolist(), mask_item.tolist()))


def test_head_batch_picture_marks_the_mismatched_slots():
    ax = viz.head_batch_picture(3, 2, mask_order="batch")
    marks = [t.get_text() for t in ax.texts if t.get_text() in ("✓", "✗")]
    assert marks == ["✓", "✗", "✗", "✗", "✗", "✓"]
    ax = viz.head_batch_picture(3, 2, mask_order="head")
    assert [t.get_text() for t in ax.texts if t.get_text() in ("✓", "✗")] == ["✓"] * 6


# ----------------------------------------------------------------------------- exercises

def test_lesson02_has_its_exercises_and_the_required_mistake_codes():
    assert LESSON02 == ["02.causal_mask", "02.decoder_mask", "02.masked_softmax"]
    codes = {code for e in LESSON02 for code in (m.code for m in EXERCISES[e].mistakes)}
    assert {"MASK_INVERTED", "HIDES_DIAGONAL", "SHOWS_FUTURE", "OFF_BY_ONE", "NAN_ON_FULLY_MASKED"} <= codes


def test_the_cases_cover_length_one_unequal_lengths_and_fully_masked_rows():
    causal = EXERCISES["02.causal_mask"].cases(None)
    assert (1, 1) in causal and any(l_q < l_k for l_q, l_k in causal) and any(l_q > l_k for l_q, l_k in causal)
    decoder = EXERCISES["02.decoder_mask"].cases(None)
    assert any(int(lengths.min()) == 0 for lengths, _ in decoder) and any(n == 1 for _, n in decoder)
    spec = EXERCISES["02.masked_softmax"]
    softmax_cases = spec.cases(torch.Generator().manual_seed(spec.seed))
    hidden_rows = [int((~keep.expand(scores.shape).any(-1)).sum()) for scores, keep in softmax_cases]
    assert sum(count > 0 for count in hidden_rows) >= 3
    assert any(scores.shape[-1] != scores.shape[-2] for scores, _ in softmax_cases)


# Other ways learners write the same thing: right ones pass, wrong ones are named.

def test_other_correct_answers_pass():
    def causal_by_tril(L_q, L_k):
        return torch.tril(torch.ones(L_q, L_k)).bool()

    def decoder_by_loops(lengths, max_len):
        keep = torch.zeros(len(lengths), 1, max_len, max_len, dtype=torch.bool)
        for b, n in enumerate(lengths.tolist()):
            for i in range(max_len):
                keep[b, 0, i, : min(i + 1, n)] = True
        return keep

    def softmax_with_nan_to_num(scores, keep_mask):
        return scores.masked_fill(~keep_mask, float("-inf")).softmax(-1).nan_to_num(0.0)

    assert evaluate("02.causal_mask", causal_by_tril).status == PASSED
    assert evaluate("02.decoder_mask", decoder_by_loops).status == PASSED
    assert evaluate("02.masked_softmax", softmax_with_nan_to_num).status == PASSED


def test_other_spellings_of_the_mistakes_are_named():
    assert evaluate("02.causal_mask", lambda L_q, L_k: torch.ones(L_q, L_k).triu(1).bool()).code == "MASK_INVERTED"
    assert evaluate("02.causal_mask", lambda L_q, L_k: torch.ones(L_q, L_k).tril(-1) > 0).code == "HIDES_DIAGONAL"
    assert evaluate(
        "02.causal_mask", lambda L_q, L_k: torch.arange(L_k)[None, :] >= torch.arange(L_q)[:, None]
    ).code == "SHOWS_FUTURE"

    def decoder_off_by_one(lengths, max_len):
        real = torch.arange(1, max_len + 1) <= lengths[:, None] + 1
        return real[:, None, None, :] & torch.ones(max_len, max_len, dtype=torch.bool).tril()

    assert evaluate("02.decoder_mask", decoder_off_by_one).code == "OFF_BY_ONE"

    def softmax_naive(scores, keep_mask):
        return torch.softmax(torch.where(keep_mask, scores, torch.tensor(float("-inf"))), dim=-1)

    def softmax_minus_1e9(scores, keep_mask):
        return torch.softmax(scores + (~keep_mask) * -1e9, dim=-1)

    assert evaluate("02.masked_softmax", softmax_naive).code == "NAN_ON_FULLY_MASKED"
    assert evaluate("02.masked_softmax", softmax_minus_1e9).code == "FINITE_FILL"
