"""The optimiser the course's toy models train with: Adam, written out.

Why not ``torch.optim.Adam``: its first use imports ``torch._dynamo``, 2 to 3 s (measured) of a
lesson's 20 s budget, spent in every notebook that trains, for nothing a training loop of a few
hundred small steps needs.
"""

import math

import torch

from . import validation as check


def _number(value):
    """Whether `value` is a real number (an int or a float, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Adam:
    """Adam with torch.optim.Adam's defaults and arithmetic (tests/test_optim.py compares the two step
    by step); the step size is given to each ``step``, so a schedule is a plain expression."""

    def __init__(self, parameters, betas=(0.9, 0.999), eps=1e-8):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]  # one tensor, not its rows
        try:
            self.parameters = list(parameters)
        except TypeError:
            self.parameters = None
        if self.parameters is None or not all(isinstance(p, torch.Tensor) and p.is_floating_point()
                                              and p.layout == torch.strided for p in self.parameters):
            check.fail("Adam", "parameters", check.describe(parameters),
                       {"en": "floating-point tensors to train, such as model.parameters()",
                        "zh": "要训练的浮点张量，例如 model.parameters()"})
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2
                and all(_number(beta) and 0 <= beta < 1 for beta in betas)):
            check.fail("Adam", "betas", check.describe(betas),
                       {"en": "two numbers in [0, 1), such as (0.9, 0.999)", "zh": "两个 [0, 1) 内的数，例如 (0.9, 0.999)"})
        check.epsilon("Adam", "eps", eps)  # 0: NaN and −∞ for tiny gradients; 1e300 (∞ in float32): no step at all
        if len({id(p) for p in self.parameters}) != len(self.parameters):  # Adam([p, p]) would step p twice
            check.fail("Adam", "parameters",
                       {"en": f"{len(self.parameters)} tensors, one of them more than once",
                        "zh": f"{len(self.parameters)} 个张量，其中有张量出现了不止一次"},
                       {"en": "each tensor once: a tensor listed twice would take two steps per step",
                        "zh": "每个张量只出现一次：同一个张量列出两次，每一步就会被更新两次"})
        self.betas, self.eps, self.steps = betas, eps, 0
        self.means = [torch.zeros_like(p) for p in self.parameters]  # of the gradients
        self.squares = [torch.zeros_like(p) for p in self.parameters]  # mean squared gradients

    @torch.no_grad()
    def step(self, lr):
        """One step of size `lr` (a finite number ≥ 0, or a 0-dim tensor of one) along every
        parameter's .grad (None: the parameter stays). A NaN or infinite step would turn every
        parameter into NaN, and a negative one climbs the loss: both are refused, as
        torch.optim.Adam refuses them."""
        number = lr
        if isinstance(lr, torch.Tensor) and lr.ndim == 0 and lr.layout == torch.strided and not lr.is_meta \
                and (lr.is_floating_point() or lr.dtype in (torch.int64, torch.int32)):
            number = lr.item()
        largest = min((torch.finfo(p.dtype).max for p in self.parameters), default=math.inf)  # what a step can hold
        if not (_number(number) and math.isfinite(number) and 0 <= number <= largest):
            check.fail("Adam.step", "lr", check.describe(lr),
                       {"en": f"a finite number from 0 to {largest:.3g} (or a 0-dim tensor of one), the largest "
                              "step the parameters' dtype holds",
                        "zh": f"0 到 {largest:.3g} 之间的有限数（或装着它的 0 维张量），即参数类型能表示的最大步长"})
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
