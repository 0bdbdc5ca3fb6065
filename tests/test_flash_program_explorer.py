"""Lesson 09's explorer (course_utils.widgets.flash_program): one program of the forward kernel, key
block by key block. Pure torch (no Triton): what it says a program loads and masks is what the kernel
does, and its last m and ℓ give the lse torch computes."""

import math

import pytest
import torch

from course_utils import i18n
from course_utils.validation import ArgumentError
from course_utils.widgets.flash_program import (
    BLOCK,
    BLOCKS,
    EXAMPLE,
    L,
    loaded_blocks,
    program_explorer,
    program_steps,
    program_view,
)


def test_a_causal_program_loads_the_blocks_up_to_the_diagonal_and_masks_the_diagonal_and_the_ragged_one():
    assert L % BLOCK != 0 and BLOCKS == math.ceil(L / BLOCK)  # the example has a ragged last block
    for block in range(BLOCKS):
        assert loaded_blocks(block, causal=False) == list(range(BLOCKS))
        assert loaded_blocks(block, causal=True) == list(range(block + 1))
        kinds = [kind for _, kind, _, _ in program_steps(block, causal=True)[1:]]
        assert kinds[:-1] == [None] * block  # below the diagonal: no mask
        assert kinds[-1] == ("both" if block == BLOCKS - 1 else "diagonal")
    kinds = [kind for _, kind, _, _ in program_steps(0, causal=False)[1:]]
    assert kinds == [None] * (BLOCKS - 1) + ["ragged"]


@pytest.mark.parametrize("causal", [False, True])
def test_the_last_step_gives_torchs_lse_and_m_never_decreases(causal):
    q, k = EXAMPLE
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    for block in range(BLOCKS):
        steps = program_steps(block, causal)
        for (_, _, before, _), (_, _, after, _) in zip(steps, steps[1:]):
            assert bool((after >= before).all())
        _, _, m, ell = steps[-1]
        rows = slice(block * BLOCK, min((block + 1) * BLOCK, L))
        assert torch.allclose(m + torch.log(ell), torch.logsumexp(scores[rows], -1), rtol=0, atol=1e-12)


def test_the_view_says_what_each_step_loads_in_both_languages():
    _, text = program_view(block=1, causal=True, step=0)
    assert text.startswith("Program 1 owns queries 16–31.") and "Never loaded (above the diagonal): key blocks 2, 3." in text
    _, text = program_view(block=1, causal=True, step=2)
    assert "Step 2 of 2: key block 1 (keys 16–31), masked: the diagonal block" in text
    assert "lse = m + log ℓ equals torch.logsumexp" in text
    _, text = program_view(block=3, causal=False, step=99)  # clamped to the last step
    assert "key block 3 (keys 48–55), masked: the partial last block" in text
    i18n.set_language("zh")
    try:
        _, text = program_view(block=1, causal=True, step=1)
    finally:
        i18n.set_language("en")
    assert text.startswith("第 1 步（共 2 步）：键块 0（键 0–15），无需掩码")


def test_the_explorer_follows_the_program_and_refuses_a_block_out_of_range():
    box = program_explorer(block=2, causal=True)
    assert box.controls["step"].max == 3
    box.controls["causal"].value = False
    assert box.controls["step"].max == BLOCKS
    box.controls["step"].value = BLOCKS
    assert "The loop is over" in box.summary.value
    with pytest.raises(ArgumentError, match="block"):
        program_view(block=BLOCKS)
    with pytest.raises(ArgumentError, match="causal"):
        program_explorer(causal="yes")
