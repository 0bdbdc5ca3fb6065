"""Lesson 02: the mask explorer's view and widget, the mask pictures, and the lesson's exercises
beyond the generic checks of test_exercises.py."""

import re
import warnings

import ipywidgets as w
import pytest
import torch
from matplotlib.figure import Figure

from course_teacher.exercises import EXERCISES
from course_utils import evaluate, i18n, viz
from course_utils.exercises import FAILED, PASSED
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
    assert "lengths (6, 3)" in summary and "causal mask: off" in summary
    assert "causal mask: on" in mask_view(length_1=6, length_2=3, causal=True)[1]


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
    assert "因果掩码：开" in summary and "全遮蔽行" in summary
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
    # head-major Q/K/V: slot n = h·B + b; the tutorial's mask is batch-major: slot n holds item n // H
    assert viz.head_slots(3, 2, "batch") == [(0, 0, 0), (0, 1, 0), (0, 2, 1), (1, 0, 1), (1, 1, 2), (1, 2, 2)]
    assert all(item == mask_item for _, item, mask_item in viz.head_slots(3, 2, "head"))
    assert all(item == mask_item for _, item, mask_item in viz.head_slots(1, 4, "batch"))  # B = 1 hides it
    # the same slots as torch's own reshapes give
    B, H = 3, 2
    qkv_item = torch.arange(B).view(B, 1, 1).expand(B, 1, H).permute(2, 0, 1).reshape(H * B)  # (B, L, H) -> (H·B)
    mask_item = torch.arange(B).view(B, 1).repeat(1, H).view(B * H)
    assert [(i, m) for _, i, m in viz.head_slots(B, H, "batch")] == list(zip(qkv_item.tolist(), mask_item.tolist()))


def test_head_slots_with_batch_major_qkv_match_a_batch_major_mask_like_multihead_attention():
    B, H = 3, 2
    assert all(item == mask_item for _, item, mask_item in viz.head_slots(B, H, "batch", qkv_order="batch"))
    assert any(item != mask_item for _, item, mask_item in viz.head_slots(B, H, "head", qkv_order="batch"))
    # slot n = b·H + h, what permute(0, 2, 1, 3) on (B, L, H, D) then a view gives
    qkv_item = torch.arange(B).view(B, 1, 1).expand(B, 1, H).permute(0, 2, 1).reshape(B * H)
    qkv_head = torch.arange(H).view(1, 1, H).expand(B, 1, H).permute(0, 2, 1).reshape(B * H)
    assert [(h, i) for h, i, _ in viz.head_slots(B, H, "batch", qkv_order="batch")] == list(
        zip(qkv_head.tolist(), qkv_item.tolist())
    )


def test_head_batch_picture_marks_the_mismatched_slots():
    ax = viz.head_batch_picture(3, 2, mask_order="batch")
    marks = [t.get_text() for t in ax.texts if t.get_text() in ("✓", "✗")]
    assert marks == ["✓", "✗", "✗", "✗", "✗", "✓"]
    ax = viz.head_batch_picture(3, 2, mask_order="head")
    assert [t.get_text() for t in ax.texts if t.get_text() in ("✓", "✗")] == ["✓"] * 6
    ax = viz.head_batch_picture(3, 2, mask_order="batch", qkv_order="batch")
    assert [t.get_text() for t in ax.texts if t.get_text() in ("✓", "✗")] == ["✓"] * 6
    assert any("b·H + h" in t.get_text() and "Q, K, V" in t.get_text() for t in ax.texts)


# ----------------------------------------------------------------------------- exercises

def test_lesson02_has_its_exercises_and_the_required_mistake_codes():
    assert LESSON02 == ["02.causal_mask", "02.decoder_mask", "02.masked_softmax"]
    codes = {e: {m.code for m in EXERCISES[e].mistakes} for e in LESSON02}
    assert {"MASK_INVERTED", "HIDES_DIAGONAL", "SHOWS_FUTURE", "BOTTOM_RIGHT", "IGNORES_L_K", "FLOAT_MASK",
            "ADDITIVE_MASK"} <= codes["02.causal_mask"]
    assert {"OFF_BY_ONE", "IGNORES_MAX_LEN", "HIDES_PADDED_QUERIES", "NO_HEAD_AXIS"} <= codes["02.decoder_mask"]
    assert {"NAN_ON_FULLY_MASKED", "FINITE_FILL", "SOFTMAX_DIM", "NO_KEEPDIM"} <= codes["02.masked_softmax"]


def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


def test_the_causal_cases_vary_each_length_on_its_own():
    cases = _cases("02.causal_mask")
    assert (1, 1) in cases and any(l_q < l_k for l_q, l_k in cases) and any(l_q > l_k for l_q, l_k in cases)
    assert any(a[1] == b[1] and a[0] != b[0] for a in cases for b in cases)  # L_q changes, L_k fixed
    assert any(a[0] == b[0] and a[1] != b[1] for a in cases for b in cases)  # L_k changes, L_q fixed


def test_the_decoder_cases_pad_beyond_the_longest_sequence_and_cover_batch_one_and_length_zero():
    cases = _cases("02.decoder_mask")
    assert any(max_len > int(lengths.max()) for lengths, max_len in cases)  # so ignoring max_len fails
    assert any(len(lengths) == 1 for lengths, _ in cases) and any(max_len == 1 for _, max_len in cases)
    assert any(int(lengths.min()) == 0 for lengths, _ in cases)
    assert all(lengths.dtype == torch.int64 for lengths, _ in cases)  # as the docstring says


def test_the_masked_softmax_cases_have_fully_masked_rows_far_apart_rows_and_both_dtypes():
    cases = _cases("02.masked_softmax")
    hidden_rows = [int((~keep.expand(scores.shape).any(-1)).sum()) for scores, keep in cases]
    assert sum(count > 0 for count in hidden_rows) >= 3
    assert any(scores.shape[-1] != scores.shape[-2] for scores, _ in cases)
    assert {scores.dtype for scores, _ in cases} == {torch.float32, torch.float64}
    assert any(keep.dim() == 1 for _, keep in cases) and any(keep.dim() < scores.dim() for scores, keep in cases)
    # rows whose largest scores are far apart in one float32 case: exp without subtracting the maximum overflows
    spread = [scores.amax(-1).max() - scores.amax(-1).min() for scores, _ in cases if scores.dtype == torch.float32]
    assert max(spread) > 150


def test_the_reference_outputs_have_the_documented_dtypes():
    assert all(EXERCISES["02.causal_mask"].reference(*case).dtype == torch.bool for case in _cases("02.causal_mask"))
    assert all(EXERCISES["02.decoder_mask"].reference(*case).dtype == torch.bool for case in _cases("02.decoder_mask"))
    for scores, keep in _cases("02.masked_softmax"):
        assert EXERCISES["02.masked_softmax"].reference(scores, keep).dtype == scores.dtype


# Other ways learners write the same thing: right ones pass, wrong ones are named or told what differs.

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
        # NaN on fully masked rows, then 0: right, gradients too (masked_fill's backward stops the NaN)
        return scores.masked_fill(~keep_mask, float("-inf")).softmax(-1).nan_to_num(0.0)

    def softmax_minus_1e9_then_zero_rows(scores, keep_mask):
        # a finite fill is right in float32 and float64 once fully masked rows are zeroed
        hidden = ~keep_mask.any(dim=-1, keepdim=True)
        return scores.masked_fill(~keep_mask, -1e9).softmax(-1).masked_fill(hidden, 0.0)

    assert evaluate("02.causal_mask", causal_by_tril).status == PASSED
    assert evaluate("02.decoder_mask", decoder_by_loops).status == PASSED
    for right in (softmax_with_nan_to_num, softmax_minus_1e9_then_zero_rows):
        verdict = evaluate("02.masked_softmax", right)
        assert verdict.status == PASSED, verdict.message


def test_other_spellings_of_the_mistakes_are_named():
    assert evaluate("02.causal_mask", lambda L_q, L_k: torch.ones(L_q, L_k).triu(1).bool()).code == "MASK_INVERTED"
    assert evaluate("02.causal_mask", lambda L_q, L_k: torch.ones(L_q, L_k).tril(-1) > 0).code == "HIDES_DIAGONAL"
    assert evaluate(
        "02.causal_mask", lambda L_q, L_k: torch.arange(L_k)[None, :] >= torch.arange(L_q)[:, None]
    ).code == "SHOWS_FUTURE"
    assert evaluate("02.causal_mask", lambda L_q, L_k: torch.tril(torch.ones(L_q, L_q)) > 0).code == "IGNORES_L_K"
    assert evaluate("02.causal_mask", lambda L_q, L_k: torch.tril(torch.ones(L_q, L_k))).code == "FLOAT_MASK"
    assert evaluate(
        "02.causal_mask", lambda L_q, L_k: torch.full((L_q, L_k), float("-inf")).triu(1)
    ).code == "ADDITIVE_MASK"

    def decoder_off_by_one(lengths, max_len):
        real = torch.arange(1, max_len + 1) <= lengths[:, None] + 1
        return real[:, None, None, :] & torch.ones(max_len, max_len, dtype=torch.bool).tril()

    def decoder_from_the_longest(lengths, max_len):
        L = int(lengths.max())
        return (torch.arange(L) < lengths[:, None])[:, None, None, :] & torch.ones(L, L, dtype=torch.bool).tril()

    def decoder_without_head_axis(lengths, max_len):
        return (torch.arange(max_len) < lengths[:, None])[:, None, :] & torch.ones(max_len, max_len).tril().bool()

    def decoder_hiding_padded_queries_and_keys(lengths, max_len):
        real = torch.arange(max_len) < lengths[:, None]  # (B, L)
        causal = torch.ones(max_len, max_len, dtype=torch.bool).tril()
        return real[:, None, :, None] & real[:, None, None, :] & causal

    assert evaluate("02.decoder_mask", decoder_off_by_one).code == "OFF_BY_ONE"
    assert evaluate("02.decoder_mask", decoder_from_the_longest).code == "IGNORES_MAX_LEN"
    assert evaluate("02.decoder_mask", decoder_without_head_axis).code == "NO_HEAD_AXIS"
    assert evaluate("02.decoder_mask", decoder_hiding_padded_queries_and_keys).code == "HIDES_PADDED_QUERIES"

    def softmax_naive(scores, keep_mask):
        return torch.softmax(torch.where(keep_mask, scores, torch.tensor(float("-inf"))), dim=-1)

    def softmax_minus_1e9(scores, keep_mask):
        return torch.softmax(scores + (~keep_mask) * -1e9, dim=-1)

    def softmax_over_queries(scores, keep_mask):
        hidden = ~keep_mask.any(dim=-1, keepdim=True)
        filled = torch.where(keep_mask, scores, float("-inf")).masked_fill(hidden, 0.0)
        return torch.softmax(filled, dim=-2).masked_fill(hidden, 0.0)

    def softmax_without_keepdim(scores, keep_mask):
        hidden = ~keep_mask.any(dim=-1)
        filled = scores.masked_fill(~keep_mask, float("-inf")).masked_fill(hidden, 0.0)
        return filled.softmax(dim=-1).masked_fill(hidden, 0.0)

    assert evaluate("02.masked_softmax", softmax_naive).code == "NAN_ON_FULLY_MASKED"
    assert evaluate("02.masked_softmax", softmax_minus_1e9).code == "FINITE_FILL"
    assert evaluate("02.masked_softmax", softmax_over_queries).code == "SOFTMAX_DIM"
    assert evaluate("02.masked_softmax", softmax_without_keepdim).code == "NO_KEEPDIM"


def test_an_answer_that_ignores_one_argument_fails():
    assert evaluate("02.causal_mask", lambda L_q, L_k: torch.ones(L_k, L_k, dtype=torch.bool).tril()).status == FAILED
    assert evaluate("02.masked_softmax", lambda scores, keep_mask: scores.softmax(-1)).status == FAILED


def test_right_values_with_nan_gradients_fail_on_the_gradient():
    """An additive -inf mask gives the right values once nan_to_num cleans the output, but the
    fully masked rows send NaN back into the scores."""
    def additive_then_nan_to_num(scores, keep_mask):
        additive = torch.zeros(keep_mask.shape).masked_fill(~keep_mask, float("-inf"))
        return (scores + additive).softmax(-1).nan_to_num(0.0)

    verdict = evaluate("02.masked_softmax", additive_then_nan_to_num)
    assert verdict.status == FAILED and verdict.code == "GRADIENT", verdict.message
    assert "NaN" in verdict.message


def test_weights_renormalised_after_the_softmax_fail_where_a_hidden_key_outscores_the_kept_ones():
    """Renormalising after masking is right in exact arithmetic, and nan_to_num hides the 0/0 of
    fully masked rows; but where a hidden key scores far above the kept ones (the padded case,
    +120), the kept weights underflow to 0 before the division: the values are wrong there."""
    def renormalised(scores, keep_mask):
        weights = scores.softmax(-1) * keep_mask
        return (weights / weights.sum(-1, keepdim=True)).nan_to_num(0.0)

    verdict = evaluate("02.masked_softmax", renormalised)
    assert verdict.status == FAILED and "Case 6 (scores (1, 3, 4, 5)" in verdict.message, verdict.message
    def renormalised_with_nan(scores, keep_mask):
        weights = scores.softmax(-1) * keep_mask
        return weights / weights.sum(-1, keepdim=True)

    assert evaluate("02.masked_softmax", renormalised_with_nan).code == "RENORMALISED_AFTER_SOFTMAX"


def test_a_softmax_without_the_maximum_subtracted_fails():
    def exp_over_sum(scores, keep_mask):
        e = scores.exp() * keep_mask
        return (e / e.sum(-1, keepdim=True)).nan_to_num(0.0)

    assert evaluate("02.masked_softmax", exp_over_sum).status == FAILED


def test_the_bottom_right_hint_says_when_bottom_right_is_right():
    (mistake,) = [m for m in EXERCISES["02.causal_mask"].mistakes if m.code == "BOTTOM_RIGHT"]
    assert "right when the queries are the last" in mistake.hint["en"] and "causal_lower_right" in mistake.hint["en"]
    assert "这样对齐是对的" in mistake.hint["zh"]
