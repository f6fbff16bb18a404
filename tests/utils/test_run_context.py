"""RunContext: no module-level shared context; standalone algorithms own their counters."""
import torch
import torch.nn as nn

from alf.algorithms.algorithm import Algorithm
from alf.data_structures import LossInfo
from alf.utils import run_context
from alf.utils.optimizers import SGD
from alf.utils.run_context import RunContext, default_run_context


class _Scale(Algorithm):
    """One parameter ``w``; loss ``w * x``. Built without a context, like in a notebook."""

    def __init__(self):
        super().__init__(optimizer=SGD(lr=0.1), name="Scale")
        self.w = nn.Parameter(torch.tensor(1.0))


def test_default_run_context_is_fresh_each_call():
    a, b = default_run_context(), default_run_context()
    assert isinstance(a, RunContext) and a is not b
    a.iteration, a.env_steps, a.num_updates = 5, 100, 7
    assert b.state_dict() == {"iteration": 0, "env_steps": 0, "num_updates": 0}
    assert not hasattr(run_context, "_DEFAULT")  # no module-level context to leak between runs


def test_standalone_algorithms_do_not_share_counters():
    first, second = _Scale(), _Scale()
    assert first.context is not second.context
    for _ in range(3):
        first.update_with_gradient(LossInfo(loss=first.w * torch.ones(2)))
    first.context.iteration = 4
    assert first.context.num_updates == 3 and first.context.iteration == 4
    assert second.context.state_dict() == {"iteration": 0, "env_steps": 0, "num_updates": 0}
    assert _Scale().context.num_updates == 0  # a later one starts from zero too


def test_state_dict_round_trip():
    ctx = RunContext(num_iterations=10)
    ctx.iteration, ctx.env_steps, ctx.num_updates = 3, 96, 12
    other = RunContext(num_iterations=10)
    other.load_state_dict(ctx.state_dict())
    assert other.state_dict() == {"iteration": 3, "env_steps": 96, "num_updates": 12}
    assert other.progress() == 0.3
