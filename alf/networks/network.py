"""``Network``: an ``nn.Module`` with declared input, state and output specs.

Every network maps a batched input nest ``[B, ...]`` and a state nest
``[B, ...]`` to ``(output, new_state)``. Specs exist before any data does, so
replay buffers, shared-memory transports and checkpoints can be built from
them (see DESIGN.md, "Declare specs up front").

Networks hold no device: buffers and parameters move with ``.to(device)`` and
initial states are created on the device of the parameters. They are
picklable (no lambdas are stored), so they can be sent to worker processes.
"""
import inspect
import pickle
from typing import Any, Callable, Optional, Tuple

import torch
from torch import nn

from alf import nest as alf_nest
from alf.tensor_specs import BoundedTensorSpec, TensorSpec, extract_spec, zeros_from_spec
from alf.utils import precision

Nest = Any


class Network(nn.Module):
    """Base class: ``forward(inputs, state=()) -> (output, new_state)``.

    Subclasses call ``super().__init__(input_spec, state_spec)`` and may set
    ``self._output_spec`` when it is known; otherwise :attr:`output_spec` is
    computed once by a dry run on zeros (batch size 1, no grad).

    Recurrent networks are stepped one time step at a time. They do not see
    step types: resetting the state at episode starts (``StepType.FIRST``) is
    the caller's job (the unroller zeroes those rows of the state).

    Mixed precision (:mod:`alf.utils.precision`): where a bf16 dtype is active (the
    Learner's training, an act step), the outermost network call runs under autocast
    and returns fp32 outputs and states; with none active (the default) a call is
    plain ``nn.Module.__call__``.
    """

    def __init__(self, input_spec: Nest, state_spec: Nest = (), name: Optional[str] = None):
        super().__init__()
        self._input_spec = input_spec
        self._state_spec = state_spec
        self._output_spec = None
        self._name = name or type(self).__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if precision.active_dtype() is None:  # fp32: the plain call (the default)
            return nn.Module.__call__(self, *args, **kwargs)
        return precision.call_network(self, nn.Module.__call__.__get__(self), self._device_type,
                                      *args, **kwargs)

    def _device_type(self) -> str:
        return self._device().type

    @property
    def name(self) -> str:
        return self._name

    @property
    def input_spec(self) -> Nest:
        """Nest of :class:`TensorSpec` of one (unbatched) input."""
        return self._input_spec

    @property
    def state_spec(self) -> Nest:
        """Nest of :class:`TensorSpec` of one (unbatched) state; ``()`` when stateless."""
        return self._state_spec

    @property
    def output_spec(self) -> Nest:
        """Nest of :class:`TensorSpec` of one (unbatched) output.

        For networks that output a distribution this is the spec of one
        sample (the action spec).
        """
        if self._output_spec is None:
            self._output_spec = self._dry_run_output_spec()
        return self._output_spec

    def _device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        for b in self.buffers():
            return b.device
        return torch.device("cpu")

    def _dry_run_output_spec(self) -> Nest:
        device = self._device()
        inputs = dry_run_inputs(self._input_spec, batch_size=1, device=device)
        state = zeros_from_spec(self._state_spec, batch_size=1, device=device)
        with torch.no_grad():
            output, _ = self(inputs, state)
        return extract_spec(output, from_dim=1)

    def get_initial_state(self, batch_size: int) -> Nest:
        """Zeros of :attr:`state_spec` with a leading ``[batch_size]`` dim, on the network's device."""
        if alf_nest.is_empty(self._state_spec):
            return ()
        return zeros_from_spec(self._state_spec, batch_size=batch_size, device=self._device())

    def forward(self, inputs: Nest, state: Nest = ()) -> Tuple[Any, Nest]:  # pragma: no cover
        raise NotImplementedError


def dry_run_inputs(spec_nest: Nest, batch_size: int = 1, device=None) -> Nest:
    """Valid dummy inputs ``[batch_size, ...]``: zeros, or the minimum for bounded
    discrete specs (zero may lie outside the bounds, e.g. a discrete observation in
    ``[2, 4]``, which one-hot encoding would reject)."""
    def _one(spec: TensorSpec) -> torch.Tensor:
        x = spec.zeros((batch_size,), device=device)
        if isinstance(spec, BoundedTensorSpec) and spec.is_discrete():
            x += torch.as_tensor(spec.minimum, dtype=spec.dtype, device=device)
        return x
    return alf_nest.map_structure(_one, spec_nest)


def picklable_fn(fn: Optional[Callable]) -> Optional[Callable]:
    """Return ``fn`` or, if it cannot be pickled, the function it wraps.

    ``gin.external_configurable(torch.tanh, 'torch.tanh')`` hands ``@torch.tanh``
    to constructors as a local wrapper that pickle refuses; the wrapped
    ``torch.tanh`` is equivalent (activation functions take no gin bindings)
    and picklable. Called at construction only.
    """
    if fn is None:
        return None
    try:
        pickle.dumps(fn)
        return fn
    except Exception:  # noqa: BLE001 - any pickling failure: try the wrapped function
        return inspect.unwrap(fn)
