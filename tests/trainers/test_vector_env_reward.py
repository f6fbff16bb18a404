"""An env's own vector reward ``[d]`` end to end: the Agent weighs its columns (per
column for PPO, as a weighted sum for DQN and SAC-like algorithms), the weights decide
what is learned, and an algorithm that learns from a scalar is told to use an Agent."""
import pytest
import torch

from alf.data_structures import StepType, TimeStep
from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

ENV = "tests.environments.two_goal_env:TwoGoalCorridor-v0"  # goals: right [1, 0], left [0, 1]

PPO = f"""
include 'ppo_cart_pole.gin'
create_environment.env_name = "{ENV}"
create_environment.num_parallel_environments = 4
create_environment.backend = "sync"
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @PPOAlgorithm
TrainerConfig.num_env_steps = 3072
TrainerConfig.unroll_length = 32
TrainerConfig.mini_batch_size = 64
TrainerConfig.num_updates_per_train_iter = 4
PPOLoss.entropy_regularization = 0.01
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1000
TrainerConfig.checkpoint_interval = 1000
"""

DQN = f"""
include 'dqn_cart_pole.gin'
create_environment.env_name = "{ENV}"
create_environment.num_parallel_environments = 1
create_environment.backend = "sync"
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @DqnAlgorithm
TrainerConfig.num_env_steps = 1500
TrainerConfig.initial_collect_steps = 200
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1000
TrainerConfig.checkpoint_interval = 1000
"""


def _first_move(agent) -> int:
    """The greedy action at the corridor's middle (1: towards the right goal)."""
    ts = TimeStep(step_type=torch.tensor([int(StepType.FIRST)], dtype=torch.int32),
                  reward=torch.zeros(1, 2), discount=torch.ones(1),
                  observation=torch.zeros(1, 1), prev_action=torch.zeros(1, dtype=torch.int64),
                  env_id=torch.zeros(1, dtype=torch.int64), env_info={})
    with torch.no_grad():
        step = agent.predict_step(ts, agent.get_initial_predict_state(1))
    action = step.output
    if not isinstance(action, torch.Tensor):  # a distribution: its mode
        action = action.probs.argmax(-1) if hasattr(action, "probs") else action.mode
    return int(action.reshape(-1)[0])


@pytest.mark.parametrize("conf", [PPO, DQN], ids=["ppo_per_column", "dqn_weighted_sum"])
@pytest.mark.parametrize("weights,goal", [([1.0, 0.0], 1), ([0.0, 1.0], 0)],
                         ids=["right", "left"])
def test_the_weights_choose_the_goal(make_trainer, tmp_path, conf, weights, goal):
    trainer = make_trainer(tmp_path / "run", conf, [f"Agent.reward_weights={weights}",
                                                    "TrainerConfig.summary_interval=1"])
    means = {}
    add = trainer.context.add_iteration_scalar

    def spy(tag, value, reduce="mean"):
        if tag.startswith("Reward/extrinsic_") and tag.endswith("/mean"):
            means.setdefault(tag, []).append(value)
        add(tag, value, reduce)

    trainer.context.add_iteration_scalar = spy
    try:
        trainer.run()
        agent = trainer.algorithm
        # each column's mean reward in the trained batches is summarised; the learned
        # goal's column ends higher
        assert set(means) == {"Reward/extrinsic_0/mean", "Reward/extrinsic_1/mean"}
        learned, other = (("0", "1") if goal == 1 else ("1", "0"))
        assert means[f"Reward/extrinsic_{learned}/mean"][-1] > \
            means[f"Reward/extrinsic_{other}/mean"][-1]
        assert agent.reward_column_names == ["extrinsic_0", "extrinsic_1"]
        assert agent.reward_weights.tolist() == weights
        if conf is PPO:  # one value per column
            assert agent.rl_algorithm.reward_columns.num_columns == 2
        assert _first_move(agent) == goal
    finally:
        trainer.close()


def test_an_algorithm_that_learns_from_a_scalar_is_told_to_use_an_agent(make_trainer, tmp_path):
    conf = DQN.replace("TrainerConfig.algorithm_ctor = @Agent",
                       "TrainerConfig.algorithm_ctor = @DqnAlgorithm")
    with pytest.raises(ConfigError, match=r"DqnAlgorithm learns from a scalar reward and the "
                                          r"env's reward has columns .*Agent.rl_algorithm_cls "
                                          r"= @DqnAlgorithm"):
        trainer = make_trainer(tmp_path / "run", conf)
        trainer.close()


def test_columns_with_a_reward_module_and_the_weighted_sum(clean_gin):
    """``[B, T, 2]`` env columns then one module column for PPO; the weighted sum for
    DQN (module rewards count from a sequence's second step)."""
    from alf.algorithms.agent import Agent
    from alf.algorithms.dqn_algorithm import DqnAlgorithm
    from alf.algorithms.reward_module import RewardModule
    from alf.utils.optimizers import OptimizerFactory

    class Half(RewardModule):
        def __init__(self, observation_spec, action_spec, context=None):
            super().__init__(observation_spec, action_spec, context=context,
                             optimizer=OptimizerFactory(torch.optim.SGD, lr=0.0), name="Half")
            self.w = torch.nn.Parameter(torch.zeros(1))

        def reward(self, prev_observation, prev_action, observation):
            return torch.full(observation.shape[:1], 0.5)

        def loss(self, prev_observation, prev_action, observation):
            return self.w.sum() * observation.sum(-1)

    obs, act = TensorSpec((1,)), BoundedTensorSpec((), torch.int64, 0, 1)
    B, T = 2, 3
    ts = TimeStep(step_type=torch.ones(B, T, dtype=torch.int32),
                  reward=torch.tensor([[1.0, 0.0]]).expand(B, T, 2).clone(),
                  discount=torch.ones(B, T), observation=torch.zeros(B, T, 1),
                  prev_action=torch.zeros(B, T, dtype=torch.int64),
                  env_id=torch.arange(B)[:, None].expand(B, T), env_info={})
    ppo = Agent(obs, act, reward_spec=TensorSpec((2,)), reward_modules=[Half],
                reward_weights=[1.0, 2.0, 4.0])
    columns = ppo._reward_columns(ts)
    assert tuple(columns.shape) == (B, T, 3)
    assert columns[..., :2].equal(ts.reward) and columns[:, 1:, 2].eq(0.5).all()
    assert ppo.rl_algorithm.reward_columns.weights.tolist() == [1.0, 2.0, 4.0]
    dqn = Agent(obs, act, reward_spec=TensorSpec((2,)), rl_algorithm_cls=DqnAlgorithm,
                reward_modules=[Half], reward_weights=[1.0, 2.0, 4.0])
    assert tuple(dqn.rl_algorithm.reward_spec.shape) == ()
    total = dqn._composed_reward(ts)
    assert total[:, 0].eq(1.0).all() and total[:, 1:].eq(1.0 + 4.0 * 0.5).all()
    with pytest.raises(ConfigError, match="it needs 3: one per column of the env's reward "
                                          r"\(2\), then one per reward module"):
        Agent(obs, act, reward_spec=TensorSpec((2,)), reward_modules=[Half],
              reward_weights=[1.0, 1.0])


APPO = f"""
include 'appo_cart_pole.gin'
create_environment.env_name = "{ENV}"
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @APPOAlgorithm
TrainerConfig.num_env_steps = 3000
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1000
TrainerConfig.checkpoint_interval = 1000
"""


@pytest.mark.parametrize("policy_workers", [0, 1], ids=["in_worker", "policy_worker"])
def test_async_collection_carries_the_columns(make_trainer, tmp_path, policy_workers):
    """Env worker processes build the env themselves: its columns reach the learner."""
    trainer = make_trainer(tmp_path / "run", APPO,
                           ["Agent.reward_weights=[0.0, 1.0]",
                            f"TrainerConfig.num_policy_workers={policy_workers}"])
    try:
        trainer.run()
        assert trainer.algorithm.rl_algorithm.reward_columns.num_columns == 2
        assert _first_move(trainer.algorithm) == 0  # the left goal
    finally:
        trainer.close()


def test_a2c_given_columns_is_told_to_use_an_agent(clean_gin):
    from alf.algorithms.actor_critic_algorithm import ActorCriticAlgorithm
    with pytest.raises(ConfigError, match=r"Agent.rl_algorithm_cls = @ActorCriticAlgorithm"):
        ActorCriticAlgorithm(TensorSpec((1,)), BoundedTensorSpec((), torch.int64, 0, 1),
                             reward_spec=TensorSpec((2,)))
