"""ICM (alf/algorithms/icm_reward_module.py): curiosity falls where the outcome became
predictable, the inverse model learns the action, and the Agent refuses it on
single-step mini-batches."""
import pytest
import torch

from alf.algorithms.agent import Agent
from alf.algorithms.icm_reward_module import ICMRewardModule
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import Adam

OBS = TensorSpec((4,))
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 2)
CONTINUOUS = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)


def _icm(action_spec, **kwargs):
    return ICMRewardModule(OBS, action_spec, fc_layer_params=(32,), feature_size=16,
                           hidden_size=32, optimizer=Adam(lr=3e-3), **kwargs)


def _deterministic_world(n=64):
    """Transitions of a world where the action decides the next observation."""
    prev = torch.randn(n, 4)
    action = torch.randint(0, 3, (n,))
    shift = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]])
    return prev, action, prev + shift[action]


def test_curiosity_falls_on_seen_transitions_and_the_inverse_model_learns_the_action():
    torch.manual_seed(0)
    icm = _icm(DISCRETE)
    prev, action, obs = _deterministic_world()
    valid = torch.ones(prev.shape[0], dtype=torch.bool)
    before = icm.reward(prev, action, obs).mean().item()
    for _ in range(400):
        icm.update(prev, action, obs, valid)
    after = icm.reward(prev, action, obs).mean().item()
    assert after < 0.2 * before
    novel_prev = torch.randn(64, 4) * 3 + 5
    assert icm.reward(novel_prev, action, novel_prev + 2.0).mean().item() > 3 * after
    phi_prev, phi = icm._encoder(prev)[0], icm._encoder(obs)[0]
    guess = icm._inverse_model(torch.cat([phi_prev, phi], -1)).argmax(-1)
    assert (guess == action).float().mean().item() > 0.9  # chance is 1/3


def _no_grad(t):
    return t.grad is None or not t.grad.abs().sum()


def test_continuous_actions_and_where_the_gradients_go():
    torch.manual_seed(0)
    icm = _icm(CONTINUOUS, beta=1.0)  # the forward loss alone
    prev = torch.randn(8, 4, requires_grad=True)
    obs = torch.randn(8, 4, requires_grad=True)
    action = torch.rand(8, 2) * 2 - 1
    icm.loss(prev, action, obs).mean().backward()
    # phi(s) is the forward loss's fixed target: nothing flows back through s
    assert _no_grad(obs) and not _no_grad(prev)
    assert not _no_grad(icm._forward_model[0].weight)
    assert _no_grad(icm._inverse_model[0].weight)
    icm.zero_grad()
    icm._beta = 0.0  # the inverse loss alone trains the encoder and the inverse model
    icm.loss(prev.detach(), action, obs.detach()).mean().backward()
    assert not _no_grad(icm._encoder._last_layer.weight)
    assert not _no_grad(icm._inverse_model[0].weight)
    assert _no_grad(icm._forward_model[0].weight)
    assert icm.reward(prev, action, obs).shape == (8,)


def test_bad_settings_are_one_error_each(clean_gin):
    with pytest.raises(ConfigError, match=r"beta = 1.5 is out of range"):
        _icm(DISCRETE, beta=1.5)
    with pytest.raises(ConfigError, match="set ICMRewardModule.optimizer"):
        Agent(OBS, DISCRETE, reward_modules=[ICMRewardModule])


def test_the_agent_refuses_icm_on_single_step_mini_batches(clean_gin):
    agent = Agent(OBS, DISCRETE, reward_modules=[
        lambda **kw: _icm(kw["action_spec"], context=kw["context"])])
    B = 4
    ts = TimeStep(step_type=torch.full((B, 1), int(StepType.MID), dtype=torch.int32),
                  reward=torch.zeros(B, 1), discount=torch.ones(B, 1),
                  observation=torch.randn(B, 1, 4),
                  prev_action=torch.zeros(B, 1, dtype=torch.int64),
                  env_id=torch.arange(B)[:, None], env_info={})
    with pytest.raises(ConfigError, match="set TrainerConfig.mini_batch_length to 2"):
        agent._update_on_single_steps(Experience(time_step=ts, action=(), rollout_info=(),
                                                 state=(), batch_info=()))


def test_the_icm_example_trains_by_gin_alone(make_trainer, tmp_path):
    trainer = make_trainer(tmp_path / "run", "include 'sac_icm_pendulum.gin'\n",
                           ["TrainerConfig.num_env_steps=300",
                            "TrainerConfig.initial_collect_steps=200",
                            "TrainerConfig.mini_batch_size=16", "TrainerConfig.evaluate=False"])
    trainer.run()
    agent = trainer.algorithm
    assert isinstance(agent.reward_modules[0], ICMRewardModule)
    opt = agent.reward_modules[0].optimizers()[0]
    steps = [float(s["step"]) for s in opt.state_dict()["state"].values()]
    assert steps and min(steps) > 0  # encoder, forward and inverse models all trained
