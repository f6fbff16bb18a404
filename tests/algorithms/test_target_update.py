"""Target networks: exact soft/hard updates, the update period, frozen copies."""
import functools

import pytest
import torch
from torch import nn

from alf.algorithms.ddpg_algorithm import DdpgAlgorithm
from alf.algorithms.dqn_algorithm import DqnAlgorithm
from alf.algorithms.sac_algorithm import SacAlgorithm
from alf.algorithms.td3_algorithm import Td3Algorithm
from alf.networks import (ActorDistributionNetwork, ActorNetwork, CriticNetwork,
                          NormalProjectionNetwork, QNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext
from alf.utils.target_update import TargetUpdater, make_target


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.bn = nn.BatchNorm1d(2)  # has buffers (running stats), copied as they are


def _pair(seed=0):
    torch.manual_seed(seed)
    online = _Net()
    target = make_target(online)
    with torch.no_grad():  # make them differ
        for p in target.parameters():
            p.copy_(torch.randn_like(p))
        online.bn.running_mean.copy_(torch.tensor([0.5, -0.5]))
    return online, target


def _params(m):
    return [p.detach().clone() for p in m.parameters()]


def test_make_target_is_a_frozen_equal_copy():
    torch.manual_seed(0)
    online = _Net()
    target = make_target(online)
    for p, t in zip(online.parameters(), target.parameters()):
        assert t is not p and t.data_ptr() != p.data_ptr()
        assert torch.equal(p, t)
        assert p.requires_grad and not t.requires_grad
    with torch.no_grad():
        next(online.parameters()).add_(1.0)
    assert not torch.equal(next(online.parameters()), next(target.parameters()))


def test_soft_update_is_exact_lerp_and_copies_buffers():
    online, target = _pair()
    tau = 0.3
    before = _params(target)
    updater = TargetUpdater(online, target, tau=tau, period=1)
    assert updater() is True
    for t0, p, t in zip(before, online.parameters(), target.parameters()):
        expected = (1 - tau) * t0 + tau * p.detach()
        torch.testing.assert_close(t, expected, rtol=0, atol=1e-7)
        assert not t.requires_grad
    assert torch.equal(target.bn.running_mean, online.bn.running_mean)
    # a second step compounds: t2 = (1-tau) t1 + tau p
    mid = _params(target)
    updater()
    for t1, p, t in zip(mid, online.parameters(), target.parameters()):
        torch.testing.assert_close(t, (1 - tau) * t1 + tau * p.detach(), rtol=0, atol=1e-7)


def test_hard_copy_with_tau_one():
    online, target = _pair()
    assert TargetUpdater([online], [target], tau=1.0)() is True
    for p, t in zip(online.parameters(), target.parameters()):
        assert torch.equal(p, t)


@pytest.mark.parametrize("use_step", [False, True])
def test_period_is_respected(use_step):
    online, target = _pair()
    updater = TargetUpdater(online, target, tau=1.0, period=3)
    moved = []
    for step in range(1, 8):
        before = _params(target)
        with torch.no_grad():  # online keeps changing
            for p in online.parameters():
                p.add_(0.1)
        did = updater(step) if use_step else updater()
        now = _params(target)
        changed = any(not torch.equal(a, b) for a, b in zip(before, now))
        assert changed == did
        moved.append(did)
        if did:
            assert all(torch.equal(p, t) for p, t in zip(online.parameters(), target.parameters()))
    assert moved == [False, False, True, False, False, True, False]


def test_step_argument_follows_the_global_counter_not_the_call_count():
    # after a resume the first call may be update 301: period 3 -> it moves at once
    online, target = _pair()
    updater = TargetUpdater(online, target, tau=0.5, period=3)
    assert updater(301) is False and updater(302) is False and updater(303) is True
    updater2 = TargetUpdater(*_pair(), tau=0.5, period=3)
    assert updater2(300) is True


def test_bad_arguments():
    online, target = _pair()
    with pytest.raises(ValueError, match="tau"):
        TargetUpdater(online, target, tau=0.0)
    with pytest.raises(ValueError, match="period"):
        TargetUpdater(online, target, period=0)
    with pytest.raises(ValueError, match="targets"):
        TargetUpdater([online, online], [target])
    with pytest.raises(ValueError, match="shapes"):
        TargetUpdater(nn.Linear(3, 2), nn.Linear(2, 3))


# -------------------------------------------------- algorithms: optimizers never see targets
OBS = TensorSpec((3,))
BOX = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 2)
_squashed = functools.partial(
    ActorDistributionNetwork, fc_layer_params=(8,),
    continuous_projection_net_ctor=functools.partial(NormalProjectionNetwork,
                                                     state_dependent_std=True,
                                                     scale_distribution=True))


def _algorithms():
    ctx = RunContext
    yield DqnAlgorithm(OBS, DISCRETE,
                       q_network_ctor=functools.partial(QNetwork, fc_layer_params=(8,)),
                       context=ctx()), ["_target_q_network"]
    yield SacAlgorithm(OBS, BOX, actor_network_ctor=_squashed,
                       critic_network_ctor=functools.partial(CriticNetwork, fc_layer_params=(8,)),
                       context=ctx()), ["_target_critic"]
    yield SacAlgorithm(OBS, DISCRETE, actor_network_ctor=functools.partial(
        ActorDistributionNetwork, fc_layer_params=(8,)),
        q_network_ctor=functools.partial(QNetwork, fc_layer_params=(8,)),
        context=ctx()), ["_target_critic"]
    for cls in (DdpgAlgorithm, Td3Algorithm):
        yield cls(OBS, BOX,
                  actor_network_ctor=functools.partial(ActorNetwork, fc_layer_params=(8,)),
                  critic_network_ctor=functools.partial(CriticNetwork, fc_layer_params=(8,)),
                  actor_optimizer=Adam(lr=1e-3), critic_optimizer=Adam(lr=1e-3),
                  context=ctx()), ["_target_actor", "_target_critic"]


def test_algorithms_freeze_targets_and_keep_them_out_of_optimizers():
    for alg, target_names in _algorithms():
        optimized = {id(p) for opt in alg.optimizers() for g in opt.param_groups
                     for p in g["params"]}
        target_ids = set()
        for name in target_names:
            target = getattr(alg, name)
            params = list(target.parameters())
            assert params
            assert all(not p.requires_grad for p in params), (type(alg).__name__, name)
            target_ids |= {id(p) for p in params}
        assert not (optimized & target_ids), type(alg).__name__
        # every trainable parameter is optimized exactly once
        trainable = [p for p in alg.parameters() if p.requires_grad]
        assert {id(p) for p in trainable} == optimized, type(alg).__name__
        n_in_opts = sum(len(g["params"]) for opt in alg.optimizers() for g in opt.param_groups)
        assert n_in_opts == len(optimized)
        # targets are checkpointed with the algorithm
        keys = alg.state_dict().keys()
        for name in target_names:
            assert any(k.startswith(name + ".") for k in keys), (type(alg).__name__, name)
