"""course_utils.tiled against PyTorch: the online-softmax merge is exact (float64, every split,
−∞ entries, fully masked pieces); the tiled forward equals F.scaled_dot_product_attention and the
materialised softmax (values, the log-sum-exp, and gradients through autograd of the tiled code)
for every block size, causal, sliding windows, block masks and fully masked rows; which tiles it
skips; the memory it counts; the errors that name the argument.

Tolerances: float64 comparisons use 1e-12 (the two sides sum in different orders; the largest gap
measured is about 1e-15), float32 ones 1e-5.
"""

import itertools

import pytest
import torch
import torch.nn.functional as F

from course_utils import i18n, tiled
from course_utils.tiled import FULL, PARTIAL, SKIP, SoftmaxState
from course_utils.validation import ArgumentError

F64 = {"atol": 1e-12, "rtol": 1e-12}
F32 = {"atol": 1e-5, "rtol": 1e-5}


def qkv(B=2, H=3, L_q=11, L_k=13, d=8, d_v=5, dtype=torch.float64, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    shapes = ((B, H, L_q, d), (B, H, L_k, d), (B, H, L_k, d_v))
    return [torch.randn(*s, generator=g, dtype=dtype).requires_grad_(grad) for s in shapes]


def sdpa(q, k, v, keep):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


# ----------------------------------------------------------------------------- the online softmax


def _states_of(scores, values, cuts):
    edges = [0, *cuts, scores.shape[-1]]
    state = tiled.empty_state(scores.shape[:-1], values.shape[-1], dtype=scores.dtype)
    for a, b in itertools.pairwise(edges):
        state = tiled.merge_states(state, tiled.piece_state(scores[..., a:b], values[..., a:b, :]))
    return state


@pytest.mark.parametrize("seed", range(4))
def test_merging_the_states_of_every_split_gives_the_full_softmax(seed):
    """float64, every way to cut a row of 7 scores into pieces (all 63 sets of cuts), rows with −∞
    entries, a row with a fully masked piece, a row of only −∞."""
    g = torch.Generator().manual_seed(seed)
    n = 7
    scores = torch.randn(5, n, generator=g, dtype=torch.float64) * 4
    scores[1, [0, 3]] = float("-inf")
    scores[2, 4:] = float("-inf")  # a fully masked piece for some splits
    scores[3, :3] = float("-inf")
    scores[4] = float("-inf")  # nothing to attend to
    values = torch.randn(5, n, 3, generator=g, dtype=torch.float64)
    expected_weights = torch.softmax(scores[:4], dim=-1)
    expected_lse = torch.logsumexp(scores, dim=-1)
    for count in range(n):
        for cuts in itertools.combinations(range(1, n), count):
            output, lse = tiled.finish(_states_of(scores, values, cuts))
            torch.testing.assert_close(output[:4], (expected_weights[:, None, :] @ values[:4]).squeeze(1), **F64)
            assert torch.equal(output[4], torch.zeros(3, dtype=torch.float64))
            torch.testing.assert_close(lse, expected_lse, **F64)  # −∞ in the last row on both sides
            if cuts:
                weights = tiled.online_softmax(scores, cuts)
                torch.testing.assert_close(weights[:4], expected_weights, **F64)
                assert torch.equal(weights[4], torch.zeros(n, dtype=torch.float64))


def test_the_merge_is_symmetric_and_associative():
    g = torch.Generator().manual_seed(3)
    pieces = [torch.randn(4, 3, generator=g, dtype=torch.float64) * 5 for _ in range(3)]
    pieces[1][0] = float("-inf")
    values = [torch.randn(4, 3, 2, generator=g, dtype=torch.float64) for _ in range(3)]
    a, b, c = (tiled.piece_state(s, v) for s, v in zip(pieces, values))
    for x, y in ((tiled.merge_states(a, b), tiled.merge_states(b, a)),
                 (tiled.merge_states(tiled.merge_states(a, b), c), tiled.merge_states(a, tiled.merge_states(b, c)))):
        assert torch.equal(x.m, y.m)
        torch.testing.assert_close(x.ell, y.ell, **F64)
        torch.testing.assert_close(x.acc, y.acc, **F64)


def test_two_empty_pieces_merge_to_an_empty_state_not_nan():
    empty = tiled.empty_state((2,), 3, dtype=torch.float64)
    merged = tiled.merge_states(empty, empty)
    assert torch.equal(merged.m, torch.full((2,), float("-inf"), dtype=torch.float64))
    assert not merged.ell.any() and not merged.acc.any()
    output, lse = tiled.finish(merged)
    assert not output.isnan().any() and (lse == float("-inf")).all()


def test_a_piece_of_huge_scores_does_not_overflow():
    scores = torch.tensor([[1000.0, 999.0, -1000.0, 1001.0]])
    merged = tiled.merge_states(tiled.piece_state(scores[:, :2]), tiled.piece_state(scores[:, 2:]))
    assert torch.isfinite(merged.ell).all()
    torch.testing.assert_close(tiled.finish(merged)[1], torch.logsumexp(scores, -1))


# ----------------------------------------------------------------------------- the tiled forward

BLOCKS = [(1, 1), (3, 4), (4, 3), (5, 13), (16, 16), (11, 2)]
MASKINGS = [{}, {"causal": True}, {"window": 3}, {"causal": True, "window": 4}]


@pytest.mark.parametrize("block_q, block_k", BLOCKS)
@pytest.mark.parametrize("masking", MASKINGS, ids=lambda m: "-".join(m) or "none")
def test_the_tiled_forward_is_pytorchs_attention_values_and_lse(block_q, block_k, masking):
    q, k, v = qkv()
    output, lse = tiled.tiled_attention(q, k, v, block_q=block_q, block_k=block_k, **masking)
    keep = tiled.keep_of(11, 13, **masking)
    torch.testing.assert_close(output, sdpa(q, k, v, keep), **F64)
    plain_output, plain_lse = tiled.materialised_attention(q, k, v, **masking)
    torch.testing.assert_close(output, plain_output, **F64)
    scores = (q @ k.transpose(-2, -1) / 8 ** 0.5)
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), **F64)
    torch.testing.assert_close(plain_lse, lse, **F64)


@pytest.mark.parametrize("masking", MASKINGS + [{"keep": True}], ids=lambda m: "-".join(m) or "none")
def test_gradients_through_the_tiles_are_pytorchs(masking):
    """Autograd through the tiled code: the gradients with respect to query, key and value of a
    random weighted sum of the output (and of the log-sum-exp) equal F.sdpa's / logsumexp's."""
    q, k, v = qkv(grad=True)
    keep_mask = None
    if masking.get("keep"):
        keep_mask = torch.rand(2, 1, 11, 13, generator=torch.Generator().manual_seed(5)) > 0.4
        keep_mask[..., 0] = True  # every row sees a key: F.sdpa's gradient is defined
        masking = {}
    output, lse = tiled.tiled_attention(q, k, v, block_q=4, block_k=5, keep_mask=keep_mask, **masking)
    keep = tiled.keep_of(11, 13, **masking) if keep_mask is None else keep_mask
    probe = torch.randn(output.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    probe_lse = torch.randn(lse.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ours = torch.autograd.grad((output * probe).sum() + (lse * probe_lse).sum(), (q, k, v))
    scores = q @ k.transpose(-2, -1) / 8 ** 0.5
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    reference = (sdpa(q, k, v, keep) * probe).sum() + (torch.logsumexp(scores, -1) * probe_lse).sum()
    theirs = torch.autograd.grad(reference, (q, k, v))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **F64)


def test_float32_on_the_shapes_of_the_lesson():
    q, k, v = qkv(B=1, H=8, L_q=200, L_k=200, d=64, d_v=64, dtype=torch.float32)
    for causal in (False, True):
        output, _ = tiled.tiled_attention(q, k, v, block_q=64, block_k=32, causal=causal)
        torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, is_causal=causal), **F32)


def test_fully_masked_rows_give_zero_output_minus_inf_lse_and_zero_gradient():
    q, k, v = qkv(grad=True)
    keep = torch.ones(11, 13, dtype=torch.bool)
    keep[[0, 5]] = False  # two queries see no key
    keep[:, 4:8] = False  # and a band of keys no query sees: whole tiles are skipped
    output, lse = tiled.tiled_attention(q, k, v, block_q=3, block_k=4, keep_mask=keep)
    assert not output.isnan().any()
    assert not output[..., [0, 5], :].any() and (lse[..., [0, 5]] == float("-inf")).all()
    torch.testing.assert_close(output, sdpa(q, k, v, keep), **F64)  # F.sdpa gives 0 there too (torch 2.13)
    output.sum().backward()
    assert not q.grad.isnan().any() and not q.grad[..., [0, 5], :].any()
    assert not k.grad[..., 4:8, :].any() and not v.grad[..., 4:8, :].any()


def test_a_query_longer_than_the_keys_and_a_block_longer_than_both():
    q, k, v = qkv(L_q=9, L_k=4)
    for causal in (False, True):
        output, _ = tiled.tiled_attention(q, k, v, block_q=50, block_k=50, causal=causal)
        torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, is_causal=causal), **F64)


def test_no_leading_axes_and_d_v_other_than_d():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(6, 4, generator=g), torch.randn(9, 4, generator=g), torch.randn(9, 7, generator=g)
    output, lse = tiled.tiled_attention(q, k, v, block_q=4, block_k=4)
    assert output.shape == (6, 7) and lse.shape == (6,)
    torch.testing.assert_close(output, torch.softmax(q @ k.T / 2, -1) @ v, **F32)


def test_the_inputs_are_left_unchanged():
    q, k, v = qkv()
    before = [t.clone() for t in (q, k, v)]
    tiled.tiled_attention(q, k, v, block_q=4, block_k=4, causal=True)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v)))


# ----------------------------------------------------------------------------- which tiles


def test_causal_tiles_skip_the_upper_triangle_and_mask_only_the_diagonal():
    kinds = tiled.tile_kinds(8, 8, 2, 2, causal=True)
    assert torch.equal(kinds.diagonal(), torch.full((4,), PARTIAL))
    above, below = torch.ones(4, 4, dtype=torch.bool).triu(1), torch.ones(4, 4, dtype=torch.bool).tril(-1)
    assert (kinds[above] == SKIP).all() and (kinds[below] == FULL).all()
    n = 64  # blocks per side: causal computes n (n + 1) / 2 of the n² tiles
    assert int((tiled.tile_kinds(n * 16, n * 16, 16, 16, causal=True) != SKIP).sum()) == n * (n + 1) // 2


def test_unequal_blocks_compute_exactly_the_tiles_that_hold_a_visible_entry():
    for L_q, L_k, bq, bk, masking in [(10, 10, 4, 3, {"causal": True}), (10, 13, 3, 5, {"window": 2}),
                                      (12, 12, 5, 2, {"causal": True, "window": 3})]:
        kinds = tiled.tile_kinds(L_q, L_k, bq, bk, **masking)
        keep = tiled.keep_of(L_q, L_k, **masking)
        for i, j in itertools.product(range(kinds.shape[0]), range(kinds.shape[1])):
            tile = keep[i * bq:(i + 1) * bq, j * bk:(j + 1) * bk]
            expected = SKIP if not tile.any() else FULL if tile.all() else PARTIAL
            assert kinds[i, j] == expected, (L_q, L_k, bq, bk, masking, i, j)


def test_a_block_mask_skips_its_hidden_tiles():
    keep = torch.zeros(8, 8, dtype=torch.bool)
    keep[:4, :4] = keep[4:, 4:] = True  # two independent halves
    kinds = tiled.tile_kinds(8, 8, 4, 4, keep_mask=keep)
    assert torch.equal(kinds, torch.tensor([[FULL, SKIP], [SKIP, FULL]]))


# ----------------------------------------------------------------------------- memory and backends


def test_peak_bytes_is_the_same_count_every_time_and_tiling_keeps_it_small():
    q, k, v = qkv(B=1, H=8, L_q=512, L_k=512, d=64, d_v=64, dtype=torch.float32)
    with torch.no_grad():
        counts = [tiled.peak_bytes(tiled.tiled_attention, q, k, v, block_q=256, block_k=256)[1] for _ in range(2)]
        plain = tiled.peak_bytes(tiled.materialised_attention, q, k, v)[1]
    assert counts[0] == counts[1]
    assert plain >= 2 * 8 * 512 * 512 * 4  # at least the scores and the weights, (1, 8, 512, 512) each
    assert counts[0] < plain / 3


def test_peak_bytes_counts_a_new_tensor_and_not_a_view():
    x = torch.zeros(1000)
    assert tiled.peak_bytes(lambda t: t[:10].view(2, 5), x)[1] == 0
    assert tiled.peak_bytes(lambda t: t + 1, x)[1] == 4000
    assert tiled.peak_bytes(lambda t: (t + 1).sum(), x)[1] == 4004  # t + 1 is alive while the sum is made


def test_which_kernel_f_sdpa_runs_on_this_cpu_torch_2_13():
    """Measured facts of torch 2.13 on CPU (the lesson shows them, labelled as such)."""
    if not torch.__version__.startswith("2.13"):
        pytest.skip("a fact of torch 2.13")
    q, k, v = qkv(B=1, H=2, L_q=16, L_k=16, d=8, d_v=8, dtype=torch.float32)
    keep = torch.ones(16, 16, dtype=torch.bool).tril()
    assert tiled.sdpa_backend(q, k, v) == "flash"
    assert tiled.sdpa_backend(q, k, v, is_causal=True) == "flash"
    assert tiled.sdpa_backend(q, k, v, attn_mask=keep) == "flash"
    assert tiled.sdpa_backend(q.double(), k.double(), v.double()) == "flash"
    assert tiled.sdpa_backend(q[0], k[0], v[0]) == "math"  # 3-D inputs
    assert tiled.sdpa_backend(q, k, v[..., :4]) == "math"  # d_v ≠ d
    assert tiled.sdpa_backend(q, k, v, dropout_p=0.5) == "math"


def test_the_profiler_names_the_same_kernels():
    """sdpa_backend reads the operators a dispatch mode sees; torch.profiler's names agree."""
    from torch.profiler import ProfilerActivity, profile

    q, k, v = qkv(B=1, H=2, L_q=16, L_k=16, d=8, d_v=8, dtype=torch.float32)
    for args, options in (((q, k, v), {}), ((q[0], k[0], v[0]), {}), ((q, k, v[..., :4]), {})):
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            F.scaled_dot_product_attention(*args, **options)
        names = {event.name for event in profiler.events()}
        flash = "aten::_scaled_dot_product_flash_attention_for_cpu" in names
        assert flash == (tiled.sdpa_backend(*args, **options) == "flash")
        assert flash != ("aten::_scaled_dot_product_attention_math" in names)


# ----------------------------------------------------------------------------- argument checks


@pytest.mark.parametrize("call, argument", [
    (lambda q, k, v: tiled.tiled_attention(q, k, v, block_q=0), "block_q"),
    (lambda q, k, v: tiled.tiled_attention(q, k, v, block_k=2.0), "block_k"),
    (lambda q, k, v: tiled.tiled_attention(q, k, v, causal=1), "causal"),
    (lambda q, k, v: tiled.tiled_attention(q, k, v, window=-1), "window"),
    (lambda q, k, v: tiled.tiled_attention(q, k[..., :3], v), "key"),
    (lambda q, k, v: tiled.tiled_attention(q, k, v[..., :4, :]), "value"),
    (lambda q, k, v: tiled.tiled_attention(q, k.float(), v), "key"),
    (lambda q, k, v: tiled.tiled_attention(q.long(), k, v), "query"),
    (lambda q, k, v: tiled.tiled_attention(q, k[:1], v[:1]), "key"),
    (lambda q, k, v: tiled.tiled_attention(q, k, v, keep_mask=torch.ones(11, 13)), "keep_mask"),
    (lambda q, k, v: tiled.tiled_attention(q, k, v, keep_mask=torch.ones(11, 5, dtype=torch.bool)), "keep_mask"),
    (lambda q, k, v: tiled.tiled_attention(q, k, v, scale="big"), "scale"),
    (lambda q, k, v: tiled.materialised_attention(q, k, v, causal="yes"), "causal"),
    (lambda q, k, v: tiled.tile_kinds(0, 4, 2, 2), "L_q"),
    (lambda q, k, v: tiled.online_softmax(q, (0,)), "boundaries"),
    (lambda q, k, v: tiled.merge_states(q, k), "a"),
    (lambda q, k, v: tiled.piece_state(q, v), "values"),
    (lambda q, k, v: tiled.peak_bytes(3), "function"),
])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_bad_argument_gets_an_error_that_names_it(call, argument, lang):
    i18n.set_language(lang)
    with pytest.raises(ArgumentError) as error:
        call(*qkv())
    assert (f"'{argument}'" if lang == "en" else f"参数 {argument}") in str(error.value)


def test_merging_states_of_different_rows_is_refused():
    a = tiled.empty_state((3,), 2)
    with pytest.raises(ArgumentError, match="'b'"):
        tiled.merge_states(a, tiled.empty_state((4,), 2))
    with pytest.raises(ArgumentError, match="'b'"):
        tiled.merge_states(a, SoftmaxState(a.m, a.ell))
