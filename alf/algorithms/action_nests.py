"""Action spaces beyond one ``Box`` or one ``Discrete``: which algorithms take them, the
one-line refusal of the others, and behaviour cloning of an action nest.

The actor networks give a :class:`~alf.utils.distributions.MultiCategorical` for a ``[D]``
discrete action (gymnasium ``MultiDiscrete``/``MultiBinary``) and a
:class:`~alf.utils.distributions.JointDistribution` for a ``Dict``/``Tuple`` nest; the
algorithms that only use ``log_prob``/``entropy``/``sample``/``mode`` of the policy
(``ActorCriticAlgorithm``, ``PPOAlgorithm``, ``APPOAlgorithm``, ``ImpalaAlgorithm``,
``BcAlgorithm``) take them unchanged. ``SacAlgorithm`` takes a nest whose leaves are all
1-d ``Box`` (:func:`is_box_nest`: one squashed Gaussian per leaf, its critics read the
leaves concatenated). Algorithms that need one action tensor (a Q-value per discrete
action, a critic of a reparameterised Box action) refuse them before anything is built,
naming the space as gymnasium writes it.
"""
from typing import Any, Tuple

import numpy as np
import torch

from alf import nest as alf_nest
from alf.errors import IncompatibleSpecError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

NEST_ALGORITHMS = "PPOAlgorithm, ActorCriticAlgorithm, APPOAlgorithm, ImpalaAlgorithm or BcAlgorithm"


def _ints(values: Any, shape: tuple) -> list:
    return [int(v) for v in np.broadcast_to(np.asarray(values), shape).reshape(-1)]


def space_name(spec: Any) -> str:
    """The gymnasium space an action spec came from, e.g. ``MultiDiscrete([3, 3])`` or
    ``Dict(sign=Discrete(2), size=Box(1,))`` (for messages)."""
    if isinstance(spec, dict):
        return "Dict(" + ", ".join(f"{k}={space_name(s)}" for k, s in spec.items()) + ")"
    if isinstance(spec, (tuple, list)):
        return "Tuple(" + ", ".join(space_name(s) for s in spec) + ")"
    if not isinstance(spec, TensorSpec):
        return repr(spec)
    if spec.is_discrete() and isinstance(spec, BoundedTensorSpec):
        low, high = _ints(spec.minimum, spec.shape), _ints(spec.maximum, spec.shape)
        sizes = [h - l + 1 for l, h in zip(low, high)]
        start = "" if not any(low) else f", start={low if spec.ndim else low[0]}"
        if spec.ndim == 0:
            return f"Discrete({sizes[0]}{start})"
        return f"MultiDiscrete({sizes}{start})"
    return f"Box{tuple(spec.shape)}"


def is_single_action(spec: Any) -> bool:
    """One scalar discrete action (``Discrete``) or one 1-d float action (``Box``)."""
    return isinstance(spec, TensorSpec) and (
        spec.is_discrete() and spec.ndim == 0 or spec.is_continuous() and spec.ndim == 1)


def is_box_nest(spec: Any) -> bool:
    """A ``dict``/``tuple`` nest (gymnasium ``Dict``/``Tuple``) whose leaves are all 1-d
    float actions (``Box``): what ``SacAlgorithm`` takes besides one Box or Discrete."""
    if not isinstance(spec, (dict, tuple)):
        return False
    leaves = alf_nest.flatten(spec)
    return bool(leaves) and all(isinstance(s, TensorSpec) and s.is_continuous()
                                and s.ndim == 1 for s in leaves)


def refuse_action_space(name: str, spec: Any, takes: str) -> IncompatibleSpecError:
    """The one-line refusal of an action space ``name`` cannot train: what it takes and
    which algorithms take action nests (raise it); a nest of Box actions is also pointed
    to ``SacAlgorithm``."""
    sac = ("; a Dict/Tuple nest of Box actions also trains with SacAlgorithm"
           if is_box_nest(spec) else "")
    return IncompatibleSpecError(
        f"{name} takes {takes}, not the action space {space_name(spec)}; MultiDiscrete, "
        f"MultiBinary and Dict/Tuple action spaces train with {NEST_ALGORITHMS}{sac}")


class NestCloning:
    """The negative log-likelihood of a demonstrated action nest (``BcAlgorithm``'s loss for
    ``MultiDiscrete``/``MultiBinary``/``Dict``/``Tuple`` actions) and its per-row error.

    Bounded float leaves are clipped into ``[low + m, high - m]`` first (``m`` =
    ``margin`` x half the range), as ``BcAlgorithm`` does for a single ``Box``: a
    demonstrated action at a bound has an unbounded log-density under a tanh-squashed
    Gaussian.

    Args:
        action_spec: the action spec (a ``[D]`` discrete spec or a nest).
        margin: fraction of the half range kept from the bounds.
    """

    def __init__(self, action_spec: Any, margin: float):
        self._spec = action_spec
        self._clips = [self._clip_of(s, margin) for s in alf_nest.flatten(action_spec)]

    @staticmethod
    def _clip_of(spec: TensorSpec, margin: float):
        if spec.is_discrete() or not isinstance(spec, BoundedTensorSpec):
            return None
        lo = np.broadcast_to(np.asarray(spec.minimum, np.float32), spec.shape)
        hi = np.broadcast_to(np.asarray(spec.maximum, np.float32), spec.shape)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            return None
        m = margin * (hi - lo) / 2
        return torch.as_tensor(lo + m), torch.as_tensor(hi - m)

    def __call__(self, dist: Any, mode: Any, action: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(loss [B], error [B])``: ``-log p(clipped action)`` and the fraction of leaves
        whose mode differs from the demonstration (a discrete leaf: any dimension differs;
        a float leaf: any dimension off by more than 0.01), ``[B]`` each."""
        leaves = alf_nest.flatten(action)
        clipped = [a if c is None else torch.maximum(torch.minimum(a, c[1]), c[0])
                   for a, c in zip(leaves, self._clips)]
        loss = -dist.log_prob(alf_nest.pack_sequence_as(self._spec, clipped))
        errors = []
        for m, a in zip(alf_nest.flatten(mode), leaves):
            wrong = (m.detach() != a) if not a.dtype.is_floating_point else (
                (m.detach() - a).abs() > 0.01)
            errors.append(wrong.reshape(wrong.shape[0], -1).any(-1).to(loss.dtype))
        return loss, sum(errors) / len(errors)
