"""course_utils.optim.Adam, the toy models' optimiser, against torch.optim.Adam."""

import torch
from torch import nn

from course_utils import seq2seq, toy
from course_utils.optim import Adam
from course_utils.seq2seq import PAD


def _compare(ours, theirs, loss_of, steps=5, lr_of=lambda step: 0.01):
    adam = Adam(ours.parameters())
    reference = torch.optim.Adam(theirs.parameters(), lr=1.0)
    for step in range(steps):
        for model in (ours, theirs):
            model.zero_grad(set_to_none=True)
            loss_of(model, step).backward()
        adam.step(lr_of(step))
        reference.param_groups[0]["lr"] = lr_of(step)
        reference.step()
        for p, q in zip(ours.parameters(), theirs.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)


def test_adam_steps_as_torch_optim_adam_does_with_a_changing_step_size():
    """As lesson 06's encoder–decoder trains: a step size that falls every step."""
    def loss_of(model, step):
        batch = seq2seq.random_batch(8, torch.Generator().manual_seed(step))
        logits = model(batch.source, batch.target_in)
        return nn.functional.cross_entropy(logits.flatten(0, 1), batch.target_out.flatten(), ignore_index=PAD)

    _compare(seq2seq.make_model(2), seq2seq.make_model(2), loss_of, lr_of=lambda step: 0.01 * (1 - step / 5))


def test_adam_steps_as_torch_optim_adam_does_on_a_toy_model_where_a_parameter_has_no_gradient():
    """As lessons 03 and 04 train; a parameter without a gradient (the positions when they are off)
    stays where it is in both."""
    def loss_of(model, step):
        tokens, targets = toy.make_batch("reverse", 16, torch.Generator().manual_seed(step))
        logits, _ = model(tokens)
        return nn.functional.cross_entropy(logits.flatten(0, -2), targets.flatten())

    ours, theirs = toy.make_model("reverse", 1, positions=False), toy.make_model("reverse", 1, positions=False)
    before = ours.position.detach().clone()
    _compare(ours, theirs, loss_of)
    assert torch.equal(ours.position, before)
