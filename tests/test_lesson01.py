"""Lesson 01: the scaling explorer's view and widget, the lesson's exercises beyond the generic
checks of test_exercises.py, and the lesson's solutions against their checks."""

import re
import warnings

import ipywidgets as w
import pytest
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from course_utils import evaluate, i18n, viz
from course_utils.exercises import EXERCISES, PASSED
from course_utils.validation import ArgumentError
from course_utils.widgets import D_K_CHOICES, scaling_explorer, scaling_view

LESSON01 = sorted(e for e in EXERCISES if e.startswith("01."))


def numbers(summary):
    """The std, query 0's largest weight and the mean largest weight a scaling summary states."""
    found = [float(x) for x in re.findall(r"\d+\.\d+", summary)]
    assert len(found) == 3, summary
    return found


# ----------------------------------------------------------------------------- scaling_view

def test_unscaled_scores_spread_like_sqrt_d_k_and_the_softmax_saturates():
    figure, summary = scaling_view(d_k=512, scaled=False)
    std, top, mean_top = numbers(summary)
    assert isinstance(figure, Figure)
    assert 0.9 * 512**0.5 < std < 1.1 * 512**0.5
    assert top > 0.95 and mean_top > 0.9
    assert "d_k = 512" in summary and "not scaled" in summary


def test_scaled_scores_keep_unit_spread_and_the_weights_stay_spread_out():
    for d_k in (1, 8, 64, 512):
        _, summary = scaling_view(d_k=d_k, scaled=True)
        std, top, mean_top = numbers(summary)
        assert 0.9 < std < 1.1, summary
        assert mean_top < 0.35, summary


def test_the_largest_weight_grows_with_d_k_only_without_scaling():
    unscaled = [numbers(scaling_view(d_k=d, scaled=False)[1])[2] for d in (1, 16, 512)]
    scaled = [numbers(scaling_view(d_k=d, scaled=True)[1])[2] for d in (1, 16, 512)]
    assert unscaled[0] < unscaled[1] < unscaled[2]
    assert max(scaled) - min(scaled) < 0.1


def test_at_d_k_1_scaling_changes_nothing():
    assert numbers(scaling_view(d_k=1, scaled=False)[1]) == numbers(scaling_view(d_k=1, scaled=True)[1])


def test_the_view_is_the_same_every_time_and_leaves_the_global_generator_alone():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    first = scaling_view(d_k=64, scaled=False)[1]
    assert torch.equal(torch.rand(3), expected)
    assert scaling_view(d_k=64, scaled=False)[1] == first


def test_the_figure_shows_the_histogram_and_one_querys_weights():
    figure, _ = scaling_view(d_k=32, scaled=True, keys=12)
    histogram, bars = figure.axes
    assert len(histogram.patches) == 40
    heights = [patch.get_height() for patch in bars.patches]
    assert len(heights) == 12
    assert abs(sum(heights) - 1) < 1e-6 and min(heights) > 0
    assert bars.get_ylim() == (0.0, 1.0)


def test_the_summary_and_labels_follow_the_language():
    i18n.set_language("zh")
    figure, summary = scaling_view(d_k=16, scaled=True)
    assert "标准差" in summary and "除以 √d_k" in summary
    assert figure.axes[1].get_ylabel() == "权重"


def test_chinese_labels_render_without_missing_glyphs():
    i18n.set_language("zh")
    for scaled in (False, True):
        figure, _ = scaling_view(d_k=16, scaled=scaled)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
            viz.figure_png(figure)


@pytest.mark.parametrize("bad", [0, -4, 2.0, True, "64"])
def test_a_bad_d_k_gets_a_clear_error(bad):
    with pytest.raises(ArgumentError, match="scaling_view: argument 'd_k'"):
        scaling_view(d_k=bad)


# ----------------------------------------------------------------------------- scaling_explorer

def test_the_explorer_is_a_slider_over_powers_of_two_and_a_checkbox():
    box = scaling_explorer()
    controls, image, summary = box.children
    slider, checkbox = controls.children
    assert isinstance(box, w.VBox) and isinstance(image, w.Image) and isinstance(summary, w.HTML)
    assert isinstance(slider, w.SelectionSlider) and isinstance(checkbox, w.Checkbox)
    assert tuple(slider.options) == D_K_CHOICES == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    assert slider.value == 64 and checkbox.value is False
    assert image.value[:8] == b"\x89PNG\r\n\x1a\n"


def test_moving_the_controls_updates_the_picture_and_the_summary():
    box = scaling_explorer()
    slider, checkbox = box.children[0].children
    before_image, before_text = box.image.value, box.summary.value
    slider.value = 512
    assert "d_k = 512" in box.summary.value and box.image.value != before_image
    unscaled = box.summary.value
    checkbox.value = True
    assert box.summary.value != unscaled and "divided by" in box.summary.value
    assert "d_k = 64" in before_text
    # the widget shows exactly what the view returns
    assert scaling_view(d_k=512, scaled=True)[1] in box.summary.value.replace("&#x27;", "'")


# ----------------------------------------------------------------------------- exercises

def test_lesson01_has_the_required_mistake_codes():
    codes = {e: {m.code for m in EXERCISES[e].mistakes} for e in LESSON01}
    assert {"NO_SCALE", "SCALE_DK", "SOFTMAX_DIM", "TRANSPOSE"} <= codes["01.scaled_dot"]
    assert {"NO_MAX_SHIFT", "WRONG_DIM", "KEEPDIM_MISSING"} <= codes["01.softmax"]
    assert {"TANH_MISSING", "TRANSPOSED", "NOT_PAIRWISE"} <= codes["01.additive_scores"]


def test_the_softmax_cases_overflow_a_naive_softmax():
    cases = EXERCISES["01.softmax"].cases(torch.Generator().manual_seed(0))
    assert any(torch.isinf(scores.exp()).any() for (scores,) in cases)
    assert any((scores.exp() == 0).all(dim=-1).any() for (scores,) in cases)


# Other ways learners write the same thing: right ones pass, wrong ones are named.

def test_other_correct_softmaxes_pass():
    def with_max_values(s):
        e = torch.exp(s - s.max(dim=-1, keepdim=True).values)
        return e / e.sum(-1, keepdim=True)

    def with_logsumexp(s):
        return torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))

    for function in (with_max_values, with_logsumexp, lambda s: F.softmax(s, dim=-1)):
        assert evaluate("01.softmax", function).status == PASSED


def test_other_spellings_of_softmax_mistakes_are_named():
    def naive(s):
        return torch.exp(s) / torch.sum(torch.exp(s), dim=-1, keepdim=True)

    def over_queries(s):
        e = torch.exp(s - s.max(dim=-2, keepdim=True).values)
        return e / e.sum(dim=-2, keepdim=True)

    def forgot_keepdim(s):
        e = torch.exp(s - s.max(dim=-1).values)
        return e / e.sum(dim=-1)

    assert evaluate("01.softmax", naive).code == "NO_MAX_SHIFT"
    assert evaluate("01.softmax", over_queries).code == "WRONG_DIM"
    assert evaluate("01.softmax", forgot_keepdim).code == "KEEPDIM_MISSING"


def test_the_mlp_on_the_concatenation_passes_the_additive_check():
    def concatenated(query, key, w_query, w_key, v):
        B, L_q, d_q = query.shape
        L_k, d_k = key.shape[1:]
        pairs = torch.cat(
            [query.unsqueeze(2).expand(B, L_q, L_k, d_q), key.unsqueeze(1).expand(B, L_q, L_k, d_k)], dim=-1
        )
        return torch.tanh(pairs @ torch.cat([w_query, w_key])) @ v

    assert evaluate("01.additive_scores", concatenated).status == PASSED


def test_other_spellings_of_additive_mistakes_are_named():
    def no_tanh(query, key, w_query, w_key, v):
        return (query @ w_query)[:, :, None, :] @ v[:, None] + ((key @ w_key) @ v)[:, None, :, None]

    def einsum_transposed(query, key, w_query, w_key, v):
        hidden = torch.tanh((query @ w_query)[:, None] + (key @ w_key)[:, :, None])
        return torch.einsum("bkqh,h->bkq", hidden, v)

    assert evaluate("01.additive_scores", lambda *a: no_tanh(*a).squeeze(-1)).code == "TANH_MISSING"
    assert evaluate("01.additive_scores", einsum_transposed).code == "TRANSPOSED"


def test_attention_with_bmm_and_functional_softmax_passes():
    def with_bmm(query, key, value):
        weights = F.softmax(torch.bmm(query, key.permute(0, 2, 1)) / query.size(-1) ** 0.5, dim=-1)
        return torch.bmm(weights, value), weights

    assert evaluate("01.scaled_dot", with_bmm).status == PASSED
