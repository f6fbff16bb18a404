"""Import every module that defines configurables so gin can resolve their names."""
import importlib

_MODULES = [
    "alf.utils.schedules",
    "alf.utils.optimizers",
    "alf.environments",
    "alf.environments.goal_reward",
    "alf.networks",
    "alf.algorithms.data_transformers",
    "alf.algorithms.frame_stacker",
    "alf.algorithms.hindsight",
    "alf.algorithms.actor_critic_loss",
    "alf.algorithms.ppo_loss",
    "alf.algorithms.actor_critic_algorithm",
    "alf.algorithms.ppo_algorithm",
    "alf.algorithms.dqn_algorithm",
    "alf.algorithms.sac_algorithm",
    "alf.algorithms.ddpg_algorithm",
    "alf.algorithms.td3_algorithm",
    "alf.replay_buffers.replay_buffer",
    "alf.planning.tree_search",
    "alf.trainers.trainer_config",
]

for _m in _MODULES:
    importlib.import_module(_m)
