"""Critic networks: ``(observation, action) -> Q(s, a)`` for an ensemble of critics.

:class:`CriticNetwork` evaluates ``num_critics`` independent critics (SAC/TD3
twin critics by default) as one batched computation with
:class:`~alf.networks.ensemble_layers.EnsembleMLP`: the first layer reads the
shared ``concat(observation, action)`` once, the others run one ``baddbmm``
per layer for all critics. The action may be a ``dict``/``tuple`` nest of ``Box``
leaves (SAC on a gymnasium ``Dict``/``Tuple`` of ``Box``): the critics read its leaves
concatenated in :func:`alf.nest.flatten` order. Each critic is initialised like the
``nn.Sequential`` of ``nn.Linear`` that SB3 and CleanRL use (torch's default
init), and computes exactly what that sequential would with its weights.
"""
from typing import Any, Callable, Optional, Sequence, Tuple

import torch

import alf
from alf import nest as alf_nest
from alf.errors import IncompatibleSpecError
from alf.networks.encoding_networks import EncodingNetwork
from alf.networks.ensemble_layers import EnsembleMLP
from alf.networks.network import Network
from alf.tensor_specs import TensorSpec

Nest = Any


@alf.configurable
class CriticNetwork(Network):
    """``(observation [B, ...], action [B, D])`` -> (q ``[B, num_critics]``, ``()``).

    The action may be a nest of ``[B, D_i]`` leaves (``D = sum D_i``), read as their
    concatenation in :func:`alf.nest.flatten` order.

    The observation may be any nest that :class:`EncodingNetwork` accepts
    without convolutions (vectors, scalars, discrete scalars one-hot encoded,
    ``uint8`` scaled by 1/255); its leaves are flattened and concatenated in
    :func:`alf.nest.flatten` order. Extra outer dims (e.g. ``[T, B]``) are kept:
    ``[T, B, ...] -> [T, B, num_critics]``.

    Architecture of each critic ``k``:

    * without ``observation_fc_layer_params``:
      ``concat(obs, action) -> fc_layer_params (activation) -> 1``;
    * with them: ``obs -> observation_fc_layer_params (activation)``, then
      ``concat(that, action) -> fc_layer_params (activation) -> 1``.

    With ``use_layer_norm`` every hidden layer is ``Linear -> LayerNorm -> activation``.
    """

    def __init__(self,
                 input_spec: Tuple[Nest, Nest],
                 fc_layer_params: Sequence[int] = (256, 256),
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 num_critics: int = 2,
                 observation_fc_layer_params: Optional[Sequence[int]] = None,
                 use_layer_norm: bool = False,
                 name: str = "CriticNetwork"):
        """
        Args:
            input_spec: ``(observation_spec, action_spec)``; ``observation_spec``
                a nest of ``TensorSpec``, ``action_spec`` a float ``TensorSpec``
                of shape ``[D]`` (gymnasium Box) or a ``dict``/``tuple`` nest of them.
            fc_layer_params: hidden layer sizes applied to ``concat(obs, action)``
                (or to ``concat(obs features, action)``).
            activation: activation of every hidden layer.
            num_critics: number of independent critics ``K`` in the ensemble.
            observation_fc_layer_params: optional hidden layers applied to the
                observation alone before it is joined with the action.
            use_layer_norm: each critic gets its own LayerNorm after every hidden
                Linear, before the activation (RLPD, Ball et al. 2023: it keeps Q
                values from extrapolating far beyond the data). The output layer is
                not normalised.
            name: name of the network.
        """
        if not (isinstance(input_spec, (tuple, list)) and len(input_spec) == 2):
            raise IncompatibleSpecError(
                f"{name} needs input_spec=(observation_spec, action_spec), got {input_spec!r}")
        observation_spec, action_spec = input_spec
        leaves = alf_nest.flatten(action_spec) if isinstance(
            action_spec, (TensorSpec, dict, tuple)) else []
        if not leaves or not all(isinstance(s, TensorSpec) and s.is_continuous()
                                 and s.ndim == 1 for s in leaves):
            raise IncompatibleSpecError(
                f"{name} needs a float action TensorSpec of shape [D] (gymnasium Box with 1-d "
                f"shape) or a dict/tuple nest of them; got action spec {action_spec!r}. For "
                "discrete actions use QNetwork (one Q value per action).")
        if int(num_critics) < 1:
            raise ValueError(f"{name}: num_critics must be >= 1, got {num_critics}")
        super().__init__(tuple(input_spec), name=name)
        self._num_critics = int(num_critics)
        self._action_spec = action_spec
        # Preprocessing only (no layers): flatten/one-hot/scale the observation nest.
        self._obs_encoder = EncodingNetwork(observation_spec, name=name + ".obs_encoder")
        obs_size = self._obs_encoder.output_size
        self._obs_is_plain_vector = (isinstance(observation_spec, TensorSpec)
                                     and observation_spec.ndim == 1
                                     and observation_spec.dtype == torch.float32)
        self._obs_mlp = None
        if observation_fc_layer_params:
            self._obs_mlp = EnsembleMLP(obs_size, observation_fc_layer_params, num_critics,
                                        activation=activation, use_layer_norm=use_layer_norm)
            obs_size = self._obs_mlp.output_size
        action_size = sum(s.shape[0] for s in leaves)
        self._joint_mlp = EnsembleMLP(obs_size + action_size, fc_layer_params,
                                      num_critics, output_size=1, activation=activation,
                                      use_layer_norm=use_layer_norm)
        self._output_spec = TensorSpec((self._num_critics,))

    @property
    def num_critics(self) -> int:
        return self._num_critics

    @property
    def action_spec(self) -> Nest:
        return self._action_spec

    def _flat_inputs(self, inputs: Tuple[Nest, Nest]):
        """-> (obs features ``[N, d_obs]``, action ``[N, D]``, outer dims)."""
        obs, action = inputs
        if not isinstance(action, torch.Tensor):  # an action nest: its leaves joined
            action = torch.cat(alf_nest.flatten(action), -1)
        obs = obs if self._obs_is_plain_vector else self._obs_encoder(obs)[0]
        outer = tuple(action.shape[:-1])
        if len(outer) != 1:  # [T, B, ...] -> [T*B, ...]
            obs = obs.reshape(-1, obs.shape[-1])
            action = action.reshape(-1, action.shape[-1])
        return obs, action.to(obs.dtype), outer

    def forward(self, inputs: Tuple[Nest, Nest],
                state: Nest = ()) -> Tuple[torch.Tensor, Nest]:
        """``inputs = (observation [B, ...], action [B, D] or its nest)`` -> (q ``[B, K]``,
        ``state``).

        Gradients flow to the parameters and to ``action`` (actor loss of
        DDPG/TD3/SAC); freeze the critic with ``requires_grad_(False)`` if only
        the action gradient is wanted.
        """
        obs, action, outer = self._flat_inputs(inputs)
        k = self._num_critics
        if self._obs_mlp is None:
            x = torch.cat([obs, action], dim=-1)                      # shared [N, d_obs + D]
        else:
            h = self._obs_mlp(obs)                                    # [K, N, H]
            x = torch.cat([h, action.expand(k, *action.shape)], -1)   # [K, N, H + D]
        q = self._joint_mlp(x).squeeze(-1).t()                        # [N, K]
        if len(outer) != 1:
            q = q.reshape(outer + (k,))
        return q, state

    def forward_critic(self, inputs: Tuple[Nest, Nest], index: int = 0) -> torch.Tensor:
        """Critic ``index`` alone: ``(observation [B, ...], action [B, D])`` -> q ``[B]``.

        Equal to ``forward(inputs)[0][..., index]`` at ``1/K`` of the cost: for
        losses that read one critic only, e.g. the TD3/DDPG actor loss on Q1.
        """
        if not 0 <= index < self._num_critics:
            raise IndexError(f"{self.name}: critic index {index} out of range "
                             f"[0, {self._num_critics})")
        obs, action, outer = self._flat_inputs(inputs)
        if self._obs_mlp is not None:
            obs = self._obs_mlp.forward_member(obs, index)
        q = self._joint_mlp.forward_member(torch.cat([obs, action], dim=-1), index)  # [N, 1]
        return q.reshape(outer)

    def forward_members(self, inputs: Tuple[Nest, Nest],
                        indices: torch.Tensor) -> torch.Tensor:
        """The critics ``indices`` (``[M]`` int64 tensor) alone:
        ``(observation [B, ...], action [B, D])`` -> q ``[B, M]``.

        Equal to ``forward(inputs)[0][..., indices]`` at ``M/K`` of the cost: e.g. the
        TD target of RLPD / REDQ, a min over a random subset of the target critics.
        """
        obs, action, outer = self._flat_inputs(inputs)
        m = indices.shape[0]
        if self._obs_mlp is None:
            x = torch.cat([obs, action], dim=-1)                      # shared [N, d_obs + D]
        else:
            h = self._obs_mlp.forward_members(obs, indices)           # [M, N, H]
            x = torch.cat([h, action.expand(m, *action.shape)], -1)   # [M, N, H + D]
        q = self._joint_mlp.forward_members(x, indices).squeeze(-1).t()  # [N, M]
        if len(outer) != 1:
            q = q.reshape(outer + (m,))
        return q
