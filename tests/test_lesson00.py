"""Lesson 00 (tensor shapes): its plots, its explorers' view functions, and its exercises beyond
what tests/test_exercises.py proves for every exercise."""

import itertools

import matplotlib
import pytest
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from course_teacher.exercises import EXERCISES
from course_utils import i18n, viz, widgets
from course_utils.exercises import FAILED, PASSED, evaluate

matplotlib.use("Agg")

LESSON_00 = sorted(e for e in EXERCISES if e.startswith("00."))


# ----------------------------------------------------------------------------- viz: memory_order


def _links(ax):
    """(x where the line leaves the element row, x where it meets the memory row) of each line."""
    return [(line.get_xdata()[0], line.get_xdata()[1]) for line in ax.get_lines()]


def test_memory_order_draws_one_line_per_element_and_parallel_lines_for_a_contiguous_tensor():
    x = torch.arange(12).view(3, 4)
    links = _links(viz.memory_order(x, ax=Figure().subplots()))
    assert len(links) == 12
    assert all(bottom == top for bottom, top in links)


def test_memory_order_links_each_element_to_the_memory_cell_it_reads():
    x = torch.arange(12).view(3, 4)
    links = _links(viz.memory_order(x.t(), ax=Figure().subplots()))
    # element k of x.t() in index order reads offset (k % 3) * 4 + k // 3; both rows have 12 cells,
    # so a line's top end sits above memory cell `offset`, its bottom end above element k
    offsets = [(k % 3) * 4 + k // 3 for k in range(12)]
    assert [round(top - bottom) for bottom, top in links] == [o - k for k, o in enumerate(offsets)]
    assert any(bottom != top for bottom, top in links)


def test_memory_order_shows_an_expanded_axis_as_several_lines_from_one_cell():
    row = torch.arange(3).view(1, 3).expand(2, 3)  # stride (0, 1): 6 elements over 3 cells
    ax = viz.memory_order(row, ax=Figure().subplots())
    tops = [top for _, top in _links(ax)]
    assert len(tops) == 6 and len(set(tops)) == 3
    labels = [text.get_text() for text in ax.texts]
    assert labels[:3] == ["0", "1", "2"] and labels[3:9] == ["0", "1", "2", "0", "1", "2"]


def test_memory_order_labels_follow_the_language():
    i18n.set_language("zh")
    ax = viz.memory_order(torch.arange(4), ax=Figure().subplots())
    labels = {text.get_text() for text in ax.texts}
    assert {"内存", "索引顺序"} <= labels


# ----------------------------------------------------------------------------- viz: broadcasting

SHAPES = [(), (1,), (5,), (2, 5), (1, 5), (2, 1), (2, 1, 1, 5), (2, 1, 5), (2, 1, 5, 1), (2, 4, 3, 5), (4, 1, 1),
          (3, 1, 5), (2, 4, 2, 5), (1, 1, 1, 1)]


@pytest.mark.parametrize("a, b", list(itertools.product(SHAPES, repeat=2)))
def test_broadcast_axes_agrees_with_torch(a, b):
    axes = viz.broadcast_axes(a, b)
    assert len(axes) == max(len(a), len(b))
    clash = any(status == "clash" for *_, status in axes)
    try:
        expected = tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        assert clash
    else:
        assert not clash
        assert tuple(size for _, _, size, _ in axes) == expected


def test_broadcast_axes_marks_which_side_is_stretched():
    assert viz.broadcast_axes((2, 1, 1, 5), (2, 4, 3, 5)) == [
        (2, 2, 2, "same"), (1, 4, 4, "stretch_a"), (1, 3, 3, "stretch_a"), (5, 5, 5, "same")
    ]
    assert viz.broadcast_axes((3, 1), (5,)) == [(3, None, 3, "stretch_b"), (1, 5, 5, "stretch_a")]
    assert viz.broadcast_axes((2, 5), (2, 4, 3, 5))[2] == (2, 3, None, "clash")


def test_broadcast_picture_draws_three_rows_and_names_the_axes():
    ax = viz.broadcast_picture((2, 5), (2, 4, 3, 5), ax=Figure().subplots(), names=("keep", "scores"),
                               axis_names=("B", "H", "L_q", "L_k"))
    texts = [text.get_text() for text in ax.texts]
    assert len(ax.patches) == 3 * 4
    assert {"B", "H", "L_q", "L_k", "keep", "scores", "result", "✗"} <= set(texts)
    assert "(1)→4" in texts  # the mask's missing H axis, repeated 4 times


def test_split_heads_picture_numbers_every_feature_in_both_layouts():
    length, heads, head_dim = 3, 2, 3
    ax = viz.split_heads_picture(length, heads, head_dim, ax=Figure().subplots())
    numbers = [int(t.get_text()) for t in ax.texts if t.get_text().isdigit()]
    cells = length * heads * head_dim
    assert len(ax.patches) == 2 * cells
    assert sorted(numbers[:cells]) == list(range(cells)) and sorted(numbers[cells:]) == list(range(cells))
    # the right side lists head 0's block first: row by row, its D features
    assert numbers[cells:cells + head_dim] == [0, 1, 2]
    assert numbers[cells + length * head_dim:cells + length * head_dim + head_dim] == [3, 4, 5]


# ----------------------------------------------------------------------------- widgets: permute


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_permute_view_reports_torchs_shape_and_stride(order):
    figure, text = widgets.permute_view(order=order, contiguous=False)
    y = torch.arange(24).view(2, 3, 4).permute(*order)
    assert isinstance(figure, Figure)
    assert f"shape {tuple(y.shape)}, stride {y.stride()}, contiguous: {y.is_contiguous()}" in text
    assert "shares memory with x: True (a view)" in text


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_permute_view_with_contiguous_copies_only_when_needed(order):
    _, text = widgets.permute_view(order=order, contiguous=True)
    assert "contiguous: True" in text
    if order == (0, 1, 2):
        assert "shares memory with x: True (a view)" in text  # .contiguous() returned x itself
    else:
        assert "shares memory with x: False (a copy)" in text


def test_permute_view_speaks_chinese():
    i18n.set_language("zh")
    _, text = widgets.permute_view(order=(2, 0, 1))
    assert "步长 (1, 12, 4)" in text and "连续：否" in text and "连续：False" not in text and "视图" in text


def test_permute_explorer_updates_when_a_control_moves():
    box = widgets.permute_explorer()
    order, contiguous = box.children[0].children
    assert "stride (12, 4, 1)" in box.summary.value
    first_image = box.image.value
    order.value = (2, 1, 0)
    assert "stride (1, 4, 12)" in box.summary.value and box.image.value != first_image
    contiguous.value = True
    assert "stride (6, 2, 1)" in box.summary.value and "a copy" in box.summary.value


# ----------------------------------------------------------------------------- widgets: broadcast


def test_broadcast_view_names_the_result_or_the_clash():
    _, ok = widgets.broadcast_view(mask=(2, 1, 1, 5), scores=(2, 4, 3, 5))
    assert "→ result (2, 4, 3, 5)" in ok and "scores axes B, H, L_q, L_k" in ok
    _, silent = widgets.broadcast_view(mask=(2, 5), scores=(2, 4, 2, 5))
    assert "→ result (2, 4, 2, 5)" in silent and "scores axes L_q, L_k" in silent
    _, clash = widgets.broadcast_view(mask=(2, 1, 5), scores=(2, 4, 3, 5))
    assert "error: on axis -3 the sizes 2 and 4" in clash and "scores axes H, L_q, L_k" in clash
    assert "bigger" not in ok + silent + clash


def test_broadcast_view_says_when_a_mask_grows_the_scores_of_one_decoding_step():
    assert (2, 4, 1, 5) in widgets.SCORES_SHAPES
    _, grown = widgets.broadcast_view(mask=(2, 5), scores=(2, 4, 1, 5))
    assert "→ result (2, 4, 2, 5)" in grown
    assert "the result (2, 4, 2, 5) is bigger than the scores (2, 4, 1, 5): their size-1 axis L_q was repeated" in grown
    _, right = widgets.broadcast_view(mask=(2, 1, 1, 5), scores=(2, 4, 1, 5))
    assert "→ result (2, 4, 1, 5)" in right and "bigger" not in right
    i18n.set_language("zh")
    _, grown = widgets.broadcast_view(mask=(2, 5), scores=(2, 4, 1, 5))
    assert "结果 (2, 4, 2, 5) 比分数 (2, 4, 1, 5) 还大" in grown and "L_q、L_k 维" in grown


def test_a_batch_mask_grows_the_scores_of_one_decoding_step_as_the_lesson_says():
    """Lesson 00 §5: a (B, L_k) mask against (B, H, 1, L_k) scores gives (B, H, B, L_k), and the
    in-place masked_fill_ refuses it."""
    B, H, L_k = 2, 4, 5
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    step = torch.randn(B, H, 1, L_k)
    assert step.masked_fill(~keep, float("-inf")).shape == (B, H, B, L_k)
    assert step.masked_fill(~keep[:, None, None, :], float("-inf")).shape == step.shape
    with pytest.raises(RuntimeError):
        step.clone().masked_fill_(~keep, float("-inf"))


@pytest.mark.parametrize("mask, scores", list(itertools.product(widgets.MASK_SHAPES, widgets.SCORES_SHAPES)))
def test_broadcast_view_says_error_exactly_when_torch_fails(mask, scores):
    figure, text = widgets.broadcast_view(mask=mask, scores=scores)
    assert isinstance(figure, Figure)
    try:
        torch.zeros(mask, dtype=torch.bool) | torch.zeros(scores, dtype=torch.bool)
    except RuntimeError:
        assert "error" in text
    else:
        assert "error" not in text and str(tuple(torch.broadcast_shapes(mask, scores))) in text


def test_broadcast_explorer_updates_when_a_control_moves():
    box = widgets.broadcast_explorer()
    mask, scores = box.children[0].children
    assert "result (2, 4, 3, 5)" in box.summary.value
    mask.value = (2, 5)
    assert "error" in box.summary.value
    scores.value = (2, 4, 2, 5)
    assert "result (2, 4, 2, 5)" in box.summary.value


# ----------------------------------------------------------------------------- exercises


def test_lesson_00_has_its_four_exercises():
    assert LESSON_00 == ["00.merge_heads", "00.padding_mask", "00.scores_einsum", "00.split_heads"]


@pytest.mark.parametrize("exercise", ["00.split_heads", "00.scores_einsum"])
def test_the_first_case_is_square_so_every_mistake_runs_there_with_the_reference_shape(exercise):
    spec = EXERCISES[exercise]
    first = spec.cases(torch.Generator().manual_seed(spec.seed))[0]
    expected = spec.reference(*first).shape
    # these merge or drop an axis, so their shape differs everywhere (and names them)
    other_shapes = {"SUM_OVER_HEADS", "POSITIONS_SAME_LETTER", "CHUNKS_CONCATENATED"}
    for mistake in spec.mistakes:
        if mistake.code not in other_shapes:
            assert mistake.fn(*first).shape == expected, mistake.code
        else:
            assert mistake.fn(*first).shape != expected, mistake.code


def _cases(exercise):
    spec = EXERCISES[exercise]
    return spec.cases(torch.Generator().manual_seed(spec.seed))


def _varies_independently(sizes, names):
    """Each size is 1 in some case and above 1 in another, and no two sizes are equal in every
    case but the first: a function that uses one size for another fails somewhere."""
    for name, column in zip(names, zip(*sizes)):
        assert 1 in column and any(size > 1 for size in column), (name, column)
    for (a, first), (b, second) in itertools.combinations(zip(names, zip(*sizes)), 2):
        assert first[1:] != second[1:], (a, b)


def test_split_heads_cases_vary_batch_length_heads_and_head_size_independently():
    sizes = [(x.shape[0], x.shape[1], h, x.shape[2] // h) for x, h in _cases("00.split_heads")]
    _varies_independently(sizes, ("B", "L", "H", "D"))
    assert any(h != d for _, _, h, d in sizes) and any(b != h for b, _, h, _ in sizes)


def test_merge_heads_cases_vary_batch_heads_length_and_head_size_independently():
    sizes = [tuple(x.shape) for (x,) in _cases("00.merge_heads")]
    _varies_independently(sizes, ("B", "H", "L", "D"))


def test_scores_einsum_cases_vary_every_size_independently():
    sizes = [(q.shape[0], q.shape[1], k.shape[1], q.shape[2], q.shape[3]) for q, k in _cases("00.scores_einsum")]
    _varies_independently(sizes, ("B", "L_q", "L_k", "H", "D"))
    assert any(l_q != l_k for _, l_q, l_k, _, _ in sizes)


def test_padding_mask_cases_cover_padding_beyond_the_longest_an_empty_sequence_batch_one_and_int32():
    cases = _cases("00.padding_mask")
    assert any(max_len > int(lengths.max()) for lengths, max_len in cases)
    assert any(max_len == int(lengths.max()) for lengths, max_len in cases)
    assert any(int(lengths.min()) == 0 for lengths, _ in cases)
    assert any(len(lengths) == 1 for lengths, _ in cases)
    assert any(len(lengths) != max_len for lengths, max_len in cases)
    assert {lengths.dtype for lengths, _ in cases} == {torch.int64, torch.int32}


def test_padding_mask_reference_returns_bool_as_its_docstring_says():
    for lengths, max_len in _cases("00.padding_mask"):
        keep = EXERCISES["00.padding_mask"].reference(lengths, max_len)
        assert keep.dtype == torch.bool and keep.shape == (len(lengths), 1, 1, max_len)


def _transposing_answers():
    return {
        "Tensor.transpose": lambda q, k: q.transpose(1, 2) @ k.transpose(1, 2).transpose(-2, -1),
        "Tensor.permute": lambda q, k: q.permute(0, 2, 1, 3) @ k.permute(0, 2, 3, 1),
        "torch.transpose": lambda q, k: torch.transpose(q, 1, 2) @ torch.transpose(torch.transpose(k, 1, 2), 2, 3),
        "Tensor.mT": lambda q, k: torch.einsum("bqhd,bkhd->bhkq", q, k).mT,
        "torch.swapaxes": lambda q, k: torch.swapaxes(torch.einsum("bqhd,bkhd->bhkq", q, k), -1, -2),
        "Tensor.movedim": lambda q, k: q.movedim(1, 2) @ k.movedim(1, 3),
    }


@pytest.mark.parametrize("name", list(_transposing_answers()))
def test_scores_einsum_refuses_an_answer_that_transposes(name):
    """The exercise says: one einsum, no transpose or permute. Right numbers by another road fail."""
    assert name in EXERCISES["00.scores_einsum"].forbidden
    verdict = evaluate("00.scores_einsum", _transposing_answers()[name])
    assert verdict.status == FAILED and verdict.code == "FORBIDDEN", verdict.message


def test_scores_einsum_accepts_the_einsum_answer():
    verdict = evaluate("00.scores_einsum", lambda q, k: torch.einsum("bqhd,bkhd->bhqk", q, k))
    assert verdict.status == PASSED, verdict.message


@pytest.mark.parametrize("seed", range(20))
def test_the_lessons_float_claims_hold_with_margin(seed):
    """§6 and §8 claim equality to 1e-5 (einsum against matmul, our heads against
    F.scaled_dot_product_attention): on every seed the gap is at most a tenth of that. Run also
    under ATEN_CPU_CAPABILITY=default."""
    torch.manual_seed(seed)
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 6)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k)
    assert (scores - q @ k.transpose(-2, -1)).abs().max() <= 1e-6
    w = torch.softmax(scores, dim=-1)
    assert (torch.einsum("bhqk,bhkd->bhqd", w, v) - w @ v).abs().max() <= 1e-6

    B, H, D, L_k = 2, 4, 3, 5
    keep4 = torch.tensor([[True] * 5, [True, True, True, False, False]])[:, None, None, :]
    x = torch.randn(B, L_k, H * D)
    q, k, v = (x @ (torch.randn(H * D, H * D) / (H * D) ** 0.5) for _ in range(3))
    q, k, v = (t.unflatten(-1, (H, D)).transpose(1, 2) for t in (q, k, v))
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / D**0.5
    heads = torch.softmax(scores.masked_fill(~keep4, float("-inf")), dim=-1) @ v
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=keep4)
    assert (heads - reference).abs().max() <= 1e-6


def test_merge_heads_covers_the_length_one_case_where_view_after_transpose_runs():
    spec = EXERCISES["00.merge_heads"]
    cases = spec.cases(torch.Generator().manual_seed(spec.seed))
    assert any(case[0].shape[2] == 1 for case in cases)


def test_split_and_merge_are_inverse():
    split, merge = EXERCISES["00.split_heads"].reference, EXERCISES["00.merge_heads"].reference
    x = torch.randn(2, 5, 12)
    heads = split(x, 4)
    assert heads.shape == (2, 4, 5, 3) and torch.equal(heads[:, 1, :, :], x[:, :, 3:6])
    assert torch.equal(merge(heads), x)


def test_padding_mask_broadcasts_against_scores_and_matches_pytorchs_padding_convention():
    lengths = torch.tensor([5, 3])
    keep = EXERCISES["00.padding_mask"].reference(lengths, 5)
    assert keep.shape == (2, 1, 1, 5) and keep.dtype == torch.bool
    key_padding_mask = torch.tensor([[False] * 5, [False, False, False, True, True]])  # True = ignore
    assert torch.equal(keep[:, 0, 0, :], ~key_padding_mask)
    assert torch.broadcast_shapes(keep.shape, (2, 4, 3, 5)) == (2, 4, 3, 5)


def test_scores_einsum_reference_equals_the_matmul_with_transposes():
    q, k = torch.randn(2, 3, 4, 5), torch.randn(2, 6, 4, 5)  # (B, L, H, D)
    scores = EXERCISES["00.scores_einsum"].reference(q, k)
    assert torch.allclose(scores, q.transpose(1, 2) @ k.transpose(1, 2).transpose(-2, -1), atol=1e-6)


def test_lesson_00_plots_render_chinese_without_glyph_or_font_warnings(caplog):
    import io
    import logging
    import warnings

    from course_utils import setup

    setup(lang="zh")
    figure, axes = viz.new_figure(rows=3, cols=1, size=(8, 7))
    viz.memory_order(torch.arange(6).view(2, 3).t(), ax=axes[0, 0], title="x.t()")
    viz.broadcast_picture((2, 5), (2, 4, 3, 5), ax=axes[1, 0], names=("掩码", "分数"))
    viz.split_heads_picture(2, 2, 2, ax=axes[2, 0])
    figures = [figure, widgets.permute_view((1, 0, 2), True)[0], widgets.broadcast_view((2, 1, 5), (2, 4, 3, 5))[0]]
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING, logger="matplotlib"):
        warnings.simplefilter("always")
        for each in figures:
            each.savefig(io.BytesIO(), format="png")
    assert not [str(w.message) for w in caught]
    assert not caplog.records, [r.getMessage() for r in caplog.records]
