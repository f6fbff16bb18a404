"""Ensemble layers: ``K`` independent linear layers / MLPs evaluated as one batched op.

Twin critics (SAC, TD3), discrete-SAC Q networks and any other ensemble of
equally shaped MLPs are computed here with one ``baddbmm`` per layer instead
of ``K`` separate ``nn.Linear`` calls (a layer with a single output unit, such
as a Q head, is a multiply-and-sum instead: faster than a gemm with one column).
On CPU the gemms dominate, so this runs about as fast as ``K`` sequentials;
on GPU it launches ``K`` times fewer kernels.

Layout: member ``k`` of :class:`EnsembleLinear` has ``weight[k]`` of shape
``[in, out]`` and ``bias[k]`` of shape ``[1, out]`` and computes
``x @ weight[k] + bias[k]``, i.e. exactly ``torch.nn.Linear`` with
``linear.weight = weight[k].T`` and ``linear.bias = bias[k, 0]``.

Inputs are either

* *shared* ``[B, in]``: the same input for every member (e.g. ``concat(obs,
  action)`` for the first critic layer), or
* *per member* ``[K, B, in]``: member ``k`` reads ``x[k]``.

Outputs are always per member, ``[K, B, out]``.

Initialisation is ``torch.nn.Linear``'s default for every member
(kaiming-uniform with ``a=sqrt(5)``, i.e. weights and bias uniform in
``±1/sqrt(in)``), drawn member by member in the same order and from the same
random stream as ``K`` separately built ``nn.Sequential`` MLPs (as SB3's
``ContinuousCritic`` builds its critics). With the same seed an
:class:`EnsembleMLP` therefore starts from exactly the weights of those
sequentials.
"""
import math
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import skip_init

from alf.networks.network import picklable_fn
from alf.utils import precision


#: Activations with an in-place twin that computes the same numbers.
_IN_PLACE = {torch.relu: torch.relu_, F.relu: F.relu_}


def _in_place(fn: Optional[Callable]) -> Optional[Callable]:
    """The in-place twin of ``fn`` if it has one, else ``fn``."""
    try:
        return _IN_PLACE.get(fn, fn)
    except TypeError:  # an unhashable callable
        return fn


class EnsembleLinear(nn.Module):
    """``K`` independent linear layers: ``[B, in]`` or ``[K, B, in]`` -> ``[K, B, out]``."""

    def __init__(self, in_features: int, out_features: int, ensemble_size: int, bias: bool = True,
                 device=None, dtype=None):
        """
        Args:
            in_features: size of each input sample.
            out_features: size of each output sample.
            ensemble_size: number of members ``K``.
            bias: whether each member has an additive bias.
            device: device of the parameters (``torch.nn.utils.skip_init`` uses ``"meta"``).
            dtype: dtype of the parameters.
        """
        super().__init__()
        if ensemble_size < 1:
            raise ValueError(f"EnsembleLinear: ensemble_size must be >= 1, got {ensemble_size}")
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.ensemble_size = int(ensemble_size)
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(ensemble_size, in_features, out_features, **factory))
        if bias:
            self.bias = nn.Parameter(torch.empty(ensemble_size, 1, out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise every member like a fresh ``nn.Linear`` (member 0 first)."""
        for k in range(self.ensemble_size):
            self.reset_member_(k)

    @torch.no_grad()
    def reset_member_(self, k: int) -> None:
        """Re-initialise member ``k`` exactly as ``nn.Linear.reset_parameters`` would,
        consuming the same random numbers in the same order."""
        w = torch.empty(self.out_features, self.in_features, device=self.weight.device,
                        dtype=self.weight.dtype)
        nn.init.kaiming_uniform_(w, a=math.sqrt(5))  # nn.Linear's [out, in] layout
        self.weight[k].copy_(w.t())
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            nn.init.uniform_(self.bias[k], -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: shared ``[B, in]`` or per-member ``[K, B, in]`` -> ``[K, B, out]``."""
        return ensemble_linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"ensemble_size={self.ensemble_size}, bias={self.bias is not None}")


def ensemble_linear(x: torch.Tensor, weight: torch.Tensor,
                    bias: Optional[torch.Tensor]) -> torch.Tensor:
    """Functional :class:`EnsembleLinear`.

    Args:
        x: shared input ``[B, in]`` or per-member input ``[K, B, in]``.
        weight: ``[K, in, out]``.
        bias: ``[K, 1, out]`` or ``None``.
    Returns:
        ``[K, B, out]``.
    """
    k = weight.shape[0]
    if not (x.dim() == 2 or (x.dim() == 3 and x.shape[0] == k)):
        raise ValueError(f"ensemble_linear: expected input [B, {weight.shape[1]}] or "
                         f"[{k}, B, {weight.shape[1]}], got {tuple(x.shape)}")
    if weight.shape[2] == 1:
        # One output unit (a critic's Q head): multiply and sum. CPU gemm kernels take a
        # slow path for [B, in] x [in, 1] (at B=in=256, forward + backward ~4x slower).
        y = torch.sum(x * weight.transpose(1, 2), dim=-1, keepdim=True)  # [K, B, 1]
        return y if bias is None else y + bias
    if x.dim() == 2:
        # Shared input: one batched gemm over a stride-0 view of x (no copy); measured
        # faster than one [B, in] x [in, K*out] matmul followed by the [B, K, out] ->
        # [K, B, out] transpose that layout needs (bench/critic_ensemble_bench.py).
        x = x.expand(k, x.shape[0], x.shape[1])
    if bias is None:
        return torch.bmm(x, weight)
    return torch.baddbmm(bias, x, weight)


class EnsembleLayerNorm(nn.Module):
    """``K`` independent ``nn.LayerNorm(features)``: ``[K, B, features]`` -> same shape.

    Member ``k`` normalises ``x[k]`` over its last dim and applies its own
    elementwise affine ``weight[k]`` (ones at init) and ``bias[k]`` (zeros),
    exactly ``torch.nn.LayerNorm`` with ``ln.weight = weight[k, 0]`` and
    ``ln.bias = bias[k, 0]``. Initialisation draws no random numbers, so adding
    it leaves the Linear layers' init unchanged.
    """

    def __init__(self, features: int, ensemble_size: int, eps: float = 1e-5):
        """
        Args:
            features: size of the normalised (last) dim.
            ensemble_size: number of members ``K``.
            eps: added to the variance (``nn.LayerNorm``'s default).
        """
        super().__init__()
        self.features = int(features)
        self.ensemble_size = int(ensemble_size)
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(ensemble_size, 1, features))
        self.bias = nn.Parameter(torch.zeros(ensemble_size, 1, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[K, B, features]`` -> ``[K, B, features]``."""
        return torch.addcmul(self.bias, F.layer_norm(x, (self.features,), eps=self.eps),
                             self.weight)

    def forward_member(self, x: torch.Tensor, k: int) -> torch.Tensor:
        """Member ``k`` alone: ``[B, features]`` -> ``[B, features]``."""
        return F.layer_norm(x, (self.features,), self.weight[k, 0], self.bias[k, 0], self.eps)

    def extra_repr(self) -> str:
        return f"features={self.features}, ensemble_size={self.ensemble_size}, eps={self.eps}"


class EnsembleMLP(nn.Module):
    """``K`` independent MLPs of the same shape: ``[B, in]`` or ``[K, B, in]`` -> ``[K, B, out]``.

    Hidden layers are followed by ``activation``; the optional output layer
    (``output_size``) by ``last_activation`` (none by default). Member ``k``
    equals ``nn.Sequential(Linear, act, ..., Linear)`` with that member's weights;
    with ``use_layer_norm`` each hidden ``Linear`` is followed by that member's
    ``LayerNorm`` before the activation (``Linear, LayerNorm, act, ...``: the
    critics of RLPD, Ball et al. 2023).
    """

    def __init__(self,
                 input_size: int,
                 hidden_sizes: Sequence[int],
                 ensemble_size: int,
                 output_size: Optional[int] = None,
                 activation: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
                 last_activation: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
                 use_layer_norm: bool = False):
        """
        Args:
            input_size: size of the input vector.
            hidden_sizes: sizes of the hidden layers (may be empty).
            ensemble_size: number of members ``K``.
            output_size: size of an output layer without activation (unless
                ``last_activation``); ``None``: the last hidden layer is the output.
            activation: activation after every hidden layer.
            last_activation: activation after the output layer.
            use_layer_norm: a per-member LayerNorm after every hidden layer (before
                its activation); not after the output layer.
        """
        super().__init__()
        self.ensemble_size = int(ensemble_size)
        self._activation = picklable_fn(activation)
        self._last_activation = picklable_fn(last_activation)
        # Hidden activations are applied in place when an in-place twin exists: the
        # pre-activation is a fresh tensor no backward reads (the same numbers, one
        # [K, B, out] allocation less per layer: ~4% of a 256x256 critic's fwd+bwd).
        self._hidden_activation = _in_place(self._activation)
        self.layers = nn.ModuleList()
        # skip_init: the layers are initialised once, member-major, by reset_parameters below,
        # so the random stream is consumed exactly as by K nn.Sequential built in a row.
        size = int(input_size)
        for n in hidden_sizes or ():
            self.layers.append(skip_init(EnsembleLinear, size, n, ensemble_size))
            size = n
        self._num_hidden = len(self.layers)
        if use_layer_norm:  # registered only when used: state_dict keys unchanged otherwise
            self.norms = nn.ModuleList(EnsembleLayerNorm(layer.out_features, ensemble_size)
                                       for layer in self.layers)
        else:
            self.norms = None
        if output_size is not None:
            self.layers.append(skip_init(EnsembleLinear, size, output_size, ensemble_size))
            size = output_size
        self.input_size = int(input_size)
        self.output_size = size
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Member-major init: member 0's layers first, then member 1's, ... (the
        random-number order of building ``K`` ``nn.Sequential`` MLPs one after another)."""
        for k in range(self.ensemble_size):
            for layer in self.layers:
                layer.reset_member_(k)
        if self.norms is not None:
            with torch.no_grad():
                for norm in self.norms:
                    norm.weight.fill_(1.0)
                    norm.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: shared ``[B, in]`` or per-member ``[K, B, in]`` -> ``[K, B, output_size]``.

        With no layers at all, a shared input is expanded to ``[K, B, in]`` (a view).
        """
        if not self.layers:
            return x.expand(self.ensemble_size, *x.shape) if x.dim() == 2 else x
        act = self._hidden_activation
        norms = self.norms
        # Calling the functional form skips nn.Module.__call__ (a few us per layer).
        for i, layer in enumerate(self.layers):
            if i < self._num_hidden:
                x = ensemble_linear(x, layer.weight, layer.bias)
                if norms is not None:
                    x = norms[i](x)
                x = act(x)
            else:  # the output layer: fp32 under a bf16 autocast (alf.utils.precision)
                x = precision.head_linear(x, layer.weight, layer.bias, ensemble_linear)
                if self._last_activation is not None:
                    x = self._last_activation(x)
        return x

    def forward_member(self, x: torch.Tensor, k: int) -> torch.Tensor:
        """Member ``k`` alone: ``[B, in]`` -> ``[B, output_size]`` (``addmm`` on its weight
        slices; costs ``1/K`` of :meth:`forward`, gradients reach only member ``k``)."""
        act = self._hidden_activation
        norms = self.norms
        for i, layer in enumerate(self.layers):
            w = layer.weight[k]
            x = torch.mm(x, w) if layer.bias is None else torch.addmm(layer.bias[k], x, w)
            if i < self._num_hidden:
                if norms is not None:
                    x = norms[i].forward_member(x, k)
                x = act(x)
            elif self._last_activation is not None:
                x = self._last_activation(x)
        return x

    def forward_members(self, x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """The members ``indices`` (``[M]`` int64) alone: shared ``[B, in]`` or
        ``[M, B, in]`` -> ``[M, B, output_size]``, equal to ``forward(x)[indices]`` at
        ``M/K`` of the cost (the members' weights are gathered first; e.g. the target of
        RLPD/REDQ: the min over a random subset of the target critics)."""
        act = self._hidden_activation
        norms = self.norms
        for i, layer in enumerate(self.layers):
            bias = None if layer.bias is None else layer.bias.index_select(0, indices)
            x = ensemble_linear(x, layer.weight.index_select(0, indices), bias)
            if i < self._num_hidden:
                if norms is not None:
                    norm = norms[i]
                    x = torch.addcmul(norm.bias.index_select(0, indices),
                                      F.layer_norm(x, (norm.features,), eps=norm.eps),
                                      norm.weight.index_select(0, indices))
                x = act(x)
            elif self._last_activation is not None:
                x = self._last_activation(x)
        return x
