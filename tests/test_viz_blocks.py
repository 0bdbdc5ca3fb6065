"""Lesson 06, sections 4 and 6: the plots of course_utils.viz.blocks (the decoder's two masks, a layer's
multiply-adds by part), in both languages and with bad arguments named; and the facts section 4 states that
rest on float arithmetic (PyTorch's decoder layer agrees, masked keys get exactly zero weight, a later target
token or a padded source position changes nothing earlier, PyTorch's tgt_is_causal hint), proved over ten
seeds (marked `trains`, so `make test` runs them under ATEN_CPU_CAPABILITY=default as well as natively).
Section 6's facts are exact integer counts, checked here once at the lesson's sizes."""

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure
from torch import nn

from course_utils import i18n, viz
from course_utils.masks import causal_mask
from course_utils.transformer import DecoderLayer, EncoderLayer, flops, parameter_count
from course_utils.validation import ArgumentError

SEEDS = range(10)
trains = pytest.mark.trains

pytestmark = pytest.mark.usefixtures("one_thread")  # as the notebooks run


def lesson_masks(source_lengths=(6, 3), target_lengths=(3, 5)):
    """The keep masks of section 4's batch: target (B, L_t, L_t), source (B, L_t, L_s)."""
    source_lengths, target_lengths = torch.tensor(source_lengths), torch.tensor(target_lengths)
    L_s, L_t = int(source_lengths.max()), int(target_lengths.max())
    real_target = torch.arange(L_t) < target_lengths[:, None]  # (B, L_t)
    real_source = torch.arange(L_s) < source_lengths[:, None]  # (B, L_s)
    return causal_mask(L_t) & real_target[:, None, :], real_source[:, None, :].expand(-1, L_t, -1)


def texts(figure):
    return [t.get_text() for ax in figure.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]


# ----------------------------------------------------------------------------- the decoder's two masks


@pytest.mark.parametrize("lang, words", [("en", ("item 1: target mask", "source mask (cross-attention)",
                                                 "target position (query)", "key in memory")),
                                         ("zh", ("样本 1：目标掩码", "源掩码（交叉注意力）", "目标位置（查询）",
                                                 "memory 中的键"))])
def test_decoder_masks_draws_both_masks_of_every_item_in_the_notebooks_language(lang, words):
    i18n.set_language(lang)
    target, memory = lesson_masks()
    figure = viz.decoder_masks(target, memory)
    assert isinstance(figure, Figure) and len(figure.axes) == 4
    shown = texts(figure)
    for word in words:
        assert any(word in text for text in shown), (word, shown)
    if lang == "zh":
        assert not any("item" in text or "target" in text for text in shown)
    # each panel is its item's mask, as an image: light (1) where it may attend
    for ax, mask in zip(figure.axes, [target[0], memory[0], target[1], memory[1]]):
        assert torch.equal(torch.as_tensor(ax.images[0].get_array().data), mask.float().double())
    # the columns are as wide as L_t and L_s, so the cells are square
    left, right = figure.axes[0].get_position(), figure.axes[1].get_position()
    assert right.width / left.width == pytest.approx(6 / 5, rel=1e-6)
    plt.close(figure)


def test_decoder_masks_draws_one_item_and_on_given_axes():
    target, memory = lesson_masks((4,), (2,))
    axes = Figure().subplots(1, 2, squeeze=False)
    figure = viz.decoder_masks(target[0], memory[0], axes=axes)  # 2-D masks: one item
    assert figure is axes[0, 0].figure and len(axes[0, 0].images) == len(axes[0, 1].images) == 1


def test_decoder_masks_names_its_bad_arguments():
    target, memory = lesson_masks()
    with pytest.raises(ArgumentError, match="'target_keep'.*bool keep mask"):
        viz.decoder_masks(target.float(), memory)
    with pytest.raises(ArgumentError, match="'memory_keep'.*bool keep mask"):
        viz.decoder_masks(target, ~memory[None])  # 4-D
    with pytest.raises(ArgumentError, match="'target_keep'.*square"):
        viz.decoder_masks(memory, memory)
    with pytest.raises(ArgumentError, match="'memory_keep'.*B = 2 items and L_t = 5"):
        viz.decoder_masks(target, memory[:1])
    with pytest.raises(ArgumentError, match="'memory_keep'.*L_t = 5"):
        viz.decoder_masks(target, memory[:, :4])
    with pytest.raises(ArgumentError, match="'axes'.*\\(2, 2\\)"):
        viz.decoder_masks(target, memory, axes=Figure().subplots(1, 2, squeeze=False))
    i18n.set_language("zh")
    with pytest.raises(ArgumentError, match="参数 target_keep.*保留掩码"):
        viz.decoder_masks(target.long(), memory)


# ----------------------------------------------------------------------------- a layer's cost by part

LENGTHS = [2**k for k in range(4, 15)]


def base_counts(kind=EncoderLayer):
    layer = kind(512, 8, 2048)
    return [flops(layer, L) for L in LENGTHS]


@pytest.mark.parametrize("lang, labels, axis", [("en", ["attention", "feed-forward network", "LayerNorms"],
                                                 "sequence length L"),
                                                ("zh", ["注意力", "前馈网络", "LayerNorm"], "序列长度 L")])
def test_flops_by_part_draws_one_line_per_part_in_the_notebooks_language(lang, labels, axis):
    i18n.set_language(lang)
    counts = base_counts()
    ax = viz.flops_by_part(LENGTHS, counts, ax=Figure().subplots(), crossover=1024, title="base")
    assert isinstance(ax.figure, Figure)
    assert [line.get_label() for line in ax.get_lines()[:3]] == labels
    assert [t.get_text() for t in ax.get_legend().get_texts()] == labels
    assert ax.get_xlabel() == axis and ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert list(ax.get_lines()[0].get_ydata()) == [c["attention"] for c in counts]
    crossover = ax.get_lines()[-1]  # the dashed line at L = 1024
    assert list(crossover.get_xdata()) == [1024, 1024] and crossover.get_linestyle() == "--"
    assert any(t.get_text() == "L = 1024" for t in ax.texts)
    # the y ticks are plain text, not mathtext (which is slow to draw)
    label = ax.yaxis.get_major_formatter()
    assert label(1e9) == "10⁹" and label(1e-3) == "10⁻³"


def test_flops_by_part_stacks_the_shares_up_to_one_and_names_a_decoders_two_attentions():
    counts = base_counts(DecoderLayer)
    ax = viz.flops_by_part(LENGTHS, counts, ax=Figure().subplots(), share=True)
    bands = ax.collections
    assert len(bands) == 4  # self-attention, cross-attention, feed-forward, norms
    top = bands[-1].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(1.0) and ax.get_ylim() == (0.0, 1.0)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "self-attention", "cross-attention", "feed-forward network", "LayerNorms"]
    assert ax.get_ylabel() == "share of the layer's multiply-adds"
    other = viz.flops_by_part([1, 2], [{"mine": 1, "total": 1}, {"mine": 2, "total": 2}], ax=Figure().subplots())
    assert other.get_lines()[0].get_label() == "mine"  # a part the catalogue does not know keeps its name


def test_flops_by_part_names_its_bad_arguments():
    counts = base_counts()
    ax = Figure().subplots()
    with pytest.raises(ArgumentError, match="'lengths'.*increasing"):
        viz.flops_by_part(LENGTHS[::-1], counts, ax=ax)
    with pytest.raises(ArgumentError, match="'lengths'"):
        viz.flops_by_part([0] + LENGTHS[1:], counts, ax=ax)
    with pytest.raises(ArgumentError, match="'lengths'"):
        viz.flops_by_part(torch.tensor(LENGTHS), counts, ax=ax)
    with pytest.raises(ArgumentError, match="'counts'.*11 dicts"):
        viz.flops_by_part(LENGTHS, counts[:-1], ax=ax)
    with pytest.raises(ArgumentError, match="'counts'.*total"):
        viz.flops_by_part(LENGTHS, [{k: v for k, v in c.items() if k != "total"} for c in counts], ax=ax)
    with pytest.raises(ArgumentError, match="'crossover'"):
        viz.flops_by_part(LENGTHS, counts, ax=ax, crossover=-1)
    i18n.set_language("zh")
    with pytest.raises(ArgumentError, match="参数 lengths.*递增的正整数"):
        viz.flops_by_part([2, 1], counts[:2], ax=ax)


# ----------------------------------------------------------------------------- section 6: exact counts


def test_section_6_counts_are_the_formulas_and_cross_at_f_minus_2e():
    E, H, F = 512, 8, 2048
    base = EncoderLayer(E, H, F)
    params = parameter_count(base)
    assert params == {"attention": 1_050_624, "feed_forward": 2_099_712, "norms": 2_048, "total": 3_152_384}
    at = {L: flops(base, L) for L in (1023, 1024, 1025)}
    assert at[1024]["attention"] == at[1024]["feed_forward"] == 2_147_483_648
    assert at[1023]["attention"] < at[1023]["feed_forward"] and at[1025]["attention"] > at[1025]["feed_forward"]
    # at L = 2E the score terms 2L²E equal the projections 4LE²: attention is half projections, half scores
    assert 2 * 1024**2 * E == 4 * 1024 * E**2 == at[1024]["attention"] // 2
    decoder = DecoderLayer(E, H, F)
    for L in [1] + LENGTHS:
        c = flops(decoder, L)
        assert c["self_attention"] + c["cross_attention"] > c["feed_forward"]


# ----------------------------------------------------------------------------- section 4's facts, ten seeds


def section_4(seed):
    """Section 4's batch and layers, built as the lesson builds them (its seed is 0)."""
    torch.manual_seed(seed)
    d_model, nhead, d_ff = 16, 4, 32
    source_lengths, target_lengths = torch.tensor([6, 3]), torch.tensor([3, 5])
    L_s, L_t = 6, 5
    source_padding = torch.arange(L_s) >= source_lengths[:, None]
    target_padding = torch.arange(L_t) >= target_lengths[:, None]
    source, target = torch.randn(2, L_s, d_model), torch.randn(2, L_t, d_model)
    encoder, decoder = EncoderLayer(d_model, nhead, d_ff).eval(), DecoderLayer(d_model, nhead, d_ff).eval()
    memory = encoder(source, key_padding_mask=source_padding)
    return decoder, target, memory, target_padding, source_padding


@trains
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_pytorchs_decoder_layer_agrees_within_a_tenth_of_the_lessons_tolerance(norm_first):
    for seed in SEEDS:
        _, target, memory, target_padding, source_padding = section_4(seed)
        torch.manual_seed(seed + 1)
        theirs = nn.TransformerDecoderLayer(16, 4, 32, batch_first=True, norm_first=norm_first).eval()
        ours = DecoderLayer.from_torch(theirs).eval()
        mine = ours(target, memory, tgt_key_padding_mask=target_padding, memory_key_padding_mask=source_padding)
        pytorchs = theirs(target, memory, tgt_mask=~causal_mask(5), tgt_is_causal=True,
                          tgt_key_padding_mask=target_padding, memory_key_padding_mask=source_padding)
        assert torch.allclose(mine, pytorchs, atol=1e-6, rtol=1e-6), seed  # the lesson claims atol=1e-5


@trains
def test_hidden_keys_get_exactly_zero_weight_and_kept_keys_a_positive_one():
    target_keep, memory_keep = lesson_masks()
    for seed in SEEDS:
        decoder, target, memory, target_padding, source_padding = section_4(seed)
        _, (self_w, cross_w) = decoder(target, memory, tgt_key_padding_mask=target_padding,
                                       memory_key_padding_mask=source_padding, need_weights=True)
        # so the picture read off the weights (weights > 0) is exactly the two masks, in every head
        assert torch.equal(self_w > 0, target_keep[:, None].expand_as(self_w)), seed
        assert torch.equal(cross_w > 0, memory_keep[:, None].expand_as(cross_w)), seed
        assert torch.allclose(self_w.sum(-1), torch.ones(2, 4, 5)) and torch.allclose(cross_w.sum(-1), torch.ones(2, 4, 5))


@trains
def test_later_targets_and_padded_sources_change_nothing_they_must_not():
    for seed in SEEDS:
        decoder, target, memory, target_padding, source_padding = section_4(seed)

        def decode(y, m, decoder=decoder, target_padding=target_padding, source_padding=source_padding):
            return decoder(y, m, tgt_key_padding_mask=target_padding, memory_key_padding_mask=source_padding)

        before = decode(target, memory)
        later_target, padded_memory, real_memory = target.clone(), memory.clone(), memory.clone()
        later_target[1, 3:] = torch.randn(2, 16)
        padded_memory[1, 3:] = torch.randn(3, 16)
        real_memory[1, 0] += 1.0
        after_target = decode(later_target, memory)
        assert torch.equal(after_target[1, :3], before[1, :3]), seed
        assert bool((after_target[1, 3:] != before[1, 3:]).any(-1).all()), seed
        assert torch.equal(decode(target, padded_memory), before), seed
        assert bool((decode(target, real_memory)[1] != before[1]).any(-1).all()), seed


@trains
def test_pytorch_trusts_tgt_is_causal_without_a_padding_mask_and_reads_the_mask_with_one():
    for seed in SEEDS:
        _, target, memory, _, _ = section_4(seed)
        torch.manual_seed(seed + 1)
        theirs = nn.TransformerDecoderLayer(16, 4, 32, batch_first=True, norm_first=bool(seed % 2)).eval()
        hides_nothing, no_padding = torch.zeros(5, 5, dtype=torch.bool), torch.zeros(2, 5, dtype=torch.bool)
        causal = theirs(target, memory, tgt_mask=~causal_mask(5))
        open_ = theirs(target, memory, tgt_mask=hides_nothing)
        promise = theirs(target, memory, tgt_mask=hides_nothing, tgt_is_causal=True)
        promise_padded = theirs(target, memory, tgt_mask=hides_nothing, tgt_is_causal=True,
                                tgt_key_padding_mask=no_padding)
        assert torch.allclose(promise, causal, atol=1e-7), seed  # the lesson: atol=1e-6
        assert torch.allclose(promise_padded, open_, atol=1e-7), seed
        assert (promise_padded - causal).abs().max() > 1e-2, seed  # the lesson: not within 1e-3
        with pytest.raises(RuntimeError):
            theirs(target, memory, tgt_is_causal=True)
