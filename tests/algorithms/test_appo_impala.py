"""APPO and IMPALA: V-trace preprocessing against value_ops' on-policy estimators and a
hand-computed off-policy case, the IMPALA loss by hand, short CartPole learning runs, and
PPO's refusal of async unrolls."""
import functools
import math

import pytest
import torch

from alf import nest
from alf.algorithms.appo_algorithm import APPOAlgorithm, vtrace_statistics
from alf.algorithms.impala_algorithm import ImpalaAlgorithm, ImpalaLoss
from alf.algorithms.ppo_algorithm import PPOAlgorithm, PPORolloutInfo, PPOTrainInfo
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import ConfigError
from alf.networks import (ActorDistributionNetwork, ActorDistributionRNNNetwork, ValueNetwork,
                          ValueRNNNetwork)
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.trainers.trainer_config import TrainerConfig
from alf.utils import value_ops
from alf.utils.optimizers import Adam
from alf.utils.run_context import RunContext
from tests.learner_helpers import learner_for

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST

SMALL = dict(actor_network_ctor=functools.partial(ActorDistributionNetwork, fc_layer_params=(8,)),
             value_network_ctor=functools.partial(ValueNetwork, fc_layer_params=(8,)))
RNN = dict(actor_network_ctor=functools.partial(ActorDistributionRNNNetwork,
                                                input_fc_layer_params=(8,), lstm_hidden_size=8),
           value_network_ctor=functools.partial(ValueRNNNetwork, input_fc_layer_params=(8,),
                                                lstm_hidden_size=8))


def _alg(cls=APPOAlgorithm, nets=SMALL, **kwargs):
    torch.manual_seed(0)
    return cls(TensorSpec((4,)), BoundedTensorSpec((), torch.int64, 0, 1),
               context=RunContext(num_iterations=10), optimizer=Adam(lr=1e-3), **nets, **kwargs)


def _buffer(alg, B=3, T=6, seed=0, state=()):
    """A ``[B, T]`` buffer as gathered: episodes end (terminated and truncated) and restart."""
    g = torch.Generator().manual_seed(seed)
    step_type = torch.tensor([[F, M, L, F, M, M], [M, M, M, L, F, M],
                              [M, M, M, M, M, M]], dtype=torch.int32)[:B, :T]
    discount = torch.tensor([[1., 1., 0., 1., 1., 1.], [1., 1., 1., 1., 1., 1.],  # env 1 truncated
                             [1., 1., 1., 1., 1., 1.]])[:B, :T]
    ts = TimeStep(step_type=step_type, reward=torch.rand(B, T, generator=g) * (step_type != F),
                  discount=discount, observation=torch.randn(B, T, 4, generator=g),
                  prev_action=torch.zeros(B, T, dtype=torch.int64),
                  env_id=torch.arange(B)[:, None].expand(B, T), env_info={})
    exp = Experience(time_step=ts, action=torch.randint(0, 2, (B, T), generator=g),
                     rollout_info=PPORolloutInfo(log_prob=torch.zeros(B, T),
                                                 value=torch.zeros(B, T)), state=state)
    log_pi, value = alg.current_log_prob_and_value(exp)
    # the behaviour policy is the current one: what the sync whole-buffer regime stores
    return exp._replace(rollout_info=PPORolloutInfo(log_prob=log_pi, value=value))


def _td(exp, gamma, lam, fn):
    ts = exp.time_step
    return fn(ts.reward, exp.rollout_info.value, ts.step_type, ts.discount, gamma, lam,
              time_major=False)


# --------------------------------------------------------------------- (a) on-policy
@pytest.mark.parametrize("cls", [APPOAlgorithm, ImpalaAlgorithm])
def test_on_policy_vtrace_is_td_lambda_returns_and_gae1_advantages(cls):
    alg = _alg(cls, gamma=0.9, vtrace_lambda=1.0)
    exp = _buffer(alg)
    out = alg.preprocess_experience(exp)
    for x in nest.flatten(out):
        assert x.shape[:2] == (3, 5)  # [B, T-1]: the last step is bootstrap only
    gae1 = _td(exp, 0.9, 1.0, value_ops.generalized_advantage_estimation)
    torch.testing.assert_close(out.rollout_info.advantages, gae1)
    torch.testing.assert_close(out.rollout_info.returns,
                               _td(exp, 0.9, 1.0, value_ops.td_lambda_return))
    assert out.rollout_info.advantages[0, 2] == 0.0  # LAST: nothing crosses the boundary
    assert out.rollout_info.advantages.abs().sum() > 0.1  # not trivially zero
    torch.testing.assert_close(out.rollout_info.value, exp.rollout_info.value[:, :-1])
    torch.testing.assert_close(out.time_step.observation, exp.time_step.observation[:, :-1])


def test_on_policy_vtrace_lambda_below_one_gives_td_lambda_returns():
    alg = _alg(gamma=0.9, vtrace_lambda=0.8)
    exp = _buffer(alg)
    out = alg.preprocess_experience(exp)
    vs = _td(exp, 0.9, 0.8, value_ops.td_lambda_return)
    torch.testing.assert_close(out.rollout_info.returns, vs)
    # advantages bootstrap from the next step's vs: r + gamma d vs' - V (0 at LAST)
    ts, v = exp.time_step, exp.rollout_info.value
    vs_next = torch.cat([vs[:, 1:], v[:, -1:]], dim=1)
    expected = (ts.reward[:, 1:] + 0.9 * ts.discount[:, 1:] * vs_next - v[:, :-1]) * \
        (ts.step_type[:, :-1] != L)
    torch.testing.assert_close(out.rollout_info.advantages, expected)


def test_recurrent_networks_are_run_from_the_stored_states():
    alg = _alg(nets=RNN, gamma=0.9)
    B, T = 3, 6
    g = torch.Generator().manual_seed(3)
    spec_state = alg.get_initial_train_state(B)
    state = nest.map_structure(
        lambda s: torch.randn((B, T) + tuple(s.shape[1:]), generator=g), spec_state)
    exp = _buffer(alg, B, T, state=state)
    # reference: step by step from the stored state of step 0, reset at FIRST
    s = nest.map_structure(lambda x: x[:, 0], state)
    init = alg.get_initial_train_state(B)
    for t in range(T):
        first = exp.time_step.step_type[:, t] == F
        s = nest.map_structure(lambda x, i: torch.where(first[:, None], i, x), s, init)
        with torch.no_grad():
            dist, value, s = alg._policy(exp.time_step.observation[:, t], s)
        torch.testing.assert_close(exp.rollout_info.value[:, t], value)
        torch.testing.assert_close(exp.rollout_info.log_prob[:, t],
                                   dist.log_prob(exp.action[:, t]))
    # a different stored state at step 0 changes the values of env 2 (no FIRST in it)
    other = nest.map_structure(lambda x: x + 1.0, state)
    _, v2 = alg.current_log_prob_and_value(exp._replace(state=other))
    assert (v2[2] - exp.rollout_info.value[2]).abs().max() > 1e-4
    out = alg.preprocess_experience(exp)
    torch.testing.assert_close(out.rollout_info.returns,
                               _td(exp, 0.9, 1.0, value_ops.td_lambda_return))


# ------------------------------------------------------------- (b) off-policy clipping
def test_off_policy_rhos_are_clipped_by_hand():
    alg = _alg(gamma=0.9, vtrace_lambda=1.0)
    exp = _buffer(alg, B=1, T=3, seed=1)
    exp = exp._replace(time_step=exp.time_step._replace(
        step_type=torch.tensor([[M, M, M]], dtype=torch.int32),
        discount=torch.ones(1, 3), reward=torch.tensor([[0.0, 1.0, 2.0]])))
    info = exp.rollout_info
    # behaviour log-probs: rho_0 = pi/mu = 3 (clipped to 1), rho_1 = 0.5 (kept)
    mu = info.log_prob - torch.tensor([[math.log(3.0), math.log(0.5), 0.0]])
    exp = exp._replace(rollout_info=info._replace(log_prob=mu))
    V = info.value[0].tolist()
    g = 0.9
    vs1 = V[1] + 0.5 * (2.0 + g * V[2] - V[1])
    vs0 = V[0] + 1.0 * (1.0 + g * V[1] - V[0]) + g * 1.0 * (vs1 - V[1])
    out = alg.preprocess_experience(exp).rollout_info
    assert out.returns[0].tolist() == pytest.approx([vs0, vs1], rel=1e-5)
    assert out.advantages[0].tolist() == pytest.approx(
        [1.0 * (1.0 + g * vs1 - V[0]), 0.5 * (2.0 + g * V[2] - V[1])], rel=1e-5)

    # without clipping the weight 3 shows up in the advantage and the value target
    free = _alg(gamma=0.9, clip_rho_threshold=None, clip_c_threshold=None,
                clip_pg_rho_threshold=None)
    out = free.preprocess_experience(exp).rollout_info
    assert out.advantages[0, 0].item() == pytest.approx(3.0 * (1.0 + g * vs1 - V[0]), rel=1e-5)
    assert out.returns[0, 0].item() == pytest.approx(
        V[0] + 3.0 * (1.0 + g * V[1] - V[0]) + g * 3.0 * (vs1 - V[1]), rel=1e-5)

    stats = vtrace_statistics(torch.tensor([[math.log(3.0), math.log(0.5), 0.0]]),
                              exp.time_step.step_type, 1.0)  # the last step is excluded
    assert stats["rho_mean"].item() == pytest.approx(1.75)
    assert stats["rho_clip_fraction"].item() == pytest.approx(0.5)
    assert stats["abs_log_rho_mean"].item() == pytest.approx((math.log(3) + math.log(2)) / 2)


# -------------------------------------------------------------------- IMPALA's loss
def test_impala_loss_by_hand():
    t = lambda xs: torch.tensor(xs, dtype=torch.float32).reshape(2, 2)  # noqa: E731
    log_prob = t([-0.5, -1.0, -0.2, -0.7]).requires_grad_()
    value = t([1.0, 2.0, 0.5, 0.0]).requires_grad_()
    info = PPOTrainInfo(step_type=torch.tensor([[M, L], [F, M]], dtype=torch.int32),
                        log_prob=log_prob, advantages=t([2.0, 5.0, -1.0, 0.5]),
                        returns=t([3.0, 0.0, 0.0, 1.0]), value=value,
                        entropy=t([0.6, 0.9, 0.3, 0.1]))
    out = ImpalaLoss(entropy_regularization=0.01, td_loss_weight=0.5)(info)
    valid = [0, 2, 3]  # k = 1 is LAST
    adv, lp, ret, v, ent = [2.0, 5.0, -1.0, 0.5], [-0.5, -1.0, -0.2, -0.7], \
        [3.0, 0.0, 0.0, 1.0], [1.0, 2.0, 0.5, 0.0], [0.6, 0.9, 0.3, 0.1]
    expected = sum(-adv[k] * lp[k] + 0.5 * 0.5 * (ret[k] - v[k]) ** 2 - 0.01 * ent[k]
                   for k in valid) / 3
    assert out.loss.mean().item() == pytest.approx(expected, rel=1e-5)
    assert out.extra.td_loss.item() == pytest.approx(
        sum(0.5 * (ret[k] - v[k]) ** 2 for k in valid) / 3, rel=1e-5)
    out.loss.mean().backward()
    assert log_prob.grad.reshape(-1).tolist() == pytest.approx(
        [-2.0 / 3, 0.0, 1.0 / 3, -0.5 / 3], abs=1e-6)
    assert value.grad.reshape(-1).tolist() == pytest.approx(
        [0.25 * 2 * (1.0 - 3.0) / 3, 0.0, 0.25 * 2 * 0.5 / 3, 0.25 * 2 * -1.0 / 3], abs=1e-6)


# ---------------------------------------------------------------- (c) learning runs
def _scalars(root, tag):
    import glob
    import os
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(glob.glob(os.path.join(str(root), "events.out.tfevents.*"))[0])
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


# Final average return with seed 0 (the runs are deterministic): APPO 215 at 15k steps
# (seeds 1-3: 306, 163, 198; 442 at 30k, 3x the time), IMPALA 167 at 64k (115 at 40k, too
# close to the threshold to shorten).
@pytest.mark.parametrize("name,conf,steps", [
    ("APPOAlgorithm", "include 'appo_cart_pole.gin'\n", 15000),
    ("ImpalaAlgorithm", "include 'impala_cart_pole.gin'\nTrainerConfig.evaluate = False\n",
     64000)])
def test_learns_cart_pole_in_a_short_sync_run(make_trainer, tmp_path, name, conf, steps):
    """A random policy averages ~22; both clearly learn within a few seconds of training."""
    root = tmp_path / "run"
    trainer = make_trainer(root, conf, [
        "TrainerConfig.random_seed=0", f"TrainerConfig.num_env_steps={steps}",
        "TrainerConfig.summary_interval=1", "TrainerConfig.progress_interval_seconds=1000.0",
        "TrainerConfig.async_unroll=False"])  # appo_cart_pole.gin ships async
    trainer.run()
    assert type(trainer.algorithm).__name__ == name
    returns = [v for _, v in _scalars(root, "Metrics/AverageReturn")]
    assert returns[0] < 40
    assert trainer.learner.metrics.average_return() > 100
    rho = [v for _, v in _scalars(root, f"VTrace/{name}/rho_mean")]
    # sync: only the kept first step of each iteration's buffer is off-policy (see below)
    assert rho and all(abs(r - 1.0) < 0.02 for r in rho)
    clipped = [v for _, v in _scalars(root, f"VTrace/{name}/rho_clip_fraction")]
    assert max(clipped) < 0.1  # at most the kept steps (1 in 33 for IMPALA's 32-step unrolls)


def test_sync_whole_buffer_only_the_kept_step_is_off_policy():
    """In the sync regime the behaviour log-probs are the current policy's except at the
    step kept from the previous iteration (rolled out before that iteration's updates)."""
    from alf.environments.factory import create_environment
    log_rhos = []

    class Recording(APPOAlgorithm):
        def preprocess_experience(self, experience):
            log_pi, _ = self.current_log_prob_and_value(experience)
            log_rhos.append(log_pi - experience.rollout_info.log_prob)
            return super().preprocess_experience(experience)

    env = create_environment("CartPole-v1", 2, backend="vector", seed=0)
    try:
        config = TrainerConfig(algorithm_ctor=Recording, num_iterations=2, unroll_length=4,
                               mini_batch_size=4, num_updates_per_train_iter=2)
        alg = Recording(env.observation_spec(), env.action_spec(),
                        context=RunContext(num_iterations=2), optimizer=Adam(lr=1e-2), **SMALL)
        learner = learner_for(alg, env, config)
        learner.train_iter()
        learner.train_iter()
    finally:
        env.close()
    first, second = log_rhos
    assert first.shape == (2, 4) and second.shape == (2, 5)  # + the kept step
    torch.testing.assert_close(first, torch.zeros(2, 4), atol=1e-5, rtol=0)
    torch.testing.assert_close(second[:, 1:], torch.zeros(2, 4), atol=1e-5, rtol=0)
    assert second[:, 0].abs().min() > 1e-4  # the policy moved since the kept step was acted


# -------------------------------------------------------------- (d) PPO and async unroll
def _learner(cls, config):
    """A Learner around ``_alg(cls)`` stepping CartPole (the config is checked when the
    Learner is prepared)."""
    from alf.environments.factory import create_environment
    env = create_environment("CartPole-v1", 2, backend="vector", seed=0)
    try:
        return learner_for(_alg(cls), env, config)
    finally:
        env.close()


def test_ppo_refuses_async_unroll_but_appo_and_impala_accept_it():
    config = TrainerConfig(algorithm_ctor=PPOAlgorithm, num_iterations=1, unroll_length=4,
                           async_unroll=True)
    with pytest.raises(ConfigError) as e:
        _learner(PPOAlgorithm, config)
    assert str(e.value).splitlines()[0] == (  # gin appends "In call to configurable ..."
        "PPOAlgorithm trains on its own fresh samples; with TrainerConfig.async_unroll=True "
        "the samples come from an older policy: use APPOAlgorithm (PPO's loss with V-trace "
        "correction), e.g. --conf=appo_cart_pole.gin (CartPole-v1) or "
        "--conf=appo_grid_multidiscrete.gin (GridMove-v0) or --conf=appo_hybrid_action.gin "
        "(HybridTarget-v0) or --conf=appo_atari.gin (ALE/Breakout-v5)")
    # no env in the (empty) gin config: every APPO example

    class MyPPO(PPOAlgorithm):
        pass

    with pytest.raises(ConfigError, match="^MyPPO trains on its own fresh samples"):
        _learner(MyPPO, config)
    for cls in (APPOAlgorithm, ImpalaAlgorithm):
        assert cls.supports_async_unroll
        assert _learner(cls, config).settings.async_unroll
    config.async_unroll = False
    assert not _learner(PPOAlgorithm, config).settings.async_unroll


def test_train_command_refuses_ppo_with_async_unroll(alf_cli, tmp_path):
    proc = alf_cli.run("alf.bin.train", ["--conf=ppo_cart_pole.gin", "--root_dir=runs/x",
                                         "--conf_param", "TrainerConfig.async_unroll=True"],
                       tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "alf.bin.train: error: PPOAlgorithm trains on its own fresh samples; with "
        "TrainerConfig.async_unroll=True the samples come from an older policy: use "
        "APPOAlgorithm"), proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing written, no worker left to reap


# ------------------------------------------------------------------- Atari examples
@pytest.mark.parametrize("conf,name,eps", [
    ("appo_atari.gin", "APPOAlgorithm", 1e-5),  # Adam's
    ("impala_atari.gin", "ImpalaAlgorithm", 0.01 / 160)])  # RMSprop's, per-step mean loss
def test_atari_examples_build_and_train_two_iterations(make_trainer, tmp_path, conf, name, eps):
    pytest.importorskip("ale_py")
    from alf.networks.image_encoders import NatureCnnEncoder
    root = tmp_path / "run"
    trainer = make_trainer(root, f"include '{conf}'\n", [
        "create_environment.num_parallel_environments=2", "TrainerConfig.unroll_length=6",
        "TrainerConfig.num_iterations=2", "TrainerConfig.num_env_steps=0",
        "TrainerConfig.mini_batch_size=4", "TrainerConfig.num_threads=1",
        "TrainerConfig.summary_interval=1", "TrainerConfig.progress_interval_seconds=1000.0"])
    trainer.run()
    alg = trainer.algorithm
    assert type(alg).__name__ == name and isinstance(alg._encoder, NatureCnnEncoder)
    assert trainer.context.env_steps == 24  # 2 iterations x 2 envs x 6 steps
    (opt, _, _), = alg._optimizers
    assert opt.defaults["eps"] == pytest.approx(eps)
    assert ("alpha" in opt.defaults) == (name == "ImpalaAlgorithm")  # RMSprop's decay
    rho = [v for _, v in _scalars(root, f"VTrace/{name}/rho_mean")]
    assert len(rho) == 2 and all(r > 0 for r in rho)
