"""One value per reward column for PPO / APPO / IMPALA (alf/algorithms/reward_columns.py,
docs/design/agent.md decision 3), and the Agent handing them its columns."""
import pytest
import torch

from alf.algorithms.actor_critic_algorithm import ActorCriticAlgorithm
from alf.algorithms.agent import Agent
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf.algorithms.reward_columns import RewardColumns
from alf.algorithms.rnd_reward_module import RNDRewardModule
from alf.data_structures import Experience, StepType, TimeStep
from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils import value_ops
from alf.utils.optimizers import Adam

OBS = TensorSpec((4,))
ACTION = BoundedTensorSpec((), torch.int64, 0, 1)


def test_non_episodic_columns_continue_across_episode_ends():
    columns = RewardColumns(2, gamma=0.9)
    columns.configure(gammas=[None, 0.5], episodic=[True, False])
    assert torch.equal(columns.gammas, torch.tensor([0.9, 0.5]))
    step_types = torch.tensor([[0, 1, 2, 0]])
    discounts = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    st, d = columns.per_column(step_types, discounts)
    assert st.shape == (1, 4, 2)
    assert st[..., 0].tolist() == [[0, 1, 2, 0]] and d[..., 0].tolist() == [[1, 1, 0, 1]]
    assert st[..., 1].tolist() == [[0, 1, 1, 0]] and d[..., 1].tolist() == [[1, 1, 1, 1]]
    columns.set_weights(torch.tensor([1.0, 0.25]))
    assert torch.allclose(columns.combine(torch.tensor([[2.0, 4.0]])), torch.tensor([3.0]))
    with pytest.raises(ValueError, match="3 weights for 2 reward columns"):
        columns.set_weights(torch.ones(3))


def _experience(B=3, T=6, k=2):
    torch.manual_seed(0)
    step_type = torch.full((B, T), int(StepType.MID), dtype=torch.int32)
    step_type[:, 0] = int(StepType.FIRST)
    step_type[0, 3], step_type[0, 4] = int(StepType.LAST), int(StepType.FIRST)
    discount = (step_type != StepType.LAST).float()
    ts = TimeStep(step_type=step_type, reward=torch.randn(B, T, k), discount=discount,
                  observation=torch.randn(B, T, 4),
                  prev_action=torch.zeros(B, T, dtype=torch.int64),
                  env_id=torch.arange(B)[:, None].expand(B, T), env_info={})
    return ts


def test_ppo_gae_runs_per_column_and_follows_the_weighted_advantage():
    """Each column's returns are GAE of that column alone, with its own discount and
    episodic flag; the policy's advantage is ``sum_i w_i A_i``."""
    ppo = PPOAlgorithm(OBS, ACTION, reward_spec=TensorSpec((2,)), gamma=0.9, gae_lambda=0.8,
                       optimizer=Adam(lr=1e-3))
    ppo.reward_columns.configure(gammas=[None, 0.5], episodic=[True, False])
    ppo.reward_columns.set_weights(torch.tensor([1.0, 0.25]))
    ts = _experience()
    B, T = ts.step_type.shape
    step = ppo.rollout_step(ts._replace(observation=ts.observation.reshape(B * T, 4),
                                        step_type=ts.step_type.reshape(-1)),
                            ppo.get_initial_rollout_state(B * T))
    value = step.info.value.reshape(B, T, 2)
    assert step.info.value.shape == (B * T, 2)  # the value network has two outputs
    info = step.info._replace(value=value, log_prob=step.info.log_prob.reshape(B, T))
    out = ppo.preprocess_experience(Experience(time_step=ts, action=torch.zeros(B, T),
                                               rollout_info=info, state=()))
    per_column = []
    for i, (gamma, episodic) in enumerate([(0.9, True), (0.5, False)]):
        st = ts.step_type if episodic else torch.where(
            ts.step_type == StepType.LAST, torch.full_like(ts.step_type, 1), ts.step_type)
        d = ts.discount if episodic else torch.ones_like(ts.discount)
        adv = value_ops.generalized_advantage_estimation(
            ts.reward[..., i], value[..., i], st, d, gamma=gamma, td_lambda=0.8,
            time_major=False)
        per_column.append(adv)
        assert torch.allclose(out.rollout_info.returns[..., i], adv + value[:, :-1, i],
                              atol=1e-6)
    assert torch.allclose(out.rollout_info.advantages, per_column[0] + 0.25 * per_column[1],
                          atol=1e-6)
    # the non-episodic column's advantage at the episode's LAST step is not cut
    assert per_column[1][0, 3] != 0 and per_column[0][0, 3] == 0


def test_agent_gives_ppo_its_columns_and_the_module_settings(clean_gin):
    def rnd(**kw):
        return RNDRewardModule(fc_layer_params=(8,), feature_size=4, optimizer=Adam(lr=1e-3),
                               **kw)

    agent = Agent(OBS, ACTION, reward_modules=[rnd], reward_weights=[1.0, 0.5])
    rl = agent.rl_algorithm
    assert rl.reward_spec == TensorSpec((2,))
    assert rl.reward_columns.gammas[1].item() == pytest.approx(0.99)  # RND's own
    assert rl.reward_columns.episodic.tolist() == [True, False]
    ts = _experience(k=1)
    ts = ts._replace(reward=ts.reward[..., 0])
    columns = agent._reward_columns(ts)
    assert columns.shape == ts.reward.shape + (2,)
    assert torch.equal(columns[..., 0], ts.reward)
    assert torch.equal(rl.reward_columns.weights, torch.tensor([1.0, 0.5]))
    summed = Agent(OBS, ACTION, reward_modules=[rnd], value_per_reward_column=False)
    assert summed.rl_algorithm.reward_spec == TensorSpec(())
    assert summed.rl_algorithm.reward_columns is None


def test_bad_column_setups_are_one_error_each(clean_gin):
    from alf.algorithms.sac_algorithm import SacAlgorithm
    with pytest.raises(ConfigError, match="SacAlgorithm learns from a scalar reward"):
        Agent(TensorSpec((3,)), BoundedTensorSpec((1,), torch.float32, -1, 1),
              rl_algorithm_cls=SacAlgorithm, value_per_reward_column=True)
    with pytest.raises(ConfigError, match="it learns from a scalar reward"):
        ActorCriticAlgorithm(OBS, ACTION, reward_spec=TensorSpec((2,)))
    with pytest.raises(ConfigError, match="gamma = 1.5 is out of range"):
        RNDRewardModule(OBS, ACTION, gamma=1.5, optimizer=Adam(lr=1e-3))


@pytest.mark.parametrize("example", ["ppo_rnd_cart_pole.gin", "appo_rnd_cart_pole.gin"])
def test_rnd_examples_learn_a_value_per_column(make_trainer, tmp_path, example):
    """GAE (PPO) and V-trace (APPO, async) per column: the value head has two outputs
    and both columns' values train."""
    trainer = make_trainer(tmp_path / "run", f"include '{example}'\n",
                           ["TrainerConfig.num_iterations=3", "TrainerConfig.evaluate=False"])
    head = [p for n, p in trainer.algorithm.rl_algorithm.named_parameters()
            if n.startswith("_value_network") and n.endswith("_last_layer.weight")][0]
    before = head.detach().clone()
    trainer.run()
    assert head.shape[0] == 2
    assert all(not torch.equal(before[i], head.detach()[i]) for i in range(2))


def test_a_non_episodic_columns_value_trains_at_the_last_step():
    """At an episode's LAST step the episodic column's value has no target and gets no
    gradient; the non-episodic column's does (the steps before bootstrap from it)."""
    from alf.algorithms.ppo_algorithm import PPOTrainInfo
    from alf.algorithms.ppo_loss import PPOLoss
    columns = RewardColumns(2, gamma=0.9)
    columns.configure(episodic=[True, False])
    step_type = torch.tensor([[1], [2], [0], [1]])  # MID, LAST, FIRST, MID; [T=4, B=1]
    value = torch.zeros(4, 1, 2, requires_grad=True)
    info = PPOTrainInfo(step_type=step_type, log_prob=torch.zeros(4, 1),
                        old_log_prob=torch.zeros(4, 1), value=value,
                        old_value=torch.zeros(4, 1, 2), advantages=torch.ones(4, 1),
                        returns=torch.ones(4, 1, 2), entropy=(),
                        value_mask=columns.value_mask(step_type))
    PPOLoss(normalize_advantages=False)(info, 0.0).loss.mean().backward()
    grad = value.grad[:, 0]
    assert grad[1, 0] == 0 and grad[1, 1] != 0  # LAST: episodic no, non-episodic yes
    assert bool((grad[[0, 2, 3]] != 0).all())
