"""course_utils.toy: the tasks are what they say, training reaches its bar in seconds on one
thread, is deterministic, and leaves torch's global random state alone."""

import time

import pytest
import torch

from course_utils import toy
from course_utils.validation import ArgumentError

BAR = 0.95  # the accuracy the lesson promises on held-out sequences
TIME_BOUND_S = 10.0  # the lesson's budget is 6 s per task; leave room for a busy machine


@pytest.fixture
def threads():
    """Run a test with a given number of torch threads, then restore the previous number."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def runs():
    """One training run per task, seed 0, on one thread, with its wall time."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    found = {}
    for task in toy.TASKS:
        start = time.perf_counter()
        run = toy.train(task, seed=0)
        found[task] = (run, time.perf_counter() - start)
    torch.set_num_threads(before)
    return found


def test_the_tasks_targets_follow_their_alignment():
    g = torch.Generator().manual_seed(0)
    tokens, targets = toy.make_batch("reverse", 5, g)
    assert tokens.shape == targets.shape == (5, toy.LENGTH)
    assert torch.equal(targets, tokens.flip(-1))
    tokens, targets = toy.make_batch("double", 5, g)
    assert targets.shape == (5, 2 * toy.LENGTH)
    assert torch.equal(targets, tokens.repeat_interleave(2, dim=-1))
    assert toy.target_positions("reverse", 4) == [3, 2, 1, 0]
    assert toy.target_positions("double", 3) == [0, 0, 1, 1, 2, 2]


def test_the_tokens_of_a_sequence_are_all_different():
    tokens, _ = toy.make_batch("reverse", 200, torch.Generator().manual_seed(1))
    assert all(len(set(row.tolist())) == toy.LENGTH for row in tokens)
    assert int(tokens.min()) >= 0 and int(tokens.max()) < toy.VOCAB


def test_examples_are_fixed_and_differ_from_each_other():
    first = toy.example("reverse", 3)[0]
    assert torch.equal(first, toy.example("reverse", 3)[0])
    assert len({toy.letters(toy.example("reverse", i)[0]) for i in range(20)}) == 20
    assert toy.letters(torch.tensor([0, 2, 1])) == "acb"


def test_bad_arguments_are_named():
    with pytest.raises(ArgumentError, match="'task'"):
        toy.target_positions("sort")
    with pytest.raises(ArgumentError, match="'length'"):
        toy.make_batch("reverse", 2, torch.Generator(), length=11)


@pytest.mark.parametrize("task", toy.TASKS)
def test_training_reaches_the_bar_within_the_time_bound_on_one_thread(runs, task):
    run, seconds = runs[task]
    assert run.accuracy >= BAR, run.accuracy
    assert seconds < TIME_BOUND_S, seconds
    assert run.losses[-1] < 0.1 * run.losses[0]


@pytest.mark.parametrize("task", toy.TASKS)
def test_the_learned_map_is_the_tasks_alignment(runs, task):
    model = runs[task][0].model
    for index in range(50):  # the examples the lesson's explorer offers
        weights = toy.attention_map(model, toy.example(task, index)[0])
        assert toy.alignment_found(weights, task, margin=0.5), index
    # and it was not there before training
    untrained = toy.make_model(task, seed=0)
    assert not toy.alignment_found(toy.attention_map(untrained, toy.example(task, 0)[0]), task, margin=0.5)


def test_alignment_found_needs_the_right_argmax_and_the_margin():
    perfect = torch.eye(4).flip(-1)  # the anti-diagonal
    assert toy.alignment_found(perfect, "reverse", margin=0.9)
    assert not toy.alignment_found(torch.eye(4), "reverse")
    blurred = 0.6 * perfect + 0.4 * torch.eye(4)  # each row: 0.6 on the anti-diagonal, 0.4 elsewhere
    assert toy.alignment_found(blurred, "reverse", margin=0.1)
    assert not toy.alignment_found(blurred, "reverse", margin=0.5)
    assert not toy.alignment_found(torch.eye(4), "double")  # wrong number of rows


@pytest.mark.parametrize("task", toy.TASKS)
def test_training_is_deterministic_and_leaves_the_global_generator_alone(runs, task, threads):
    threads(1)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    again = toy.train(task, seed=0)
    assert torch.equal(torch.rand(3), expected)  # the global state is where it was
    first = runs[task][0]
    assert again.losses == first.losses and again.accuracy == first.accuracy
    for a, b in zip(first.model.parameters(), again.model.parameters()):
        assert torch.equal(a, b)


def test_a_different_seed_gives_a_different_run():
    a, b = toy.make_model("reverse", seed=0), toy.make_model("reverse", seed=1)
    assert not torch.equal(a.position, b.position)
    assert torch.equal(a.position, toy.make_model("reverse", seed=0).position)


@pytest.mark.parametrize("task", toy.TASKS)
def test_the_bar_holds_with_two_threads(task, threads):
    threads(2)
    run = toy.train(task, seed=0)
    assert run.accuracy >= BAR
    assert all(
        toy.alignment_found(toy.attention_map(run.model, toy.example(task, i)[0]), task, margin=0.5) for i in range(50)
    )


def test_without_positions_reversal_cannot_be_learned(threads):
    threads(1)
    run = toy.train("reverse", seed=0, positions=False)
    assert run.accuracy < 0.5


def test_models_accept_their_shapes_and_return_logits_and_weights():
    tokens, _ = toy.make_batch("double", 3, torch.Generator().manual_seed(2))
    logits, weights = toy.make_model("double")(tokens)
    assert logits.shape == (3, 2 * toy.LENGTH, toy.VOCAB) and weights.shape == (3, 2 * toy.LENGTH, toy.LENGTH)
    logits, weights = toy.make_model("reverse")(tokens)
    assert logits.shape == (3, toy.LENGTH, toy.VOCAB) and weights.shape == (3, toy.LENGTH, toy.LENGTH)
