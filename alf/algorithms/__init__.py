"""Algorithms: one module per algorithm (see docs/writing_an_algorithm.md).

``import alf`` imports the configurable modules (``alf/_registry.py``); the
V-trace algorithms and the offline learners are imported here so that gin finds
``APPOAlgorithm``, ``ImpalaAlgorithm``, ``ImpalaLoss``, ``BcAlgorithm``,
``IqlAlgorithm``, ``Agent`` and the reward modules (``RNDRewardModule``,
``ICMRewardModule``) and representation learners (``LatentDynamicsLearner``)
whenever any
algorithm module is loaded.
"""
from alf.algorithms import appo_algorithm, impala_algorithm  # noqa: F401
from alf.algorithms import bc_algorithm, iql_algorithm  # noqa: F401
from alf.algorithms import (agent, count_reward_module, icm_reward_module,  # noqa: F401
                            rnd_reward_module)
from alf.algorithms import latent_dynamics_learner  # noqa: F401
