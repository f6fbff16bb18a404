"""TD3 (Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic
Methods"): DDPG with clipped double Q (two critics, min target), target policy
smoothing (noise 0.2 clipped at 0.5) and delayed actor/target updates (every 2
critic updates). The update itself lives in :class:`DdpgAlgorithm`.
"""
from typing import Any, Callable, Optional

import alf
from alf.algorithms.ddpg_algorithm import DdpgAlgorithm
from alf.config_ranges import Discount, NonNegative, PositiveInt, UpdateRate
from alf.networks.actor_networks import ActorNetwork
from alf.networks.critic_networks import CriticNetwork
from alf.tensor_specs import TensorSpec
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext


@alf.configurable
class Td3Algorithm(DdpgAlgorithm):
    """TD3 = DdpgAlgorithm with the paper's defaults (see the module docstring).

    Args: as :class:`DdpgAlgorithm`; defaults ``num_critics=2``,
    ``target_policy_noise=0.2``, ``target_noise_clip=0.5``, ``actor_update_period=2``.
    """

    def __init__(self, observation_spec: Any, action_spec: Any, reward_spec: Any = TensorSpec(()),
                 actor_network_ctor: Callable = ActorNetwork,
                 critic_network_ctor: Callable = CriticNetwork,
                 num_critics: PositiveInt = 2,
                 exploration_noise: NonNegative = 0.1,
                 target_policy_noise: NonNegative = 0.2,
                 target_noise_clip: NonNegative = 0.5,
                 actor_update_period: PositiveInt = 2,
                 actor_optimizer: Optional[OptimizerFactory] = None,
                 critic_optimizer: Optional[OptimizerFactory] = None,
                 n_step: PositiveInt = 1, gamma: Discount = 0.99,
                 target_update_tau: UpdateRate = 0.005,
                 context: Optional[RunContext] = None,
                 debug_summaries: bool = False, name: str = "Td3Algorithm"):
        super().__init__(observation_spec, action_spec, reward_spec=reward_spec,
                         actor_network_ctor=actor_network_ctor,
                         critic_network_ctor=critic_network_ctor, num_critics=num_critics,
                         exploration_noise=exploration_noise,
                         target_policy_noise=target_policy_noise,
                         target_noise_clip=target_noise_clip,
                         actor_update_period=actor_update_period,
                         actor_optimizer=actor_optimizer, critic_optimizer=critic_optimizer,
                         n_step=n_step, gamma=gamma, target_update_tau=target_update_tau,
                         context=context,
                         debug_summaries=debug_summaries, name=name)
