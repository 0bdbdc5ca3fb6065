"""Lesson 04: the facts its notebook states from training (proved on 10 seeds; `make test` runs
them under ATEN_CPU_CAPABILITY=default, `make test-paths` on every kernel path the CPU has), the heads explorer,
the head grid and cost plots, and the neighbours task.

The notebook trains three models on the neighbours task, seed 0, one thread: one head with the
linear read-out ("one"), two heads with the linear read-out ("two"), one head with the MLP
read-out ("mlp"). The tests train on one thread, as the notebook's build does; nbval re-runs the
notebook on two threads, so the margins in the docstrings below were measured on seeds 0-9 under
the native kernels (AVX-512 here) and ATEN_CPU_CAPABILITY=default, with one and with two threads:
the weakest of the four measurements is given.
"""

import ipywidgets as w
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from course_utils import i18n, toy, viz
from course_utils.multihead import parameter_count
from course_utils.validation import ArgumentError
from course_utils.widgets import EXAMPLES, heads_explorer, heads_view

pytestmark = pytest.mark.trains

SEEDS = range(10)  # the notebook trains seed 0
THRESHOLD = 0.6  # the weight the notebook says each specialised head gives its neighbour at every query
VERSIONS = {"one": dict(heads=1), "two": dict(heads=2), "mlp": dict(heads=1, readout="mlp")}


@pytest.fixture(scope="module")
def runs(one_thread):
    """{(version, seed): Run} for the three models and every seed, trained on one thread as the notebook is."""
    return {(version, seed): toy.train_neighbours(seed=seed, **options)
            for seed in SEEDS for version, options in VERSIONS.items()}


@pytest.fixture(scope="module")
def held_out():
    return torch.stack([toy.neighbours_example(i)[0] for i in range(EXAMPLES)])  # (50, L)


@pytest.fixture(scope="module")
def answers():
    return torch.stack([toy.neighbours_example(i)[1] for i in range(EXAMPLES)])  # (50, L, 2)


def _maps(model, held_out):
    return torch.stack([toy.head_maps(model, tokens) for tokens in held_out])  # (50, H, L, L)


# ----------------------------------------------------------------------------- the notebook's claims

def test_two_heads_learn_the_task_and_one_head_with_a_linear_read_out_cannot_on_every_seed(runs):
    """Claims: two heads ≥ 95 % right (measured: 1.000 on every seed), one head with the linear
    read-out < 75 % (measured: at most 0.592), and the two layers have the same parameters."""
    for seed in SEEDS:
        assert runs["two", seed].accuracy >= 0.95, (seed, runs["two", seed].accuracy)
        assert runs["one", seed].accuracy < 0.75, (seed, runs["one", seed].accuracy)
        assert parameter_count(runs["one", seed].model) == parameter_count(runs["two", seed].model)


def test_one_head_with_a_linear_read_out_answers_one_side_and_guesses_the_other(runs, held_out, answers):
    """Claims: on the 50 held-out examples, one side more than 90 % right (measured: at least 0.950),
    the other fewer than 30 % (measured: at most 0.203); and the head gives each neighbour more
    than 0.25 of its weight at every query (measured: at least 0.306)."""
    better, worse, shares = [], [], []
    for seed in SEEDS:
        model = runs["one", seed].model
        high, low = toy.side_accuracy(model, held_out, answers).sort(descending=True).values.tolist()
        better.append(high)
        worse.append(low)
        shares.append(toy.neighbour_weights(_maps(model, held_out)).min().item())
    assert min(better) > 0.9 + 0.03, better
    assert max(worse) < 0.3 - 0.05, worse
    assert min(shares) > 0.25 + 0.03, shares


def test_one_head_with_a_linear_read_out_stays_below_75_percent_after_five_times_as_many_steps(one_thread):
    """The lesson says training the linear model five times as long does not help: 1,500 steps
    instead of 300 (measured: at most 0.613 right, against the claim's 0.75)."""
    found = [toy.train_neighbours(1, seed=seed, steps=1500).accuracy for seed in SEEDS]
    assert max(found) < 0.75 - 0.1, found


def test_one_head_with_an_mlp_read_out_learns_the_task_from_unequal_weights(runs, held_out):
    """Claims: ≥ 95 % right (measured: 1.000 on every seed); at every query of the 50 held-out
    examples the two neighbours together get more than 0.8 (measured: at least 0.865) and one at
    least 0.1 more than the other (measured: at least 0.191); on average the smaller share is
    below 0.35 (measured: at most 0.295) and the larger above 0.6 (measured: at least 0.666)."""
    totals, gaps, small, large = [], [], [], []
    for seed in SEEDS:
        run = runs["mlp", seed]
        assert run.accuracy >= 0.95, (seed, run.accuracy)
        shares = toy.neighbour_weights(_maps(run.model, held_out))[:, 0]  # (50, L, 2)
        smaller, larger = shares.min(dim=-1).values, shares.max(dim=-1).values
        totals.append((smaller + larger).min().item())
        gaps.append((larger - smaller).min().item())
        small.append(smaller.mean().item())
        large.append(larger.mean().item())
    assert min(totals) > 0.8 + 0.03, totals
    assert min(gaps) > 0.1 + 0.05, gaps
    assert max(small) < 0.35 - 0.03, small
    assert min(large) > 0.6 + 0.03, large


def test_the_mlp_read_out_is_linear_relu_linear_of_4e(runs):
    model = runs["mlp", 0].model
    first, relu, last = model.readout
    assert (first.in_features, first.out_features, last.out_features) == (32, 128, 2 * toy.VOCAB)
    assert isinstance(relu, torch.nn.ReLU)
    assert parameter_count(model.attention) == parameter_count(runs["one", 0].model.attention)
    with pytest.raises(ArgumentError, match="'readout'"):
        toy.NeighboursModel(1, readout="conv")
    with pytest.raises(ArgumentError, match="'hidden'"):
        toy.NeighboursModel(1, readout="mlp", hidden=0)


def test_one_head_reads_each_neighbour_on_every_seed_with_margin(runs, held_out):
    """The notebook's claim: one head gives its left neighbour, the other its right neighbour,
    more than 0.6 of its weight at every query of the 50 held-out examples (measured: at least
    0.705)."""
    weakest = []
    for seed in SEEDS:
        maps = _maps(runs["two", seed].model, held_out)
        sides = toy.head_sides(maps, threshold=THRESHOLD)
        assert set(sides) == {"left", "right"}, (seed, sides)
        found = toy.neighbour_weights(maps)  # (50, H, L, 2)
        weakest.append(min(found[:, h, :, toy.SIDES.index(side)].min().item() for h, side in enumerate(sides)))
    assert min(weakest) > THRESHOLD + 0.05, weakest  # a margin above the stated 0.6


def test_every_held_out_example_is_answered_right_so_the_printed_summary_says_correct(runs, held_out, answers):
    for seed in SEEDS:
        model = runs["two", seed].model
        with torch.no_grad():
            predicted = model(held_out)[0].argmax(dim=-1)  # (50, L, 2)
        assert torch.equal(predicted, answers), seed


def test_the_summary_the_notebook_prints_is_the_same_for_every_seed(runs, held_out):
    """The notebook prints heads_view for example 7 and the head that reads the left neighbour:
    whichever head that is, the text is the same."""
    texts = set()
    for seed in SEEDS:
        model = runs["two", seed].model
        sides = toy.head_sides(_maps(model, held_out))
        texts.add(heads_view(model, example=7, head=sides.index("left"))[1])
    assert len(texts) == 1
    assert "left neighbour more than 0.6" in texts.pop()


def test_training_is_deterministic_and_leaves_the_global_generator_alone(runs, one_thread):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    again = toy.train_neighbours(2, seed=0)
    assert torch.equal(torch.rand(3), expected)
    assert again.losses == runs["two", 0].losses and again.accuracy == runs["two", 0].accuracy


def test_side_accuracy_counts_each_side_on_its_own(runs, held_out, answers):
    model = runs["two", 0].model
    assert torch.equal(toy.side_accuracy(model, held_out, answers), torch.tensor([1.0, 1.0], dtype=torch.float64))
    swapped = answers.flip(-1)  # left and right answers exchanged
    assert toy.side_accuracy(model, held_out, swapped).max() < 0.2


# ----------------------------------------------------------------------------- the task

def test_the_neighbours_targets_are_the_letters_on_each_side_wrapping_around():
    tokens, targets = toy.neighbours_batch(5, torch.Generator().manual_seed(0))
    assert tokens.shape == (5, toy.LENGTH) and targets.shape == (5, toy.LENGTH, 2)
    assert torch.equal(targets[..., 0], tokens.roll(1, dims=-1))
    assert torch.equal(targets[..., 1], tokens.roll(-1, dims=-1))
    assert toy.neighbour_positions(4) == {"left": [3, 0, 1, 2], "right": [1, 2, 3, 0]}
    assert all(len(set(row.tolist())) == toy.LENGTH for row in tokens)
    with pytest.raises(ArgumentError, match="'length'"):
        toy.neighbours_batch(2, torch.Generator(), length=1)


def test_head_sides_reads_a_perfect_map_and_refuses_a_blur():
    L = 6
    left = torch.eye(L).roll(-1, dims=-1)  # query i reads key i - 1
    right = torch.eye(L).roll(1, dims=-1)
    assert torch.equal(left[0], torch.eye(L)[L - 1]) and torch.equal(right[0], torch.eye(L)[1])
    assert toy.head_sides(torch.stack([left, right])) == ["left", "right"]
    blur = 0.5 * left + 0.5 * right
    assert toy.head_sides(torch.stack([blur, right, left])) == [None, "right", "left"]
    assert toy.head_sides(torch.stack([torch.stack([left, right])] * 3)) == ["left", "right"]  # (N, H, L, L)


# ----------------------------------------------------------------------------- the explorer

def test_the_view_draws_the_chosen_heads_map_and_states_its_side_and_the_answers(runs):
    model = runs["two", 0].model
    tokens, targets = toy.neighbours_example(3)
    sides = toy.head_sides(toy.head_maps(model, tokens))
    for head in range(2):
        figure, summary = heads_view(model, example=3, head=head)
        assert isinstance(figure, Figure) and figure.axes[0].images  # the map (and its colour bar)
        shown = figure.axes[0].images[0].get_array()
        assert torch.allclose(torch.tensor(shown.data, dtype=torch.float32), toy.head_maps(model, tokens)[head])
        assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == list(toy.letters(tokens))
        assert f"example 3: input {toy.letters(tokens)}" in summary
        assert f"its {sides[head]} neighbour" in summary
        assert f"predicted {toy.letters(targets[:, 0])}, expected {toy.letters(targets[:, 0])}" in summary
        assert summary.endswith("both: correct")


def test_an_untrained_model_gets_no_side_and_wrong_answers():
    model = toy.NeighboursModel(2)
    _, summary = heads_view(model, example=0, head=1)
    assert "neither neighbour" in summary and summary.endswith("both: wrong")


def test_the_summary_follows_the_language(runs):
    i18n.set_language("zh")
    _, summary = heads_view(runs["two", 0].model, example=2, head=0)
    assert summary.startswith("样例 2：输入") and "这个头" in summary and "左邻：预测" in summary


def test_the_view_rejects_a_bad_example_or_head(runs):
    model = runs["two", 0].model
    with pytest.raises(ArgumentError, match="'example'"):
        heads_view(model, example=-1)
    with pytest.raises(ArgumentError, match="'head'.*0 to 1"):
        heads_view(model, example=0, head=2)


def test_the_explorer_has_an_example_slider_and_a_head_picker_that_update_it(runs):
    box = heads_explorer(runs["two", 0].model)
    slider, picker = box.children[0].children
    assert isinstance(slider, w.IntSlider) and slider.max == EXAMPLES - 1
    assert isinstance(picker, w.ToggleButtons) and [value for _, value in picker.options] == [0, 1]
    before, image = box.summary.value, box.image.value
    slider.value = 9
    assert box.summary.value != before and "example 9" in box.summary.value
    image = box.image.value
    picker.value = 1
    assert box.image.value != image


# ----------------------------------------------------------------------------- plots

def test_head_grid_draws_one_map_per_head_and_row():
    maps = torch.rand(2, 3, 4, 5)
    figure = Figure()
    axes = figure.subplots(2, 3, squeeze=False)
    viz.head_grid(maps, axes=axes, row_titles=["a", "b"])
    assert all(ax.images for ax in figure.axes) and axes[1, 2].get_title() == "head 2"
    assert axes[1, 0].get_ylabel().startswith("b")
    with pytest.raises(ValueError, match="'maps'"):
        viz.head_grid(torch.rand(4, 5))


def test_cost_lines_draws_a_line_per_series_on_log_axes():
    figure = Figure()
    ax = figure.subplots()
    viz.cost_lines(ax, [1, 2, 4], {"a": [1.0, 2.0, 4.0], "b": [3.0, 3.0, 3.0]}, "x", "ms")
    assert len(ax.lines) == 2 and ax.get_yscale() == "log" and ax.get_xscale() == "log"


@pytest.mark.parametrize("values", [[0.68, 0.7, 0.75, 0.78], [0.62, 0.75, 0.9, 1.4], [1.1, 2.0, 3.0, 3.4],
                                    [0.7, 0.8, 1.1, 6.5], [8.0, 64.0, 1024.0, 4096.0]],
                         ids=["within-15-percent", "within-a-factor-3", "a-factor-3", "one-decade", "three-decades"])
def test_cost_lines_labels_several_y_ticks_as_plain_numbers(values):
    """A log axis whose values stay within one decade showed a single tick (or none) before."""
    figure = Figure()
    FigureCanvasAgg(figure)  # a canvas that draws, so that the tick labels are set
    ax = figure.subplots()
    viz.cost_lines(ax, [1, 4, 16, 64], {"a": values}, "H", "ms")
    figure.canvas.draw()
    low, high = ax.get_ylim()
    shown = [t for t in ax.yaxis.get_major_ticks() if low <= t.get_loc() <= high and t.label1.get_text()]
    assert len(shown) >= 3, [t.label1.get_text() for t in shown]
    assert all("^" not in t.label1.get_text() and "$" not in t.label1.get_text() for t in shown)
