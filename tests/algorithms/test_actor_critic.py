"""ActorCriticLoss by hand on a tiny [T, B] unroll, and one A2C iteration on CartPole."""
import functools
import math

import pytest
import torch

from alf.algorithms.actor_critic_algorithm import ActorCriticAlgorithm, ActorCriticInfo
from alf.algorithms.actor_critic_loss import ActorCriticLoss
from alf.data_structures import StepType
from alf.environments.factory import create_environment
from alf.errors import ConfigError
from alf.networks import ActorDistributionNetwork, ValueNetwork
from alf.trainers.trainer_config import TrainerConfig
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext
from tests.learner_helpers import learner_for

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
GAMMA, LAMBDA = 0.9, 0.8

# One env, T=4: an episode ends (terminates) at step 2, step 3 starts the next.
STEP_TYPE = [F, M, L, F]
REWARD = [0.0, 1.0, 2.0, 0.0]
DISCOUNT = [1.0, 1.0, 0.0, 1.0]
VALUE = [0.5, 1.0, 1.5, 2.0]
LOG_PROB = [-0.1, -0.2, -0.3, -0.4]
ENTROPY = [0.6, 0.5, 0.4, 0.3]

# GAE by hand (t = 2 is LAST: its transition crosses the boundary and is masked):
#   delta0 = 1 + .9*1*1.0 - .5 = 1.4 ; delta1 = 2 + .9*0*1.5 - 1.0 = 1.0 ; A2 = 0
#   A1 = 1.0 ; A0 = 1.4 + .72*1*1.0 = 2.12
GAE = [2.12, 1.0, 0.0]
# Discounted returns (use_gae=False): G2 = V2 = 1.5 ; G1 = 2 + 0 = 2 ; G0 = 1 + .9*2 = 2.8
MC_ADV = [2.8 - 0.5, 2.0 - 1.0, 0.0]


def _info(requires_grad=False):
    col = lambda xs, dt=torch.float32: torch.tensor(xs, dtype=dt).unsqueeze(1)  # noqa: E731 [T, 1]
    value = col(VALUE).requires_grad_(requires_grad)
    log_prob = col(LOG_PROB).requires_grad_(requires_grad)
    entropy = col(ENTROPY).requires_grad_(requires_grad)
    return ActorCriticInfo(step_type=col(STEP_TYPE, torch.int32), reward=col(REWARD),
                           discount=col(DISCOUNT), value=value, log_prob=log_prob,
                           entropy=entropy)


def _expected(adv, ent_reg=0.01, td_weight=0.5, td_adv=None):
    """Masked mean over the valid transitions t = 0, 1 (t = 2 is LAST)."""
    td_adv = adv if td_adv is None else td_adv  # returns - values
    per_step = [-adv[t] * LOG_PROB[t] + td_weight * td_adv[t] ** 2 - ent_reg * ENTROPY[t]
                for t in range(2)]
    return sum(per_step) / 2


def test_a2c_loss_with_gae_by_hand():
    loss_fn = ActorCriticLoss(gamma=GAMMA, td_lambda=LAMBDA, entropy_regularization=0.01)
    adv, returns = loss_fn.advantages_and_returns(*[getattr(_info(), k) for k in
                                                    ("reward", "value", "step_type", "discount")])
    assert adv.squeeze(1).tolist() == pytest.approx(GAE)
    assert returns.squeeze(1).tolist() == pytest.approx([2.62, 2.0, 1.5])
    info = _info(requires_grad=True)
    out = loss_fn(info)
    assert out.loss.shape == (3, 1)  # [T-1, B]
    assert out.loss[2].item() == 0.0  # LAST step masked
    assert out.loss.mean().item() == pytest.approx(_expected(GAE), rel=1e-5)
    out.loss.mean().backward()
    # d/dlog_prob: -A_t / n_valid on valid steps, nothing on the masked one or the bootstrap step
    assert info.log_prob.grad.squeeze(1).tolist() == pytest.approx([-2.12 / 2, -1.0 / 2, 0.0, 0.0])
    # d/dvalue from the td term only: 0.5 * 2 * (V - R) / 2
    assert info.value.grad.squeeze(1).tolist() == pytest.approx([-2.12 / 2, -1.0 / 2, 0.0, 0.0])
    assert info.entropy.grad.squeeze(1).tolist() == pytest.approx([-0.01 / 2, -0.01 / 2, 0, 0])


def test_a2c_loss_with_normalized_advantages():
    loss_fn = ActorCriticLoss(gamma=GAMMA, td_lambda=LAMBDA, normalize_advantages=True,
                              entropy_regularization=0.01)
    # over the valid steps: mean 1.56, population std 0.56 -> normalised advantages (1, -1)
    out = loss_fn(_info())
    # the value target still uses the raw advantages
    assert out.loss.mean().item() == pytest.approx(_expected([1.0, -1.0], td_adv=GAE), rel=1e-4)


def test_a2c_loss_with_monte_carlo_returns():
    loss_fn = ActorCriticLoss(gamma=GAMMA, use_gae=False, entropy_regularization=0.0,
                              td_loss_weight=1.0)
    out = loss_fn(_info())
    assert out.loss.mean().item() == pytest.approx(_expected(MC_ADV, ent_reg=0.0, td_weight=1.0),
                                                   rel=1e-5)
    assert set(out.extra._fields) == {"pg_loss", "td_loss", "neg_entropy"}


def _a2c(env, cfg, ctx):
    """A prepared Learner training a small A2C on ``env`` (``learner.algorithm``)."""
    alg = ActorCriticAlgorithm(
        env.observation_spec(), env.action_spec(), context=ctx,
        actor_network_ctor=functools.partial(ActorDistributionNetwork, fc_layer_params=(8,)),
        value_network_ctor=functools.partial(ValueNetwork, fc_layer_params=(8,)),
        optimizer=Adam(lr=1e-2))
    return learner_for(alg, env, cfg)


def test_a2c_train_iter_on_cartpole_updates_every_parameter_once():
    env = create_environment("CartPole-v1", 2, backend="vector", seed=0)
    try:
        cfg = TrainerConfig(algorithm_ctor=ActorCriticAlgorithm, num_iterations=2, unroll_length=4)
        ctx = RunContext(num_iterations=2)
        learner = _a2c(env, cfg, ctx)
        alg = learner.algorithm
        before = [p.detach().clone() for p in alg.parameters()]
        assert learner.train_iter() == 8
        assert ctx.env_steps == 8 and ctx.num_updates == 1
        assert learner.replay_buffer is None  # on-policy: no buffer
        assert all(not torch.equal(a, p) for a, p in zip(before, alg.parameters()))
        with pytest.raises(ConfigError, match="on-policy and needs TrainerConfig.unroll_length >= 2"):
            _a2c(env, TrainerConfig(algorithm_ctor=ActorCriticAlgorithm, num_iterations=1,
                                    unroll_length=1), ctx)
    finally:
        env.close()


def test_a2c_loss_summaries_are_masked_means():
    # the summaries must describe the loss that is optimised: averages over the valid
    # transitions t = 0, 1 only (t = 2 is LAST and masked), not over all T-1 rows
    loss_fn = ActorCriticLoss(gamma=GAMMA, td_lambda=LAMBDA, entropy_regularization=0.01)
    extra = loss_fn(_info(requires_grad=True)).extra
    pg = [-GAE[t] * LOG_PROB[t] for t in range(2)]
    td = [GAE[t] ** 2 for t in range(2)]  # returns - values = advantages with GAE
    ent = [-ENTROPY[t] for t in range(2)]
    assert extra.pg_loss.item() == pytest.approx(sum(pg) / 2, rel=1e-6)
    assert extra.td_loss.item() == pytest.approx(sum(td) / 2, rel=1e-6)
    assert extra.neg_entropy.item() == pytest.approx(sum(ent) / 2, rel=1e-6)
    # the unmasked mean (what was reported before) differs: the LAST row counts there
    assert extra.neg_entropy.item() != pytest.approx(sum(-e for e in ENTROPY[:3]) / 3)
    assert not any(x.requires_grad for x in extra)
