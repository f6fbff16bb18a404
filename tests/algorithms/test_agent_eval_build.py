"""An Agent built for evaluation only (``build_algorithm(role="player")``, what ``play``
builds): the RL algorithm's eval build and nothing else (no value network, no reward
module, no optimizer), loading a training checkpoint; issue 39 item 5: ``play`` of a
PPO+RND run built the value network, the RND module and two optimizers (26,500
parameters against PPO's 4,610)."""
from types import SimpleNamespace

import gin
import torch

from alf import config as alf_config
from alf.data_structures import StepType, TimeStep
from alf.environments.env_specs import EnvSpecs
from alf.experiment import build_algorithm, checkpoint_state_for, is_eval_build
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.trainers.experiment_signature import load_algorithm_state

SPECS = EnvSpecs(observation_spec=TensorSpec((4,)),
                 action_spec=BoundedTensorSpec((), torch.int64, 0, 1),
                 reward_spec=TensorSpec(()), time_step_spec=None)


def _build(conf: str, role: str):
    gin.clear_config()
    alf_config.parse_config(conf_file=conf)
    ctor = gin.query_parameter("TrainerConfig.algorithm_ctor").scoped_configurable_fn
    config = SimpleNamespace(algorithm_ctor=ctor, data_transformer_ctor=None,
                             num_iterations=0, num_env_steps=0, summary_interval=100,
                             summarize_first_interval=True, device="cpu")
    return build_algorithm(config, SPECS, role=role)


def _params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _time_step(n: int = 5) -> TimeStep:
    g = torch.Generator().manual_seed(3)
    return TimeStep(step_type=torch.full((n,), StepType.MID, dtype=torch.int32),
                    reward=torch.zeros(n), discount=torch.ones(n),
                    observation=torch.randn(n, 4, generator=g), prev_action=torch.zeros(
                        n, dtype=torch.int64), env_id=torch.arange(n), env_info={})


def test_ppo_rnd_eval_build_has_ppos_parameters_only(clean_gin):
    ppo_eval = _params(_build("ppo_cart_pole.gin", "player"))
    agent_eval = _build("ppo_rnd_cart_pole.gin", "player")
    agent_full = _build("ppo_rnd_cart_pole.gin", "learner")
    assert _params(agent_eval) == ppo_eval == 4610
    assert _params(agent_full) > 20000  # value network and RND's networks
    assert is_eval_build(agent_eval) and not agent_eval.reward_modules
    assert not any(k.startswith(("_reward_modules.", "_rl._value_network."))
                   for k in agent_eval.state_dict())
    agent_eval.ensure_optimizers()
    assert not any(getattr(m, "_optimizers", None) for m in agent_eval.modules())


def test_training_state_loads_into_the_eval_build_and_acts_alike(clean_gin):
    full = _build("ppo_rnd_cart_pole.gin", "learner")
    full.ensure_optimizers()
    with torch.no_grad():  # off its init, so that the load is visible
        for p in full.parameters():
            p.add_(0.1 * torch.randn_like(p))
    state = full.state_dict()
    player = _build("ppo_rnd_cart_pole.gin", "player")
    load_algorithm_state(player, checkpoint_state_for(player, state), "run")
    full.eval()
    ts = _time_step()
    with torch.no_grad():
        a = full.predict_step(ts, full.get_initial_predict_state(5)).output
        b = player.predict_step(ts, player.get_initial_predict_state(5)).output
    assert torch.equal(a, b)
