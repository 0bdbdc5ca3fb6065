"""Lesson 06, section 5 (warm-up, measured): the facts its notebook states about training a deeper
encoder–decoder post-norm and pre-norm, with and without a learning-rate warm-up, proved on 10 seeds
with margin (`make test` runs its `trains` tests under ATEN_CPU_CAPABILITY=default, `make test-paths` on
every kernel path the CPU has), and the schedule itself.

The notebook trains seed 0 at ``norm_study.WARMUP_SETTINGS`` (4 encoder and 4 decoder layers, 100
steps of 32 sequences, peak learning rate 0.015) three times and states, of the teacher-forced
cross-entropy on 500 held-out sources: post-norm without warm-up stays above 1.3; post-norm with a
30-step warm-up and pre-norm without one both end below 1.0; and post-norm without warm-up ends at
more than twice the loss of each of the other two.

Measured (torch 2.13, seeds 0 … 9, ``norm_study.warmup_run``; the notebook runs on one thread, nbval
also on two), minimum … maximum over the seeds:

                          native, 1 thread   default, 1 thread   native, 2 threads   default, 2 threads
- post-norm, no warm-up:  1.666 … 2.213      1.660 … 2.244       1.544 … 2.226       1.668 … 2.247
- post-norm, warm-up 30:  0.301 … 0.591      0.319 … 0.614       0.312 … 0.599       0.321 … 0.544
- pre-norm, no warm-up:   0.498 … 0.818      0.498 … 0.816       0.503 … 0.831       0.501 … 0.817
- ratio of the first to the larger of the other two, seed by seed:
                          2.326 … 3.347      2.337 … 3.333       2.338 … 3.289       2.327 … 3.540

("default": ATEN_CPU_CAPABILITY=default.) Margins to the notebook's thresholds, over all four columns:
post-norm without warm-up 0.244 (1.544) above 1.3 here, 0.159 (1.459, one seed) on CI's CPU; with warm-up 0.386 (0.614) below 1.0; pre-norm 0.169 (0.831)
below 1.0; the ratio 0.326 (2.326) above 2. (Pre-norm with the warm-up, which the notebook does not run:
0.34 … 0.50 on one thread.) The tests below run on one thread, as the notebook does, and hold each
measured range a margin inside the notebook's threshold."""

import pytest
import torch

from course_utils import norm_study, seq2seq
from course_utils.validation import ArgumentError

SEEDS = range(10)  # the notebook trains seed 0
W = norm_study.WARMUP_STEPS


@pytest.fixture(scope="module")
def runs(one_thread):
    """{(norm_first, warmup, seed): held-out loss} for the notebook's three runs, on every seed."""
    return {(norm_first, warmup, seed): norm_study.warmup_run(norm_first, warmup, seed).held_out_loss
            for seed in SEEDS for norm_first, warmup in ((False, 0), (False, W), (True, 0))}


@pytest.mark.trains
def test_post_norm_without_warm_up_barely_learns_on_every_seed(runs):
    """Notebook: above 1.3. Measured 1.660 … 2.244 here (one thread, both kernel paths); CI's CPU gave
    1.459 on one seed, so the margin held is 0.05, not a fixed share of this machine's range."""
    losses = [runs[False, 0, seed] for seed in SEEDS]
    assert min(losses) >= 1.35, losses


@pytest.mark.trains
def test_post_norm_with_warm_up_and_pre_norm_without_it_learn_on_every_seed(runs):
    """Notebook: both below 1.0. Measured 0.301 … 0.614 (post-norm, warm-up) and 0.498 … 0.818 (pre-norm), one
    thread, both kernel paths."""
    warmed = [runs[False, W, seed] for seed in SEEDS]
    pre = [runs[True, 0, seed] for seed in SEEDS]
    assert max(warmed) <= 0.75, warmed
    assert max(pre) <= 0.9, pre


@pytest.mark.trains
def test_post_norm_without_warm_up_ends_more_than_twice_as_high_on_every_seed(runs):
    """Notebook: more than twice each of the other two. Measured 2.326 … 3.347, seed by seed (one thread,
    both kernel paths)."""
    ratios = [runs[False, 0, seed] / max(runs[False, W, seed], runs[True, 0, seed]) for seed in SEEDS]
    assert min(ratios) >= 2.15, ratios


def test_guessing_each_token_by_its_frequency_scores_2_36():
    """Notebook: a model that ignores the input and guesses each token by how often it occurs in the
    held-out answers scores their entropy, 2.36."""
    answers = seq2seq.held_out().target_out
    tokens = answers[answers != seq2seq.PAD]
    p = torch.bincount(tokens, minlength=seq2seq.VOCAB).double() / tokens.numel()
    entropy = -(p[p > 0] * p[p > 0].log()).sum().item()
    assert round(entropy, 2) == 2.36


def test_the_schedule_rises_over_the_warm_up_then_falls_linearly():
    steps, lr = 100, 0.015
    rates = [seq2seq.learning_rate(t, steps, lr, 30) for t in range(steps)]
    assert rates[0] == pytest.approx(lr / 30) and rates[29] == pytest.approx(lr)
    assert all(a < b for a, b in zip(rates[:30], rates[1:30]))  # rising over steps 0 … 29
    assert rates[30] == pytest.approx(lr)  # the fall starts from the peak: (T - W) / (T - W) = 1 at t = W
    assert all(a > b for a, b in zip(rates[30:], rates[31:]))  # then falling
    assert rates[-1] == pytest.approx(lr / 70)
    plain = [seq2seq.learning_rate(t, steps, lr) for t in range(steps)]
    assert plain == [lr * (1 - t / steps) for t in range(steps)]  # bit for bit what train always used


def test_without_warm_up_train_is_what_it_was(one_thread):
    """warmup=0 and norm_first=True are the defaults: the lesson's one-layer model trains exactly as
    before the options existed (the same losses, bit for bit, on one thread)."""
    default = seq2seq.train(seed=1, steps=5, batch=8)
    explicit = seq2seq.train(seed=1, steps=5, batch=8, warmup=0, norm_first=True)
    assert default.losses == explicit.losses


def test_a_warm_up_run_records_its_schedule_and_a_post_norm_model_has_post_norm_layers():
    model = seq2seq.make_model(0, layers=2, norm_first=False)
    assert not any(layer.norm_first for layer in [*model.encoder, *model.decoder])
    assert all(layer.norm_first for layer in [*seq2seq.make_model(0).encoder, *seq2seq.make_model(0).decoder])


@pytest.mark.parametrize(("argument", "value"), [("norm_first", 1), ("warmup", 5), ("warmup", True), ("seed", -1)])
def test_a_bad_argument_is_named(argument, value):
    arguments = {"norm_first": False, "warmup": 0, argument: value}
    with pytest.raises(ArgumentError, match=f"warmup_run: argument '{argument}'"):
        norm_study.warmup_run(**arguments)


@pytest.mark.parametrize("warmup", [-1, 100, 2.5, True])
def test_train_names_a_bad_warm_up(warmup):
    with pytest.raises(ArgumentError, match="train: argument 'warmup'"):
        seq2seq.train(steps=100, warmup=warmup)
