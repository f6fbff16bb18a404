"""Algorithm: loss averaging, gradient clipping, lr schedules, optimizer ownership, checkpoints."""
import math

import pytest
import torch
import torch.nn as nn

from alf.algorithms.algorithm import Algorithm
from alf.data_structures import LossInfo
from alf.tensor_specs import TensorSpec
from alf.utils.optimizers import SGD, Adam
from alf.utils.run_context import RunContext
from alf.utils.schedules import LinearSchedule


class Linear(Algorithm):
    """``w . x`` with a hand-set weight; per-sample loss is ``w . x``."""

    def __init__(self, w=(0.0, 0.0), optimizer=None, context=None, name="Linear", **kwargs):
        super().__init__(optimizer=optimizer, context=context or RunContext(), name=name, **kwargs)
        self.w = nn.Parameter(torch.tensor(w, dtype=torch.float32))

    def loss(self, x):  # x [..., 2] -> [...]
        return x @ self.w


def _step(alg, x, **kwargs):
    return alg.update_with_gradient(LossInfo(loss=alg.loss(x)), **kwargs)


def test_update_averages_the_per_sample_loss():
    alg = Linear(w=(1.0, 2.0), optimizer=SGD(lr=1.0))
    x = torch.tensor([[[1.0, 0.0], [3.0, 2.0]], [[0.0, 1.0], [4.0, 0.0]]])  # [T=2, B=2, 2]
    out = _step(alg, x)
    # loss per sample: 1, 7, 2, 4 -> mean 3.5; gradient = mean x = (2, 0.75)
    assert out.loss.item() == pytest.approx(3.5)
    assert not out.loss.requires_grad
    assert alg.w.detach().tolist() == pytest.approx([1.0 - 2.0, 2.0 - 0.75])
    assert alg.context.num_updates == 1


def test_update_with_valid_masks_and_scalar_loss():
    alg = Linear(w=(1.0, 2.0), optimizer=SGD(lr=1.0))
    x = torch.tensor([[1.0, 0.0], [3.0, 2.0], [0.0, 1.0]])
    mask = torch.tensor([1.0, 0.0, 1.0])
    info = LossInfo(loss=alg.loss(x), scalar_loss=torch.tensor(10.0))
    out = alg.update_with_gradient(info, valid_masks=mask)
    # (1 + 2) / 2 + 10; gradient = mean of the unmasked rows = (0.5, 0.5)
    assert out.loss.item() == pytest.approx(11.5)
    assert alg.w.detach().tolist() == pytest.approx([0.5, 1.5])


def test_gradient_is_clipped_to_the_global_norm():
    x = torch.tensor([[3.0, 4.0]])  # gradient (3, 4), norm 5
    alg = Linear(optimizer=SGD(lr=1.0, gradient_clipping=1.0))
    _step(alg, x)
    assert alg.w.detach().tolist() == pytest.approx([-0.6, -0.8])  # update == clipped gradient
    assert alg.w.grad.norm().item() == pytest.approx(1.0, rel=1e-5)
    alg = Linear(optimizer=SGD(lr=1.0, gradient_clipping=10.0))  # inactive when norm is smaller
    _step(alg, x)
    assert alg.w.detach().tolist() == pytest.approx([-3.0, -4.0])


def test_global_norm_spans_every_parameter_of_the_optimizer():
    class Two(Algorithm):
        def __init__(self):
            super().__init__(optimizer=SGD(lr=1.0, gradient_clipping=1.0), context=RunContext())
            self.a = nn.Parameter(torch.zeros(1))
            self.b = nn.Parameter(torch.zeros(1))

    alg = Two()
    loss = 3.0 * alg.a.sum() + 4.0 * alg.b.sum()  # gradients 3 and 4, global norm 5
    alg.update_with_gradient(LossInfo(loss=loss))
    assert alg.a.item() == pytest.approx(-0.6) and alg.b.item() == pytest.approx(-0.8)


def test_lr_follows_the_schedule_at_the_context_progress():
    ctx = RunContext(num_iterations=10)
    alg = Linear(optimizer=SGD(lr=LinearSchedule(1.0, 0.0)), context=ctx)
    x = torch.tensor([[1.0, 2.0]])
    ctx.iteration = 5  # progress 0.5 -> lr 0.5
    _step(alg, x)
    assert alg.optimizers()[0].param_groups[0]["lr"] == pytest.approx(0.5)
    assert alg.w.detach().tolist() == pytest.approx([-0.5, -1.0])
    ctx.iteration = 8  # progress 0.8 -> lr 0.2
    _step(alg, x)
    assert alg.optimizers()[0].param_groups[0]["lr"] == pytest.approx(0.2)
    assert alg.w.detach().tolist() == pytest.approx([-0.7, -1.4])


def test_optimizer_state_is_in_state_dict_and_restored_into_a_fresh_algorithm():
    x = torch.tensor([[1.0, -2.0], [0.5, 0.5]])
    alg = Linear(w=(0.3, -0.1), optimizer=Adam(lr=0.1))
    _step(alg, x)
    _step(alg, x)
    sd = alg.state_dict()
    assert "_extra_state" in sd
    opt_state = sd["_extra_state"]["optimizers"][0]["state"][0]
    assert torch.equal(opt_state["exp_avg"], alg.optimizers()[0].state[alg.w]["exp_avg"])
    assert float(opt_state["step"]) == 2.0

    fresh = Linear(w=(0.0, 0.0), optimizer=Adam(lr=0.1))
    fresh.load_state_dict(sd)
    assert torch.equal(fresh.w, alg.w)
    restored = fresh.optimizers()[0].state[fresh.w]
    assert torch.equal(restored["exp_avg"], opt_state["exp_avg"])
    assert torch.equal(restored["exp_avg_sq"], opt_state["exp_avg_sq"])
    # identical next step (a fresh Adam would take a full lr-sized step instead)
    _step(alg, x)
    _step(fresh, x)
    assert torch.equal(fresh.w, alg.w)


def test_loading_a_checkpoint_with_a_different_number_of_optimizers_raises():
    with_opt = Linear(optimizer=Adam())
    sd = with_opt.state_dict()
    without = Linear(optimizer=None)
    with pytest.raises(ValueError, match="checkpoint has 1 optimizers, the algorithm has 0"):
        without.load_state_dict(sd)


def test_add_optimizer_gives_modules_their_own_optimizer():
    class WithHead(Algorithm):
        def __init__(self):
            super().__init__(optimizer=SGD(lr=1.0), context=RunContext())
            self.body = nn.Linear(1, 1, bias=False)
            self.head = nn.Linear(1, 1, bias=False)
            nn.init.ones_(self.body.weight)
            nn.init.ones_(self.head.weight)
            self.add_optimizer(SGD(lr=0.1), [self.head])

    alg = WithHead()
    opts = alg.optimizers()
    assert len(opts) == 2
    head_opt = [o for o in opts if o.param_groups[0]["params"][0] is alg.head.weight]
    assert len(head_opt) == 1 and len(head_opt[0].param_groups[0]["params"]) == 1
    body_opt = [o for o in opts if o is not head_opt[0]][0]
    assert [p for p in body_opt.param_groups[0]["params"]] == [alg.body.weight]
    loss = alg.body.weight.sum() + alg.head.weight.sum()  # both gradients 1
    alg.update_with_gradient(LossInfo(loss=loss))
    assert alg.body.weight.item() == pytest.approx(0.0)  # lr 1.0
    assert alg.head.weight.item() == pytest.approx(0.9)  # lr 0.1
    with pytest.raises(RuntimeError, match="add_optimizer must be called before"):
        alg.add_optimizer(SGD(), [alg.body])


def test_child_algorithm_with_its_own_optimizer_is_stepped():
    class Parent(Algorithm):
        def __init__(self, child_optimizer):
            super().__init__(optimizer=SGD(lr=1.0), context=RunContext(), name="Parent")
            self.child = Linear(w=(1.0, 1.0), optimizer=child_optimizer, name="Child")
            self.own = nn.Parameter(torch.ones(1))

    parent = Parent(SGD(lr=0.5))
    assert len(parent.optimizers()) == 2
    parent_params = parent._optimizers[0][2]
    assert len(parent_params) == 1 and parent_params[0] is parent.own  # child's w not claimed
    loss = parent.child.loss(torch.tensor([1.0, 2.0])) + parent.own.sum()
    parent.update_with_gradient(LossInfo(loss=loss))
    assert parent.child.w.detach().tolist() == pytest.approx([0.5, 0.0])  # child's lr 0.5
    assert parent.own.item() == pytest.approx(0.0)  # parent's lr 1.0
    sd = parent.state_dict()
    assert "_extra_state" in sd and "child._extra_state" in sd
    # a child without an optimizer is trained by the parent's
    parent = Parent(None)
    assert len(parent.optimizers()) == 1
    assert {id(p) for p in parent._optimizers[0][2]} == {id(parent.own), id(parent.child.w)}


def test_algorithm_without_optimizer_raises_a_clear_error():
    alg = Linear(optimizer=None)
    with pytest.raises(RuntimeError, match="Linear has no optimizer: pass optimizer= to its constructor"):
        _step(alg, torch.ones(1, 2))


def test_initial_states_follow_the_specs():
    spec = {"h": TensorSpec((3,)), "c": TensorSpec((2, 2), torch.float64)}
    alg = Linear(train_state_spec=spec, rollout_state_spec=TensorSpec((1,)))
    train = alg.get_initial_train_state(4)
    assert train["h"].shape == (4, 3) and train["c"].shape == (4, 2, 2)
    assert train["c"].dtype == torch.float64 and not train["h"].any()
    assert alg.get_initial_rollout_state(2).shape == (2, 1)
    assert alg.get_initial_predict_state(2).shape == (2, 1)  # defaults to the rollout spec
    assert alg.train_state_spec is spec and alg.predict_state_spec == TensorSpec((1,))
