"""Compare two computations by value and by gradient (tests import this module)."""

import torch


def grads(output, inputs, seed=1):
    """Gradients of a fixed random linear function of `output` with respect to `inputs`."""
    g = torch.Generator().manual_seed(seed)
    probe = torch.randn(output.shape, generator=g, dtype=output.dtype)
    return torch.autograd.grad((output * probe).sum(), inputs, retain_graph=True)


def assert_close_with_grads(ours, theirs, inputs):
    """`ours` equals `theirs`, and so do their gradients with respect to `inputs`."""
    torch.testing.assert_close(ours, theirs)
    for a, b in zip(grads(ours, inputs), grads(theirs, inputs)):
        torch.testing.assert_close(a, b)
