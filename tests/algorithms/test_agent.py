"""``Agent``: an RL algorithm with reward modules (alf/algorithms/agent.py), and RND."""
import os

import pytest
import torch

from alf.algorithms.agent import Agent
from alf.algorithms.reward_module import RewardModule
from alf.algorithms.rnd_reward_module import RNDRewardModule
from alf.data_structures import StepType, TimeStep
from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import Adam

OBS = TensorSpec((4,))
ACTION = BoundedTensorSpec((), torch.int64, 0, 1)

AGENT = """
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @PPOAlgorithm
"""
RND = AGENT + """
Agent.reward_modules = [@RNDRewardModule]
Agent.reward_weights = [1.0, 0.5]
RNDRewardModule.fc_layer_params = (8,)
RNDRewardModule.feature_size = 8
RNDRewardModule.optimizer = @rnd/alf.optimizers.Adam()
rnd/alf.optimizers.Adam.lr = 1e-3
"""


def _final_state(root):
    path = os.path.join(str(root), "train")
    last = sorted(f for f in os.listdir(path) if f.startswith("ckpt-"))[-1]
    return torch.load(os.path.join(path, last), weights_only=False)["algorithm"]


@pytest.mark.parametrize("conf,algorithm", [("TINY_PPO", "PPOAlgorithm"),
                                              ("TINY_A2C", "ActorCriticAlgorithm")])
def test_an_agent_without_parts_trains_bit_identically_to_its_algorithm(make_trainer, alf_cli,
                                                                       tmp_path, conf,
                                                                       algorithm):
    """Whole-buffer replay (PPO) and on-policy through the rollout's graph (A2C)."""
    text = getattr(alf_cli, conf)
    plain = make_trainer(tmp_path / "plain", text)
    plain.run()
    composed = make_trainer(tmp_path / "agent", text + AGENT.replace("PPOAlgorithm",
                                                                     algorithm))
    composed.run()
    a, b = _final_state(tmp_path / "plain"), _final_state(tmp_path / "agent")
    tensors = {k: v for k, v in a.items() if isinstance(v, torch.Tensor)}
    assert tensors
    for key, value in tensors.items():
        assert torch.equal(value, b["_rl." + key]), key
    assert composed.context.num_updates == plain.context.num_updates


def test_ppo_with_rnd_trains_both_and_keeps_the_module_off_the_actors(make_trainer, alf_cli,
                                                                     tmp_path):
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO + RND)
    trainer.run()
    agent = trainer.algorithm
    state = _final_state(tmp_path / "run")
    predictor = [k for k in state if k.startswith("_reward_modules.0._predictor.")]
    target = [k for k in state if k.startswith("_reward_modules.0._target.")]
    assert predictor and target
    assert "_reward_modules.0._extra_state" in state  # its optimizer is checkpointed
    assert len(state["_reward_modules.0._extra_state"]["optimizers"]) == 1
    # 4 iterations x 2 epochs x 2 mini-batches: the RL algorithm's clock only
    assert trainer.context.num_updates == 16
    rollout = agent.rollout_state_dict()
    assert rollout and not any(k.startswith("_reward_modules") for k in rollout)
    assert not torch.equal(state["_reward_modules.0._predictor._last_layer.weight"],
                           _initial_predictor(agent))


def _initial_predictor(agent):
    """The predictor's output layer as built (same seed: the module built again)."""
    torch.manual_seed(0)
    module = agent.reward_modules[0]
    rebuilt = RNDRewardModule(module.observation_spec, module.action_spec,
                              fc_layer_params=(8,), feature_size=8, optimizer=Adam(lr=1e-3))
    return rebuilt._predictor._last_layer.weight.detach()


@pytest.mark.parametrize("example,params", [
    ("sac_rnd_pendulum.gin", ["TrainerConfig.num_env_steps=300",
                              "TrainerConfig.initial_collect_steps=200",
                              "TrainerConfig.mini_batch_size=16",
                              "TrainerConfig.evaluate=False"]),
    ("appo_rnd_cart_pole.gin", ["TrainerConfig.num_env_steps=1024",
                                "TrainerConfig.evaluate=False"]),
])
def test_the_rnd_examples_train_by_gin_alone(make_trainer, tmp_path, example, params):
    """SAC (sampled replay, n-step transitions) and APPO (asynchronous env workers,
    V-trace on [B, T+1] batches) with RND: both parts train."""
    trainer = make_trainer(tmp_path / "run", f"include '{example}'\n",
                           params + ["TrainerConfig.summary_interval=1"])
    trainer.run()
    agent = trainer.algorithm
    assert isinstance(agent, Agent) and agent.reward_modules
    assert trainer.context.num_updates > 0
    opt = agent.reward_modules[0].optimizers()[0]
    steps = [s["step"] for s in opt.state_dict()["state"].values()]
    assert steps and min(float(x) for x in steps) > 0  # the predictor was trained


def _fresh_rnd():
    return RNDRewardModule(OBS, ACTION, fc_layer_params=(16,), feature_size=8,
                           optimizer=Adam(lr=1e-2))


def test_rnd_bonus_falls_where_it_has_been_and_stays_elsewhere():
    torch.manual_seed(0)
    rnd = _fresh_rnd()
    seen = torch.randn(32, 4)
    novel = torch.randn(32, 4) + 3.0
    before_seen = rnd._error(seen).mean().item()
    before_novel = rnd._error(novel).mean().item()
    valid = torch.ones(32, dtype=torch.bool)
    for _ in range(300):
        rnd.update(None, None, seen, valid)
    after_seen = rnd._error(seen).mean().item()
    after_novel = rnd._error(novel).mean().item()
    assert after_seen < 0.1 * before_seen
    assert after_novel > 5 * after_seen
    assert before_novel > 0  # the untrained predictor errs everywhere
    target = [p.clone() for p in rnd._target.parameters()]
    rnd.update(None, None, seen, valid)
    assert all(torch.equal(a, b) for a, b in zip(target, rnd._target.parameters()))


class _Constant(RewardModule):
    """A reward of 1 on every transition, no parameters to train."""
    uses_previous_step = False

    def __init__(self, observation_spec, action_spec, context=None):
        super().__init__(observation_spec, action_spec, optimizer=Adam(lr=1e-3),
                         context=context, name="Constant")
        self._w = torch.nn.Parameter(torch.zeros(()))

    def reward(self, prev_observation, prev_action, observation):
        return torch.ones(observation.shape[0])

    def loss(self, prev_observation, prev_action, observation):
        return self._w * 0 + torch.zeros(observation.shape[0])


def _time_step(B=2, T=4):
    step_type = torch.full((B, T), int(StepType.MID), dtype=torch.int32)
    step_type[:, 0] = int(StepType.FIRST)
    step_type[1, 2] = int(StepType.FIRST)  # env 1 starts a new episode at t=2
    return TimeStep(step_type=step_type, reward=torch.full((B, T), 2.0),
                    discount=torch.ones(B, T), observation=torch.randn(B, T, 4),
                    prev_action=torch.zeros(B, T, dtype=torch.int64),
                    env_id=torch.arange(B)[:, None].expand(B, T), env_info={})


def test_reward_is_the_weighted_sum_and_weights_change_during_a_run(clean_gin):
    agent = Agent(OBS, ACTION, reward_modules=[_Constant], reward_weights=[1.0, 0.5])
    ts = _time_step()
    reward = agent._composed_reward(ts)
    expected = torch.full((2, 4), 2.0 + 0.5)
    expected[:, 0] = 2.0        # no predecessor in the sequence
    expected[1, 2] = 2.0        # an episode's first step
    assert torch.equal(reward, expected)
    agent.set_reward_weights([0.0, 3.0])
    reward = agent._composed_reward(ts)
    expected = torch.full((2, 4), 3.0)
    expected[:, 0] = 0.0
    expected[1, 2] = 0.0
    assert torch.equal(reward, expected)
    assert torch.equal(agent.state_dict()["_reward_weights"], torch.tensor([0.0, 3.0]))
    with pytest.raises(ValueError, match="3 weights for 2 reward columns"):
        agent.set_reward_weights([1.0, 1.0, 1.0])


def test_bad_compositions_are_one_error_each(clean_gin):
    with pytest.raises(ConfigError, match="reward_weights has 3 values; it needs 2"):
        Agent(OBS, ACTION, reward_modules=[_Constant], reward_weights=[1, 1, 1])
    with pytest.raises(ConfigError, match="set RNDRewardModule.optimizer"):
        Agent(OBS, ACTION, reward_modules=[RNDRewardModule])
    with pytest.raises(ConfigError, match="reward must be a scalar or a vector of columns"):
        Agent(OBS, ACTION, reward_spec=TensorSpec((2, 3)))


def test_reward_weights_follow_a_schedule_until_fixed_by_the_api(clean_gin):
    """``reward_weights`` entries may be schedules of the run's progress; the API fixes
    the weights from then on, and that survives a checkpoint round trip."""
    from alf.utils.schedules import LinearSchedule
    agent = Agent(OBS, ACTION, reward_modules=[_Constant],
                  reward_weights=[1.0, LinearSchedule(1.0, 0.0)])
    context = agent.context
    context.num_iterations = 10
    ts = _time_step()
    for iteration, bonus_weight in ((0, 1.0), (5, 0.5), (10, 0.0)):
        context.iteration = iteration
        reward = agent._composed_reward(ts)
        assert torch.equal(agent.reward_weights, torch.tensor([1.0, bonus_weight]))
        assert reward[0, 1].item() == 2.0 + bonus_weight  # extrinsic 2, bonus 1
    context.iteration = 2
    agent.set_reward_weights([0.5, 2.0])
    for iteration in (3, 9):  # the schedule no longer applies
        context.iteration = iteration
        agent._composed_reward(ts)
        assert torch.equal(agent.reward_weights, torch.tensor([0.5, 2.0]))
    state = agent.state_dict()
    again = Agent(OBS, ACTION, reward_modules=[_Constant],
                  reward_weights=[1.0, LinearSchedule(1.0, 0.0)])
    again.load_state_dict(state)
    again.context.num_iterations, again.context.iteration = 10, 7
    again._composed_reward(ts)
    assert torch.equal(again.reward_weights, torch.tensor([0.5, 2.0]))
    assert agent.reward_column_names == ["extrinsic", "Constant"]
    with pytest.raises(ConfigError, match="each must be a number or a schedule"):
        Agent(OBS, ACTION, reward_modules=[_Constant], reward_weights=[1.0, "high"])


def test_a_scheduled_weight_is_summarised_and_moves_in_a_run(make_trainer, alf_cli, tmp_path):
    """From gin: the RND weight annealed 1 -> 0 over the run, one point per summarised
    iteration under Reward/<column>/weight."""
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO + RND.replace(
        "Agent.reward_weights = [1.0, 0.5]",
        "Agent.reward_weights = [1.0, @rnd_w/LinearSchedule()]\n"
        "rnd_w/LinearSchedule.start = 1.0\nrnd_w/LinearSchedule.end = 0.0"),
        ["TrainerConfig.summary_interval=1"])
    seen = []
    add = trainer.context.add_iteration_scalar

    def spy(tag, value, reduce="mean"):
        if tag.startswith("Reward/") and tag.endswith("/weight"):
            seen.append((trainer.context.iteration, tag, value))
        add(tag, value, reduce)

    trainer.context.add_iteration_scalar = spy
    trainer.run()
    rnd = [(i, v) for i, tag, v in seen if tag == "Reward/RNDRewardModule/weight"]
    assert {tag for _, tag, _ in seen} == {"Reward/extrinsic/weight",
                                          "Reward/RNDRewardModule/weight"}
    # 4 iterations: the weight falls with progress, from near 1 to near 0
    values = [v for _, v in rnd]
    assert values == sorted(values, reverse=True) and values[0] > values[-1]
    assert trainer.algorithm.reward_weights[1].item() == values[-1]


def test_a2c_with_rnd_composes_the_reward_while_acting_and_trains_the_module(
        make_trainer, alf_cli, tmp_path):
    """On-policy through the rollout's graph: the reward A2C's loss sees is the weighted
    sum, composed in rollout_step from the previous observation (carried in the rollout
    state); RND trains on the unroll's transitions after A2C's update."""
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_A2C + RND.replace(
        "PPOAlgorithm", "ActorCriticAlgorithm"), ["TrainerConfig.summary_interval=1"])
    agent = trainer.algorithm
    seen = []
    train = agent.rl_algorithm.train_from_unroll

    def spy(experience):
        seen.append((experience.time_step.reward.clone(),
                     experience.rollout_info.reward.detach().clone(),
                     experience.time_step.step_type.clone()))
        return train(experience)

    agent.rl_algorithm.train_from_unroll = spy
    trainer.run()
    assert seen and trainer.context.num_updates == len(seen)
    for extrinsic, composed, step_type in seen:
        first = step_type == StepType.FIRST
        assert torch.equal(composed[first], extrinsic[first])  # no bonus at an episode start
        bonus = (composed - extrinsic)[~first]
        assert bool((bonus > 0).all())  # RND's bonus, weight 0.5, is positive
    opt = agent.reward_modules[0].optimizers()[0]
    steps = [float(s["step"]) for s in opt.state_dict()["state"].values()]
    assert steps and min(steps) == len(seen)  # one module step per unroll


def test_the_weights_for_a_batch_are_read_under_the_weights_lock(clean_gin):
    """A learner thread reads the weights (the fixed flag, then the schedules) under
    ``weights_lock``, the lock a callback's set_reward_weights runs under: a callback's
    weights are never overwritten by a schedule read that started before them."""
    import threading
    from alf.utils.schedules import LinearSchedule
    agent = Agent(OBS, ACTION, reward_modules=[_Constant],
                  reward_weights=[1.0, LinearSchedule(1.0, 0.0)])
    agent.context.num_iterations, agent.context.iteration = 10, 5
    agent.context.weights_lock = threading.RLock()
    read = []
    with agent.context.weights_lock:  # the main thread, as a callback is
        learner = threading.Thread(target=lambda: read.append(agent._current_reward_weights()))
        learner.start()
        learner.join(timeout=0.5)
        assert learner.is_alive() and not read  # waits for the lock
        agent.set_reward_weights([0.5, 2.0])
    learner.join(timeout=10)
    assert not learner.is_alive()
    assert torch.equal(read[0], torch.tensor([0.5, 2.0]))
    assert torch.equal(agent.reward_weights, torch.tensor([0.5, 2.0]))
    agent.set_reward_weights([0.25, 1.0])  # a later call: the batch's copy is its own
    assert torch.equal(read[0], torch.tensor([0.5, 2.0]))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_set_reward_weights_refuses_a_weight_that_is_not_finite(clean_gin, bad):
    agent = Agent(OBS, ACTION, reward_modules=[_Constant], reward_weights=[1.0, 0.5])
    with pytest.raises(ValueError) as e:
        agent.set_reward_weights([1.0, bad])
    assert str(e.value) == (f"Agent.set_reward_weights: the weight of column 1 (Constant) "
                            f"is {bad}: each weight must be a finite number")
    assert torch.equal(agent.reward_weights, torch.tensor([1.0, 0.5]))
    assert not bool(agent.state_dict()["_reward_weights_fixed"])
