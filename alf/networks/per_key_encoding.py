"""Per-key observation preprocessing for :class:`alf.networks.EncodingNetwork`.

A dict observation ``{key: sub_spec}`` is encoded entry by entry: each key gets
its own network (its ``input_preprocessors[key]``, else a default built by the
EncodingNetwork), mapping ``[*outer, *sub_spec]`` to ``[*outer, F_key]``;
the features then go, in the nest's key order, to the combiner. This module
builds and checks those networks; it knows nothing of the defaults.
"""
import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import optree
from torch import nn

from alf import nest as alf_nest
from alf.errors import IncompatibleSpecError
from alf.networks.network import Network
from alf.tensor_specs import TensorSpec

Nest = Any

#: Flattened images already noted (one line per observation entry and shape per process).
FLATTEN_NOTED = set()


def top_level_keys(input_spec: Nest) -> List[str]:
    """The keys of a dict observation in :func:`alf.nest.flatten` order."""
    _, _, entries, _ = optree.tree_flatten_one_level(input_spec, none_is_leaf=False)
    return list(entries)


def check_preprocessor_keys(owner: str, input_spec: Nest, input_preprocessors: Mapping) -> None:
    """``input_preprocessors`` must be a dict whose keys are keys of the dict ``input_spec``."""
    if not isinstance(input_preprocessors, Mapping):
        raise IncompatibleSpecError(
            f"{owner}: input_preprocessors must be a dict {{observation key: encoder}}, got "
            f"{type(input_preprocessors).__name__}, e.g. "
            "EncodingNetwork.input_preprocessors = {'camera': @CnnEncoder, 'state': @MlpEncoder}")
    if not isinstance(input_spec, Mapping):
        raise IncompatibleSpecError(
            f"{owner}: input_preprocessors {sorted(input_preprocessors)} name observation keys, "
            f"but the observation is not a dict: {input_spec!r}. Unset input_preprocessors "
            "(use conv_layer_params / fc_layer_params, or encoding_network_ctor).")
    unknown = sorted(set(input_preprocessors) - set(input_spec))
    if unknown:
        raise IncompatibleSpecError(
            f"{owner}: input_preprocessors name {unknown}, which the observation does not have; "
            f"its keys are {sorted(input_spec)}.")


def _make(owner: str, key: str, ctor: Any, spec: Nest) -> Network:
    net = ctor if isinstance(ctor, Network) else ctor(input_spec=spec)
    if not isinstance(net, Network):
        raise TypeError(f"{owner}: input_preprocessors[{key!r}] must be an alf Network or a "
                        f"ctor(input_spec=) of one, got {type(net).__name__}")
    out = net.output_spec
    if not alf_nest.is_empty(net.state_spec):
        raise IncompatibleSpecError(
            f"{owner}: input_preprocessors[{key!r}] ({net.name}) has state {net.state_spec!r}; "
            "per-key encoders must be feed-forward (use an RNN network for recurrence).")
    if not (isinstance(out, TensorSpec) and out.ndim == 1 and out.dtype.is_floating_point):
        raise IncompatibleSpecError(
            f"{owner}: input_preprocessors[{key!r}] ({net.name}) must output a [F] float "
            f"feature vector, outputs {out!r}.")
    return net


def build_preprocessors(owner: str, input_spec: Mapping,
                        input_preprocessors: Optional[Mapping],
                        default_ctor: Callable[[str, Nest], Network]
                        ) -> Tuple[List[str], nn.ModuleDict]:
    """One network per top-level key of ``input_spec``: ``input_preprocessors[key]``
    (a ``Network`` or a ``ctor(input_spec=)``) where given and not ``None``, else
    ``default_ctor(key, sub_spec)``. Returns the keys in nest order and the networks."""
    chosen = dict(input_preprocessors or {})
    keys = top_level_keys(input_spec)
    nets: Dict[str, Network] = {}
    for key in keys:
        ctor = chosen.get(key)
        nets[key] = (default_ctor(key, input_spec[key]) if ctor is None
                     else _make(owner, key, ctor, input_spec[key]))
    return keys, nn.ModuleDict(nets)


def note_flattened_image(owner: str, path: str, spec: TensorSpec, hint: str) -> None:
    """One warning line, once per process for each ``(path, spec)``, saying that a
    ``[C, H, W]`` input is flattened into ``C*H*W`` inputs of the fc layers, and how
    to give it a CNN instead (``hint``)."""
    where = f"observation entry {path!r}" if path else "the observation"
    key = (where, tuple(spec.shape), spec.dtype)
    if key in FLATTEN_NOTED:
        return
    FLATTEN_NOTED.add(key)
    logging.warning("%s: %s %s is flattened into %d inputs of the fc layers (no conv settings); %s",
                    owner, where, list(spec.shape), spec.numel, hint)
