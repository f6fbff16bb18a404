"""A recurrent representation learner (``LatentDynamicsLearner(recurrent=True)``: an
LSTM over the observation history): its state rides in the Agent's, restarts at
episode starts, is stored with each step and restarts the encoder on trained
sequences; it trains on sequences, in the sync, replay and async regimes."""
import os

import pytest
import torch

from alf.algorithms.agent import Agent, AgentState
from alf.algorithms.latent_dynamics_learner import LatentDynamicsLearner
from alf.algorithms.representation_learner import RepresentationLearner
from alf.data_structures import StepType
from alf.errors import ConfigError
from alf.networks import LSTMEncodingNetwork
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import Adam

OBS = TensorSpec((4,))
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 2)

RECURRENT = """
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @{rl}
Agent.representation_learner_cls = @LatentDynamicsLearner
LatentDynamicsLearner.recurrent = True
LatentDynamicsLearner.fc_layer_params = (16,)
LatentDynamicsLearner.feature_size = 8
LatentDynamicsLearner.dynamics_fc_layer_params = (16,)
LatentDynamicsLearner.optimizer = @repr/alf.optimizers.Adam()
repr/alf.optimizers.Adam.lr = 1e-3
TrainerConfig.mini_batch_length = 4
"""


def _learner():
    return LatentDynamicsLearner(OBS, DISCRETE, fc_layer_params=(16,), feature_size=8,
                                 dynamics_fc_layer_params=(16,), recurrent=True,
                                 optimizer=Adam(lr=3e-3))


def test_the_sequence_encoding_restarts_at_episode_starts():
    torch.manual_seed(0)
    learner = _learner()
    assert learner.is_recurrent and isinstance(learner.encoder, LSTMEncodingNetwork)
    B, L = 3, 5
    obs = torch.randn(B, L, 4)
    step_type = torch.full((B, L), int(StepType.MID), dtype=torch.int32)
    step_type[1, 2] = int(StepType.FIRST)
    initial = learner.get_initial_state(B)
    initial = tuple((h + 0.5, c - 0.5) for h, c in initial)  # a stored mid-episode state
    z = learner.encode_sequence(obs, step_type, initial)
    assert z.shape == (B, L, 8)
    # step by step from the same state, by hand
    state, by_hand = initial, []
    for t in range(L):
        if t == 2:  # env 1 restarts from zeros
            zeros = learner.get_initial_state(B)
            state = tuple((torch.where(torch.arange(B)[:, None] == 1, zh, h),
                           torch.where(torch.arange(B)[:, None] == 1, zc, c))
                          for (h, c), (zh, zc) in zip(state, zeros))
        f, state = learner.encode_step(obs[:, t], state)
        by_hand.append(f)
    assert torch.allclose(z, torch.stack(by_hand, 1), atol=1e-6)
    # after the restart env 1's features do not depend on what came before
    other = obs.clone()
    other[1, :2] = torch.randn(2, 4)
    z2 = learner.encode_sequence(other, step_type, initial)
    assert torch.allclose(z2[1, 2:], z[1, 2:], atol=1e-6)
    assert not torch.allclose(z2[1, :2], z[1, :2])


def test_the_sequence_loss_falls_where_the_history_decides_the_next_latent():
    """Observations show only every other step (zeros between): predicting the next
    latent needs what the LSTM remembers."""
    torch.manual_seed(0)
    learner = _learner()
    B, L = 64, 6
    base = torch.randn(B, 1, 4)
    obs = base.expand(B, L, 4).clone()
    obs[:, 1::2] = 0.0
    action = torch.randint(0, 3, (B, L))
    step_type = torch.full((B, L), int(StepType.MID), dtype=torch.int32)
    step_type[:, 0] = int(StepType.FIRST)
    initial = learner.get_initial_state(B)
    before, valid = learner.sequence_loss(obs, action, step_type, initial)
    assert before.shape == (B, L - 1) and valid.all()
    for _ in range(300):
        learner.update_on_sequence(obs, action, step_type, initial)
    after, _ = learner.sequence_loss(obs, action, step_type, initial)
    assert after.mean() < 0.2 * before.mean(), (before.mean(), after.mean())


def test_the_agent_carries_the_encoder_state_when_acting(clean_gin):
    agent = Agent(OBS, DISCRETE, representation_learner_cls=lambda **kw: _learner())
    assert isinstance(agent.rollout_state_spec, AgentState)
    assert isinstance(agent.predict_state_spec, AgentState)
    from alf.data_structures import TimeStep
    B = 2
    ts = TimeStep(step_type=torch.full((B,), int(StepType.MID), dtype=torch.int32),
                  reward=torch.zeros(B), discount=torch.ones(B), observation=torch.randn(B, 4),
                  prev_action=torch.zeros(B, dtype=torch.int64),
                  env_id=torch.arange(B), env_info={})
    state = agent.get_initial_rollout_state(B)
    step = agent.rollout_step(ts, state)
    h, _ = step.state.representation[0]
    assert h.shape == (B, 8) and h.abs().sum() > 0  # the LSTM moved
    step2 = agent.rollout_step(ts, step.state)
    assert not torch.equal(step2.state.representation[0][0], h)  # and keeps moving
    assert isinstance(agent.predict_step(ts, agent.get_initial_predict_state(B)).state,
                      AgentState)


def test_a_recurrent_learner_without_a_sequence_loss_is_one_error(clean_gin):
    class NoSequenceLoss(RepresentationLearner):
        def __init__(self, observation_spec, action_spec, context=None):
            super().__init__(observation_spec, action_spec, optimizer=Adam(lr=1e-3),
                             context=context)
            self.encoder = LSTMEncodingNetwork(observation_spec, hidden_size=8)

        def loss(self, prev_observation, prev_action, observation):
            return observation.sum(-1)

    with pytest.raises(ConfigError, match="has a recurrent encoder .* must implement "
                                          "sequence_loss"):
        Agent(OBS, DISCRETE, representation_learner_cls=NoSequenceLoss)


def _steps(part) -> float:
    state = part.optimizers()[0].state_dict()["state"].values()
    return min(float(s["step"]) for s in state)


def test_sac_trains_on_stored_sequences(make_trainer, alf_cli, tmp_path):
    """Sampled replay: sequences start from their stored encoder state; the learner and
    SAC step together, and a resume restores the encoder."""
    # SAC samples n_step + 1 = 2 steps: 2-step sequences from the stored state
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_SAC + RECURRENT.format(
        rl="SacAlgorithm") + "TrainerConfig.mini_batch_length = 2\n")
    trainer.run()
    agent = trainer.algorithm
    assert trainer.context.num_updates > 0
    assert _steps(agent.representation_learner) == trainer.context.num_updates
    data = trainer.learner.replay_buffer.gather_all()
    h = data.state.representation[0][0]  # [B, T, 8]: stored with each step
    assert h.shape[-1] == 8 and h.abs().sum() > 0
    trainer.close()


@pytest.mark.parametrize("async_mode", [None, "deterministic", "policy_worker"],
                         ids=["sync", "async", "policy_worker"])
def test_ppo_and_appo_train_and_resume(make_trainer, tmp_path, async_mode):
    conf = "include 'ppo_cart_pole.gin'\n" if async_mode is None else \
        "include 'appo_cart_pole.gin'\n"
    rl = "PPOAlgorithm" if async_mode is None else "APPOAlgorithm"
    params = ["TrainerConfig.num_iterations=3", "TrainerConfig.evaluate=False",
              "create_environment.num_parallel_environments=2",
              "TrainerConfig.unroll_length=8", "TrainerConfig.mini_batch_size=4",
              "TrainerConfig.num_updates_per_train_iter=2",
              "TrainerConfig.checkpoint_interval=3"]
    if async_mode == "policy_worker":  # the policy worker keeps each env's encoder state
        params.append("TrainerConfig.num_policy_workers=1")
    elif async_mode:
        params.append(f"TrainerConfig.async_mode='{async_mode}'")
    trainer = make_trainer(tmp_path / "run", conf + RECURRENT.format(rl=rl), params)
    trainer.run()
    agent = trainer.algorithm
    assert agent.rl_algorithm.observation_spec == TensorSpec((8,))
    assert _steps(agent.representation_learner) == trainer.context.num_updates > 0
    saved = torch.load(os.path.join(str(tmp_path / "run"), "train", "ckpt-0000000003.pt"),
                       weights_only=False)["algorithm"]
    lstm = [k for k in saved if k.startswith("_representation.encoder._cells")]
    assert lstm and all(torch.equal(saved[k], agent.state_dict()[k]) for k in lstm)
    trainer.close()
    resumed = make_trainer(tmp_path / "run", conf + RECURRENT.format(rl=rl),
                           params[:-1] + ["TrainerConfig.num_iterations=4",
                                          "TrainerConfig.checkpoint_interval=100"])
    resumed.run()
    assert resumed.context.num_updates > trainer.context.num_updates
    resumed.close()


def test_single_step_mini_batches_are_refused(make_trainer, alf_cli, tmp_path):
    with pytest.raises(ConfigError, match="recurrent and learns from sequences.*"
                                          "mini_batch_length to 2 or more"):
        trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO + RECURRENT.format(
            rl="PPOAlgorithm") + "TrainerConfig.mini_batch_length = 1\n")
        try:
            trainer.run()
        finally:
            trainer.close()
    assert not os.path.exists(tmp_path / "run" / "train")  # refused before any training


def test_a2c_trains_through_the_recurrent_encoder(make_trainer, alf_cli, tmp_path):
    """On-policy through the rollout's graph: A2C's loss reaches the LSTM it acted
    through, and the learner steps it on the unroll's sequence."""
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_A2C + RECURRENT.format(
        rl="ActorCriticAlgorithm"))
    agent = trainer.algorithm
    representation = agent.representation_learner
    seen = []
    own_update = representation.update_with_gradient

    def spy(loss_info, **kwargs):
        seen.append(all(p.grad is not None and p.grad.abs().sum().item() > 0
                        for p in representation.encoder.parameters()))
        return own_update(loss_info, **kwargs)

    representation.update_with_gradient = spy
    trainer.run()
    assert seen and all(seen)  # A2C's gradient on every LSTM parameter before each step
    trainer.close()


def test_the_default_sequence_loss_is_the_transition_loss():
    """A feed-forward learner's sequence_loss: its loss on each transition t-1 -> t."""
    torch.manual_seed(0)
    learner = LatentDynamicsLearner(OBS, DISCRETE, fc_layer_params=(16,), feature_size=8,
                                    optimizer=Adam(lr=1e-3))
    B, L = 2, 4
    obs, action = torch.randn(B, L, 4), torch.randint(0, 3, (B, L))
    step_type = torch.full((B, L), int(StepType.MID), dtype=torch.int32)
    step_type[0, 2] = int(StepType.FIRST)
    loss, valid = learner.sequence_loss(obs, action, step_type, ())
    expected = learner.loss(obs[:, :-1].reshape(-1, 4), action[:, 1:].reshape(-1),
                            obs[:, 1:].reshape(-1, 4)).reshape(B, L - 1)
    assert torch.allclose(loss, expected) and valid.tolist() == [[True, False, True]] + \
        [[True, True, True]]
