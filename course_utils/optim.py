"""The optimiser the course's toy models train with: Adam, written out.

Why not ``torch.optim.Adam``: its first use imports ``torch._dynamo``, 2 to 3 s (measured) of a
lesson's 20 s budget, spent in every notebook that trains, for nothing a training loop of a few
hundred small steps needs.
"""

import math

import torch


class Adam:
    """Adam with torch.optim.Adam's defaults and arithmetic (tests/test_optim.py compares the two step
    by step); the step size is given to each ``step``, so a schedule is a plain expression."""

    def __init__(self, parameters, betas=(0.9, 0.999), eps=1e-8):
        self.parameters = list(parameters)
        self.betas, self.eps, self.steps = betas, eps, 0
        self.means = [torch.zeros_like(p) for p in self.parameters]  # of the gradients
        self.squares = [torch.zeros_like(p) for p in self.parameters]  # mean squared gradients

    @torch.no_grad()
    def step(self, lr):
        """One step of size `lr` along every parameter's .grad (None: the parameter stays)."""
        self.steps += 1
        beta1, beta2 = self.betas
        step_size = lr / (1 - beta1**self.steps)
        root_correction = math.sqrt(1 - beta2**self.steps)
        for p, mean, square in zip(self.parameters, self.means, self.squares):
            if p.grad is None:
                continue
            mean.lerp_(p.grad, 1 - beta1)
            square.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            p.addcdiv_(mean, (square.sqrt() / root_correction).add_(self.eps), value=-step_size)
