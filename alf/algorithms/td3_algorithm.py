"""TD3 (Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic
Methods"): DDPG with clipped double Q (two critics, min target), target policy
smoothing (noise 0.2 clipped at 0.5) and delayed actor/target updates (every 2
critic updates). The update itself lives in :class:`DdpgAlgorithm`.
"""
import alf
from alf.algorithms.ddpg_algorithm import DdpgAlgorithm
from alf.utils.defaults import with_defaults


@alf.configurable
class Td3Algorithm(DdpgAlgorithm):
    """TD3 = DdpgAlgorithm with the paper's defaults (see the module docstring).

    Args: as :class:`DdpgAlgorithm`; defaults ``num_critics=2``,
    ``target_policy_noise=0.2``, ``target_noise_clip=0.5``, ``actor_update_period=2``.
    """

    __init__ = with_defaults(DdpgAlgorithm.__init__, num_critics=2, target_policy_noise=0.2,
                             target_noise_clip=0.5, actor_update_period=2, name="Td3Algorithm")
