"""Reward modules without parameters, the store hook (``RewardModule.observe``: each
collected step once, on the learner, in every regime) and ``CountRewardModule``
(SimHash counts, Tang et al. 2017)."""
import os

import pytest
import torch

import alf
from alf.algorithms.agent import Agent
from alf.algorithms.collected_transitions import CollectedTransitions
from alf.algorithms.count_reward_module import CountRewardModule
from alf.algorithms.reward_module import RewardModule
from alf.data_structures import StepType, TimeStep
from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

OBS = TensorSpec((2,))
ACTION = BoundedTensorSpec((), torch.int64, 0, 1)

COUNT = """
TrainerConfig.algorithm_ctor = @Agent
Agent.reward_modules = [@CountRewardModule]
Agent.reward_weights = [1.0, 0.5]
CountRewardModule.code_bits = 8
"""

# APPO with env workers (one process here: async_mode='serial'), 2 envs x 8 steps
TINY_APPO = """
include 'appo_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.async_mode = 'serial'
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 3
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 1
TrainerConfig.summary_interval = 1
TrainerConfig.progress_interval_seconds = 0.0
Agent.rl_algorithm_cls = @APPOAlgorithm
"""


@alf.configurable
class Visits(RewardModule):
    """A count bonus as a new user writes it: no parameters, no optimizer, no update."""
    uses_previous_step = False

    def __init__(self, observation_spec, action_spec, context=None, name="Visits"):
        super().__init__(observation_spec, action_spec, context=context, name=name)
        self.register_buffer("counts", torch.zeros(16))

    def _bucket(self, observation):
        return (observation[:, 0] > 0).long() + 2 * (observation[:, 2] > 0).long()

    def observe(self, prev_observation, prev_action, observation, valid):
        self.counts.index_add_(0, self._bucket(observation), torch.ones(len(observation)))

    def reward(self, prev_observation, prev_action, observation):
        return 1.0 / self.counts[self._bucket(observation)].clamp(min=1).sqrt()


def test_a_module_without_parameters_needs_no_optimizer_and_no_update(make_trainer, alf_cli,
                                                                       tmp_path):
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO + COUNT.replace(
        "@CountRewardModule", "@Visits").replace("CountRewardModule.code_bits = 8", ""))
    trainer.run()
    module = trainer.algorithm.reward_modules[0]
    assert not module.trains and module.optimizers() == []
    # 4 iterations of 2 envs x 8 steps: every step but each env's first, once
    assert trainer.context.env_steps == 64 and float(module.counts.sum()) == 64 - 2
    trainer.close()


class _Trainable(RewardModule):
    def __init__(self, observation_spec, action_spec, optimizer=None, context=None):
        super().__init__(observation_spec, action_spec, optimizer=optimizer,
                         context=context, name="Trainable")
        self._w = torch.nn.Parameter(torch.zeros(()))

    def reward(self, prev_observation, prev_action, observation):
        return self._w.detach().expand(observation.shape[0])


def test_a_module_with_parameters_still_needs_an_optimizer_and_a_loss(clean_gin):
    with pytest.raises(ConfigError, match="set Trainable.optimizer"):
        Agent(OBS, ACTION, reward_modules=[_Trainable])
    from alf.utils.optimizers import Adam
    with_adam = lambda **kw: _Trainable(optimizer=Adam(lr=1e-3), **kw)  # noqa: E731
    with pytest.raises(ConfigError, match=r"no loss: implement _Trainable.loss\("):
        Agent(OBS, ACTION, reward_modules=[with_adam])


def test_the_check_is_an_explicit_call_not_a_construction_hook(clean_gin):
    """No hidden wrapping of constructors (docs/design/agent.md): a part built by hand (a
    unit test, a custom loop) is just built, and ``check_training_setup()`` (what the
    Agent calls on each part it builds) names what it lacks."""
    part = _Trainable(OBS, ACTION)
    assert part.trains
    with pytest.raises(ConfigError, match="set Trainable.optimizer"):
        part.check_training_setup()
    CountRewardModule(OBS, ACTION, code_bits=2).check_training_setup()  # nothing to train


def test_the_bonus_is_beta_over_the_root_of_the_count(clean_gin):
    """Hand-computed: A = I, so the code of (x, y) is [x > 0] + 2 [y > 0]."""
    module = CountRewardModule(OBS, ACTION, code_bits=2, beta=0.5)
    module.projection.copy_(torch.eye(2))
    obs = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [-1.0, 2.0],
                        [-3.0, -1.0]])
    module.observe(None, None, obs, torch.ones(6, dtype=torch.bool))
    assert module.counts.tolist() == [1, 0, 1, 4]
    probe = torch.tensor([[2.0, 3.0], [-1.0, 1.0], [-1.0, -1.0], [5.0, -1.0]])
    assert module.reward(None, None, probe).tolist() == [0.25, 0.5, 0.5, 0.5]
    # an unseen code earns beta; a table smaller than 2^k folds codes together
    folded = CountRewardModule(OBS, ACTION, code_bits=2, table_size=2, beta=1.0)
    folded.projection.copy_(torch.eye(2))
    folded.observe(None, None, obs, torch.ones(6, dtype=torch.bool))
    assert folded.counts.tolist() == [2, 4]  # codes 0 (once), 2 (once) -> 0; 3 (4 times) -> 1
    assert not module.trains and module.update(None, None, obs, torch.ones(6)) is None
    with pytest.raises(ConfigError, match="table_size = 5 is out of range"):
        CountRewardModule(OBS, ACTION, code_bits=2, table_size=5)


def _ts(obs, step_type, env_id):
    T, B = step_type.shape
    return TimeStep(step_type=step_type, reward=torch.zeros(T, B), discount=torch.ones(T, B),
                    observation=obs, prev_action=torch.arange(T * B).reshape(T, B),
                    env_id=env_id, env_info={})


def test_collected_transitions_give_each_new_step_once_with_its_predecessor():
    mid, first = int(StepType.MID), int(StepType.FIRST)
    sync = CollectedTransitions()
    obs = torch.arange(6.0).reshape(3, 2)  # [T=3, B=2]: env 0 sees 0, 2, 4; env 1 1, 3, 5
    steps = torch.tensor([[first, first], [mid, mid], [mid, first]])
    env_id = torch.tensor([[0, 1]] * 3)
    prev, _, now, valid = sync(_ts(obs, steps, env_id), bootstrap_last=False)
    assert now.tolist() == [2.0, 3.0, 4.0, 5.0] and prev.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert valid.tolist() == [True, True, True, False]
    prev, _, now, valid = sync(_ts(obs + 6, torch.full((3, 2), mid), env_id), False)
    assert now.tolist() == [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]  # step 0 follows step 2 before
    assert prev.tolist() == [4.0, 5.0, 6.0, 7.0, 8.0, 9.0] and bool(valid.all())
    # async: [T + 1, B] whose last step comes again as the next unroll's first
    prev, action, now, valid = CollectedTransitions()(_ts(obs, steps, env_id), True)
    assert now.tolist() == [2.0, 3.0, 4.0, 5.0] and action.tolist() == [2, 3, 4, 5]


def _agent_run(make_trainer, root, conf, params=()):
    trainer = make_trainer(root, conf + COUNT, list(params))
    seen = []
    module = trainer.algorithm.reward_modules[0]
    reward = module.reward
    module.reward = lambda p, a, o: seen.append(o.shape[0]) or reward(p, a, o)
    trainer.run()
    return trainer, module, sum(seen)


@pytest.mark.parametrize("conf,params,first_steps", [
    ("TINY_PPO", [], 2),                                      # whole buffer, sync
    ("TINY_A2C", [], 2),                                      # on-policy, sync
    ("TINY_PPO", ["TrainerConfig.learner_thread=True"], 2),   # a learner thread
    ("TINY_APPO", [], 0),                                     # async, [B, T+1] batches
])
def test_counts_grow_once_per_collected_step_in_every_regime(make_trainer, alf_cli, tmp_path,
                                                             conf, params, first_steps):
    agent_conf = TINY_APPO if conf == "TINY_APPO" else getattr(alf_cli, conf) + (
        "Agent.rl_algorithm_cls = @ActorCriticAlgorithm\n" if conf == "TINY_A2C" else "")
    trainer, module, rewarded = _agent_run(make_trainer, tmp_path / "run", agent_conf, params)
    steps = trainer.context.env_steps
    assert steps > 0 and int(module.counts.sum()) == steps - first_steps
    assert rewarded > 0
    trainer.close()


def test_under_replay_counts_are_visits_not_samples(make_trainer, alf_cli, tmp_path):
    """SAC samples each stored step many times; each counts once."""
    trainer, module, rewarded = _agent_run(
        make_trainer, tmp_path / "run", alf_cli.TINY_SAC + "Agent.rl_algorithm_cls = "
        "@SacAlgorithm\n", ["TrainerConfig.save_replay_buffer=False",
                           "TrainerConfig.initial_collect_steps=100",
                           "TrainerConfig.num_env_steps=200",
                           "TrainerConfig.num_updates_per_train_iter=8"])
    steps = trainer.context.env_steps
    assert steps == 200 and int(module.counts.sum()) == steps - 2
    assert rewarded > 3 * steps  # the bonus was read for every sampled transition
    state = trainer.algorithm.state_dict()
    assert torch.equal(state["_reward_modules.0.counts"], module.counts)
    assert not any(k.startswith("_reward_modules") for k in trainer.algorithm.rollout_state_dict())
    trainer.close()


def test_the_doc_shows_the_shipped_class_statement_for_statement():
    """docs/writing_an_algorithm.md's worked example is CountRewardModule as shipped
    (docstrings aside)."""
    import ast
    import os
    import re
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = open(os.path.join(root, "docs", "writing_an_algorithm.md")).read()
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
              if "class CountRewardModule(RewardModule)" in b]
    assert len(blocks) == 1
    real = open(os.path.join(root, "alf", "algorithms", "count_reward_module.py")).read()

    def statements(source):
        cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef))
        out = []
        for node in cls.body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the class docstring
            if isinstance(node, ast.FunctionDef):
                body = node.body
                if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    body = body[1:]
                out.append(ast.dump(ast.Module(body=[ast.Expr(node.args)] + body,
                                               type_ignores=[])))
                out.append([ast.dump(d) for d in node.decorator_list])
                continue
            out.append(ast.dump(node))
        return out

    assert statements(blocks[0]) == statements(real)


def test_the_example_trains_by_gin_alone(make_trainer, tmp_path):
    trainer = make_trainer(tmp_path / "run", "include 'ppo_count_cart_pole.gin'\n", [
        "TrainerConfig.num_env_steps=0", "TrainerConfig.num_iterations=2",
        "create_environment.num_parallel_environments=2", "TrainerConfig.unroll_length=16",
        "TrainerConfig.mini_batch_size=8", "TrainerConfig.evaluate=False"])
    trainer.run()
    module = trainer.algorithm.reward_modules[0]
    assert isinstance(module, CountRewardModule) and module.counts.numel() == 2 ** 16
    assert int(module.counts.sum()) == trainer.context.env_steps - 2 == 62
    trainer.close()


USER_MODULE = '''
import torch

import alf
from alf.algorithms.reward_module import RewardModule


@alf.configurable
class Visits(RewardModule):
    uses_previous_step = False

    def __init__(self, observation_spec, action_spec, context=None, name="Visits"):
        super().__init__(observation_spec, action_spec, context=context, name=name)
        self.register_buffer("counts", torch.zeros(4))

    def observe(self, prev_observation, prev_action, observation, valid):
        bucket = (observation[:, 0] > 0).long() + 2 * (observation[:, 2] > 0).long()
        self.counts.index_add_(0, bucket, torch.ones(len(observation)))

    def reward(self, prev_observation, prev_action, observation):
        bucket = (observation[:, 0] > 0).long() + 2 * (observation[:, 2] > 0).long()
        return 1.0 / self.counts[bucket].clamp(min=1).sqrt()
'''


def test_a_module_without_parameters_trains_from_the_command_line(alf_cli, tmp_path):
    """Issue 39: without an optimizer placeholder and an overridden update(), such a
    module was a 60-line traceback after the run directory was written."""
    (tmp_path / "my_visits.py").write_text(USER_MODULE)
    alf_cli.write_gin(tmp_path, "import my_visits\n" + alf_cli.TINY_PPO + COUNT.replace(
        "@CountRewardModule", "@Visits").replace("CountRewardModule.code_bits = 8", ""))
    done = alf_cli.run("alf.bin.train", ["--conf", "tiny.gin", "--root_dir", "run"], tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    from alf.trainers.checkpointer import Checkpointer
    _, state, _ = Checkpointer(str(tmp_path / "run" / "train")).load_latest()
    assert float(state["algorithm"]["_reward_modules.0.counts"].sum()) == 64 - 2


def test_a_default_table_too_large_is_one_error_suggesting_table_size(clean_gin):
    """code_bits up to 62 with one count per code (2^k) tried to allocate terabytes (a
    torch traceback); above 2^24 counts the table size must be chosen."""
    with pytest.raises(ConfigError) as e:
        CountRewardModule(OBS, ACTION, code_bits=40)
    msg = str(e.value).splitlines()[0]  # gin adds the configurable's name on a line of its own
    assert msg.startswith("CountRewardModule.code_bits = 40: one count per code is "
                          "2^40 = 1,099,511,627,776 counts (8.0 TiB)")
    assert "set CountRewardModule.table_size" in msg and "collide" in msg
    assert CountRewardModule(OBS, ACTION, code_bits=24).counts.numel() == 2 ** 24
    folded = CountRewardModule(OBS, ACTION, code_bits=40, table_size=1000)
    assert folded.counts.numel() == 1000
    assert int(folded.bucket(torch.randn(64, 2)).max()) < 1000


def test_a_default_table_too_large_is_refused_by_the_cli_in_one_line(alf_cli, tmp_path):
    alf_cli.write_gin(tmp_path, alf_cli.TINY_PPO + COUNT.replace(
        "CountRewardModule.code_bits = 8", "CountRewardModule.code_bits = 40"))
    done = alf_cli.run("alf.bin.train", ["--conf", "tiny.gin", "--root_dir", "run"], tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "CountRewardModule.code_bits = 40" in lines[0] and "table_size" in lines[0]
    assert not (tmp_path / "run").exists() or not os.listdir(tmp_path / "run")
