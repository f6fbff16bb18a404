"""The non-finite guard in ``Algorithm.update_with_gradient`` (alf.utils.finite_guard).

Reported: a run whose learning rate made every weight NaN finished with exit 0 and NaN
checkpoints; a SAC run died in a 72-line torch traceback naming no value or cause.
"""
import math

import pytest
import torch
import torch.nn as nn

from alf.algorithms.algorithm import Algorithm
from alf.data_structures import LossInfo
from alf.errors import NonFiniteError
from alf.utils.finite_guard import PARAM_LIMIT, FiniteGuard, first_non_finite, flat_tensors
from alf.utils.optimizers import SGD, Adam
from alf.utils.run_context import RunContext


class Net(Algorithm):
    """Two layers, so a state_dict name has a path; loss = mean of the output."""

    def __init__(self, optimizer, guard=None, name="Net"):
        context = RunContext()
        context.finite_guard = guard
        super().__init__(optimizer=optimizer, context=context, name=name)
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))

    def loss_info(self, x, extra_scale=1.0):
        out = self.body(x).squeeze(-1)  # [B]
        td = out ** 2 * extra_scale
        return LossInfo(loss=td + out, extra={"td_loss": td, "pg_loss": out})


X = torch.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]])


def test_a_non_finite_loss_term_is_named_and_no_step_is_taken():
    alg = Net(SGD(lr=0.1), FiniteGuard())
    before = {k: v.clone() for k, v in alg.state_dict().items() if k != "_extra_state"}
    alg.context.iteration = 7
    with pytest.raises(NonFiniteError) as e:
        alg.update_with_gradient(alg.loss_info(X, extra_scale=math.inf))
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("training went non-finite at iteration 7 (update 1): the loss "
                              "term Loss/Net/td_loss (inf); the optimizer step was not taken")
    assert "the learning rate (0.1 now" in message and "the precision (fp32 here)" in message
    assert "TrainerConfig.check_finite=False" in message
    for k, v in alg.state_dict().items():  # not a single weight moved
        if k != "_extra_state":
            assert torch.equal(v, before[k]), k
    assert alg.context.num_updates == 0


def test_a_non_finite_gradient_is_named_by_its_state_dict_key():
    alg = Net(SGD(lr=0.1), FiniteGuard())
    alg.body[2].weight.register_hook(lambda g: torch.full_like(g, math.nan))
    with pytest.raises(NonFiniteError, match=r"the gradient of body\.2\.weight \(nan\); the "
                                             r"optimizer step was not taken"):
        alg.update_with_gradient(alg.loss_info(X))


def test_a_huge_finite_step_is_caught_before_the_next_forward_pass():
    alg = Net(Adam(lr=1e30), FiniteGuard())
    with pytest.raises(NonFiniteError) as e:
        alg.update_with_gradient(alg.loss_info(X))
    message = str(e.value)
    assert "the parameter body.0.weight (|x| up to 1e+30); the step was taken, and training " \
           "stops before anything uses it" in message, message
    assert "the learning rate (1e+30 now" in message


def test_off_the_same_update_goes_through():
    alg = Net(Adam(lr=1e30), None)
    alg.update_with_gradient(alg.loss_info(X))
    assert float(alg.body[0].weight.detach().abs().max()) > PARAM_LIMIT


def test_the_guard_changes_no_number():
    """Bit-identical: weights and optimizer state after 20 updates, guard on and off."""
    runs = []
    for guard in (FiniteGuard(), None, FiniteGuard(defer=True)):
        alg = Net(Adam(lr=1e-2, gradient_clipping=0.5), guard)
        for i in range(20):
            alg.update_with_gradient(alg.loss_info(X * (i + 1)))
        runs.append(alg.state_dict())
    for other in runs[1:]:
        for (k, a), b in zip(flat_tensors(runs[0]), (t for _, t in flat_tensors(other))):
            assert torch.equal(a, b), k


def test_deferred_flags_are_read_once_per_iteration():
    """The CUDA mode (forced here on the CPU): no read per update, one at flush."""
    alg = Net(SGD(lr=0.1), FiniteGuard(defer=True))
    alg.update_with_gradient(alg.loss_info(X, extra_scale=math.nan))  # no raise yet
    alg.update_with_gradient(alg.loss_info(X))
    with pytest.raises(NonFiniteError, match="found at the end of the iteration"):
        alg.context.finite_guard.flush()
    alg.context.finite_guard.flush()  # read and cleared


def test_explain_names_a_diverged_parameter_instead_of_torchs_message():
    alg = Net(SGD(lr=0.1), FiniteGuard())
    error = RuntimeError("normal expects all elements of std >= 0.0")
    assert alg.context.finite_guard.explain(alg, error) is error  # finite weights: as is
    with torch.no_grad():
        alg.body[2].bias.fill_(math.nan)
    explained = alg.context.finite_guard.explain(alg, error)
    assert isinstance(explained, NonFiniteError)
    assert "the parameter body.2.bias (nan) (RuntimeError: normal expects all elements of " \
           "std >= 0.0)" in str(explained)


def test_first_non_finite_over_a_checkpoint_nest():
    state = {"a": torch.zeros(2), "opt": [{"exp_avg": torch.tensor([1.0, -math.inf])}],
             "n": torch.tensor([3])}
    assert first_non_finite(flat_tensors(state)) == ("opt.0.exp_avg", "-inf")
    assert first_non_finite(flat_tensors({"a": torch.ones(3)})) is None


def test_checkpoint_error_names_a_buffer_or_an_optimizer_state_in_the_guards_form():
    """What a checkpoint save raises for a tensor the update's checks do not watch."""
    guard = FiniteGuard()
    alg = Net(Adam(lr=0.1), guard)
    alg.register_buffer("stats_var", torch.ones(2))
    alg.update_with_gradient(alg.loss_info(X))  # Adam's moments exist now
    alg.context.iteration = 5
    names = [n for n, _ in flat_tensors(alg.state_dict())]
    moment = next(n for n in names if n.startswith("_extra_state") and "exp_avg" in n)
    buffer = guard.checkpoint_error(alg, "stats_var", "inf")
    assert str(buffer).startswith("training went non-finite by iteration 5: the buffer "
                                  "stats_var (inf), found in the checkpoint of iteration 5, "
                                  "which was not written. Likely causes: the learning rate "
                                  "(0.1 now"), str(buffer)
    assert f"the optimizer state {moment} (nan), found" in str(
        guard.checkpoint_error(alg, moment, "nan"))
    assert "the parameter body.0.weight (nan)" in str(
        guard.checkpoint_error(alg, "body.0.weight", "nan"))
    assert not guard.failed  # nothing in training failed: the acting thread may go on


def test_a_failed_check_is_recorded_before_it_raises_and_raised_again_elsewhere():
    guard = FiniteGuard()
    alg = Net(SGD(lr=1e30), guard)
    guard.raise_if_failed()  # nothing failed yet
    with pytest.raises(NonFiniteError) as first:
        alg.update_with_gradient(alg.loss_info(X))
    assert guard.failed and guard.failure is first.value
    with pytest.raises(NonFiniteError) as again:
        guard.raise_if_failed()
    assert str(again.value) == str(first.value) and again.value is not first.value


def test_within_agrees_with_the_exact_max_on_every_kind_of_value():
    """The CPU's L2-first check decides exactly as ``max_abs(x) <= limit`` (finiteness for an
    infinite limit): NaN, +-inf, past the limit, and many values whose sum of squares
    overflows though each is within the limit."""
    import math
    from alf.utils.finite_guard import PARAM_LIMIT, max_abs, within
    cases = [
        [torch.randn(64, 64), torch.randn(64)],
        [torch.randn(8), torch.tensor([math.nan])],
        [torch.randn(8), torch.tensor([math.inf, 1.0])],
        [torch.tensor([-math.inf])],
        [torch.full((4,), 3e19)],                 # past 2**64, finite
        [torch.full((10,), 1.5e19)],              # within 2**64; the L2 sum overflows fp32
        [torch.full((10,), 1e30), torch.zeros(3)],
        [torch.randn(16).bfloat16()],
    ]
    for tensors in cases:
        for limit in (PARAM_LIMIT, math.inf):
            peak = max_abs(tensors)
            exact = bool(peak <= limit) if math.isfinite(limit) else bool(torch.isfinite(peak))
            for may_read in (True, False):
                assert bool(within(tensors, limit, may_read)) == exact, (tensors, limit)
