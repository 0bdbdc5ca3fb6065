"""claim(): a fact a notebook states is printed in its language when true and fails the run when false."""

import numpy as np
import pytest
import torch

from course_utils import claim, i18n
from course_utils.claims import ClaimError


def test_a_true_claim_prints_its_statement(capsys):
    claim("the weights sum to 1", torch.allclose(torch.ones(3).sum(), torch.tensor(3.0)))
    claim("a numpy fact", np.float64(2.0) > 1.0)
    claim("a one-element tensor fact", torch.tensor([True]))
    assert capsys.readouterr().out == "✔ the weights sum to 1\n✔ a numpy fact\n✔ a one-element tensor fact\n"


def test_a_false_claim_fails_the_run_and_says_which_in_the_notebooks_language(capsys):
    with pytest.raises(ClaimError, match="false on this run: the gradient contains NaN"):
        claim("the gradient contains NaN", torch.tensor(1.0).isnan())
    i18n.set_language("zh")
    with pytest.raises(AssertionError, match="不成立：梯度中有 NaN"):
        claim("梯度中有 NaN", False)
    assert capsys.readouterr().out == ""  # nothing printed for a false claim


@pytest.mark.parametrize("holds", [torch.ones(2, dtype=torch.bool), torch.tensor(1.0), 1, "yes", None])
def test_anything_but_one_boolean_is_refused(holds):
    """A tensor of many values, a number or a string is a mistake in the lesson, never a fact."""
    with pytest.raises(TypeError, match="argument 'holds'"):
        claim("something", holds)
