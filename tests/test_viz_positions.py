"""course_utils.viz.positions: the pictures of lesson 06, sections 1, 3 and 5 (positional encodings,
the gradient by layer, training with and without a warm-up). Each draws on the Axes it is given and returns it, labels in the notebook's
language, and names a bad argument."""

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from course_utils import i18n, viz
from course_utils.transformer import sinusoidal_encoding
from course_utils.validation import ArgumentError


@pytest.fixture(autouse=True)
def english_afterwards():
    yield
    i18n.set_language("en")


def axes():
    return Figure().subplots()


def legend_texts(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


# ----------------------------------------------------------------------------- the encoding table


def test_encoding_heatmap_shows_the_table_on_a_fixed_colour_range_with_a_colour_bar():
    table = sinusoidal_encoding(30, 16)
    ax = axes()
    assert viz.encoding_heatmap(table, ax=ax) is ax
    image = ax.images[0]
    assert image.get_array().shape == (30, 16) and image.get_clim() == (-1.0, 1.0)
    np.testing.assert_allclose(image.get_array(), table.numpy(), atol=1e-7)
    assert len(ax.figure.axes) == 2  # the colour bar
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        "feature", "position p", "sinusoidal encoding, L = 30, E = 16")
    assert viz.encoding_heatmap(table.numpy(), ax=axes(), title="mine").get_title() == "mine"
    assert viz.encoding_heatmap([[0.0, 1.0], [1.0, 0.0]], ax=axes()).images[0].get_array().shape == (2, 2)


def test_encoding_curves_draws_one_labelled_line_per_feature():
    table = sinusoidal_encoding(40, 8, dtype=torch.float64)
    ax = viz.encoding_curves(table, [0, 1, 6], ax=axes())
    assert len(ax.lines) == 3
    np.testing.assert_allclose(ax.lines[2].get_ydata(), table[:, 6].numpy())
    assert legend_texts(ax) == ["feature 0 (sin)", "feature 1 (cos)", "feature 6 (sin)"]
    assert ax.get_xlabel() == "position p"


def test_offset_dot_products_draws_the_dot_product_against_the_offset_from_each_start():
    table = sinusoidal_encoding(50, 16, dtype=torch.float64)
    ax = viz.offset_dot_products(table, starts=[0, 7], max_offset=20, ax=axes())
    assert len(ax.lines) == 3  # two curves and the zero line
    first, second = ax.lines[:2]
    assert list(first.get_xdata()) == list(range(21))
    np.testing.assert_allclose(first.get_ydata(), (table[:21] @ table[0]).numpy())
    np.testing.assert_allclose(second.get_ydata(), (table[7:28] @ table[7]).numpy())
    np.testing.assert_allclose(first.get_ydata(), second.get_ydata())  # the offset alone decides
    assert legend_texts(ax) == ["from p = 0", "from p = 7"]
    assert ax.get_xlabel() == "offset k"


def test_gradient_by_layer_draws_both_stacks_relative_to_the_top():
    post, pre = torch.tensor([2.0, 3.0, 4.0]), [6.0, 5.0, 4.0]
    ax = viz.gradient_by_layer(post, pre, ax=axes(), title="N = 2")
    lines = {line.get_label(): line for line in ax.lines}
    np.testing.assert_allclose(lines["post-norm"].get_ydata(), [0.5, 0.75, 1.0])
    np.testing.assert_allclose(lines["pre-norm"].get_ydata(), [1.5, 1.25, 1.0])
    assert list(lines["pre-norm"].get_xdata()) == [0, 1, 2]
    assert ax.get_title() == "N = 2" and "x_n" in ax.get_xlabel() and "x_N" in ax.get_ylabel()


def _run(norm_first, warmup, steps=4):
    """A stand-in for a norm_study.WarmupRun: four steps."""
    from course_utils.norm_study import WarmupRun
    from course_utils.seq2seq import learning_rate

    rates = [learning_rate(t, steps, 0.01, warmup) for t in range(steps)]
    return WarmupRun(norm_first, warmup, [2.0, 1.5, 1.0 + norm_first, 0.5], rates, 0.4)


def test_warmup_curves_draws_each_runs_loss_and_each_schedule_once():
    runs = [_run(False, 0), _run(False, 2), _run(True, 0)]
    figure = Figure()
    loss_ax, rate_ax = viz.warmup_curves(runs, axes=figure.subplots(1, 2))
    assert legend_texts(loss_ax) == ["post-norm, no warm-up", "post-norm, 2-step warm-up", "pre-norm, no warm-up"]
    assert [line.get_linestyle() for line in loss_ax.lines] == ["-", "--", "-"]
    np.testing.assert_allclose(loss_ax.lines[2].get_ydata(), [2.0, 1.5, 2.0, 0.5])
    assert list(loss_ax.lines[0].get_xdata()) == [1, 2, 3, 4] and loss_ax.get_yscale() == "log"
    assert legend_texts(rate_ax) == ["no warm-up", "2-step warm-up"]  # one line per schedule
    np.testing.assert_allclose(rate_ax.lines[1].get_ydata(), [0.005, 0.01, 0.01, 0.005])
    assert (loss_ax.get_xlabel(), loss_ax.get_ylabel(), rate_ax.get_ylabel()) == (
        "training step", "training loss", "learning rate")


def test_warmup_curves_speaks_chinese_and_names_its_bad_arguments():
    i18n.set_language("zh")
    loss_ax, rate_ax = viz.warmup_curves([_run(False, 0), _run(False, 2)], axes=Figure().subplots(1, 2))
    assert legend_texts(loss_ax) == ["后归一化（Post-LN），不预热", "后归一化（Post-LN），预热 2 步"]
    assert (loss_ax.get_xlabel(), rate_ax.get_ylabel()) == ("训练步数", "学习率")
    i18n.set_language("en")
    for bad in ([], [1, 2], [_run(False, 0), _run(True, 0, steps=5)], "runs", None):
        with pytest.raises(ArgumentError, match="warmup_curves: argument 'runs'"):
            viz.warmup_curves(bad)
    for bad in (axes(), [axes()], "ax"):
        with pytest.raises(ArgumentError, match="warmup_curves: argument 'axes'"):
            viz.warmup_curves([_run(False, 0)], axes=bad)


def test_without_axes_each_plot_makes_a_new_pyplot_figure():
    import matplotlib.pyplot as plt

    table = sinusoidal_encoding(10, 4)
    try:
        for ax in (viz.encoding_heatmap(table), viz.encoding_curves(table, [0]),
                   viz.offset_dot_products(table, [0], 5), viz.gradient_by_layer([1.0, 2.0], [2.0, 1.0]),
                   viz.warmup_curves([_run(True, 0)])[0]):
            assert ax.figure in [plt.figure(n) for n in plt.get_fignums()]
    finally:
        plt.close("all")


def test_the_labels_follow_the_notebooks_language():
    i18n.set_language("zh")
    table = sinusoidal_encoding(20, 8)
    heat = viz.encoding_heatmap(table, ax=axes())
    assert (heat.get_xlabel(), heat.get_ylabel(), heat.get_title()) == ("特征", "位置 p", "正弦位置编码，L = 20，E = 8")
    assert legend_texts(viz.encoding_curves(table, [2, 3], ax=axes())) == ["特征 2（正弦）", "特征 3（余弦）"]
    dots = viz.offset_dot_products(table, [1], 4, ax=axes())
    assert legend_texts(dots) == ["从 p = 1 起"] and dots.get_xlabel() == "偏移 k"
    grads = viz.gradient_by_layer([1.0, 2.0], [2.0, 1.0], ax=axes())
    assert legend_texts(grads) == ["前归一化（Pre-LN）", "后归一化（Post-LN）"]
    assert "第 n 层的输入" in grads.get_xlabel() and "梯度" in grads.get_ylabel()


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: viz.encoding_heatmap(torch.zeros(3)), "table"),
        (lambda: viz.encoding_heatmap(torch.zeros(0, 4)), "table"),
        (lambda: viz.encoding_heatmap("sin"), "table"),
        (lambda: viz.encoding_curves(torch.zeros(5, 4), [4]), "features"),
        (lambda: viz.encoding_curves(torch.zeros(5, 4), []), "features"),
        (lambda: viz.encoding_curves(torch.zeros(5, 4), [True]), "features"),
        (lambda: viz.encoding_curves(torch.zeros(5, 4), 1), "features"),
        (lambda: viz.offset_dot_products(torch.zeros(5, 4), [0], 5), "max_offset"),
        (lambda: viz.offset_dot_products(torch.zeros(5, 4), [0], 0), "max_offset"),
        (lambda: viz.offset_dot_products(torch.zeros(5, 4), [2], 3), "starts"),
        (lambda: viz.offset_dot_products(torch.zeros(5, 4), [-1], 3), "starts"),
        (lambda: viz.gradient_by_layer([1.0], [1.0]), "post"),
        (lambda: viz.gradient_by_layer([1.0, 0.0], [1.0, 1.0]), "post"),
        (lambda: viz.gradient_by_layer([1.0, 2.0], "ab"), "pre"),
        (lambda: viz.gradient_by_layer([1.0, 2.0], torch.ones(2, 2)), "pre"),
        (lambda: viz.gradient_by_layer([1.0, 2.0], [1.0, 2.0, 3.0]), "pre"),
    ],
)
def test_a_bad_argument_is_named(call, argument):
    with pytest.raises(ArgumentError, match=f"argument '{argument}'"):
        call()


def test_a_bad_argument_is_named_in_chinese_too():
    i18n.set_language("zh")
    with pytest.raises(ArgumentError, match="参数 max_offset 收到.*1 到 4 之间的整数"):
        viz.offset_dot_products(torch.zeros(5, 4), [0], 7)
