"""Mixed precision: bf16 autocast inside networks, for training and (separately) acting.

``TrainerConfig.train_precision`` and ``TrainerConfig.act_precision`` take ``"fp32"`` (the
default: nothing changes, not a bit), ``"bf16"`` or ``"auto"`` (bf16 where the hardware
has bf16 units: AMX-BF16 or AVX-512 BF16 on a CPU, a CUDA GPU that supports it; fp32
elsewhere). ``build_algorithm`` resolves them (:func:`resolve`) into the run context's
``train_dtype`` / ``act_dtype``, in every process that builds an algorithm (learner, env
workers, policy workers). The Learner trains, and every act step
(:class:`~alf.utils.act_step.ActStep`) acts, inside :func:`autocast_networks` of the
matching dtype, which makes it the *active* dtype of the current thread.

Where bf16 is used: only inside a :class:`~alf.networks.network.Network` call. The
outermost network call on a thread with an active dtype runs under
``torch.autocast(<its device type>, dtype)`` (matmuls and convolutions in bf16) and
returns its bf16 outputs and states as fp32 (:func:`to_fp32`); output layers (logits,
means, values, Q-values) run in fp32 (:func:`head_linear`). So everything outside the
networks stays fp32 by construction: master weights, gradients and optimizer state;
rewards, returns, GAE and V-trace; log-probabilities and importance ratios; normalisers;
losses (docs/design/mixed_precision.md). Nested network calls stay in bf16 (no cast back
and forth between an encoder and its head).
"""
import contextlib
import contextvars
from typing import Any, Callable, Iterator, Optional

import torch

from alf import nest as alf_nest
from alf.errors import ConfigError

#: the values ``TrainerConfig.train_precision`` / ``act_precision`` accept
PRECISIONS = ("fp32", "bf16", "auto")

#: the dtype networks compute in on this thread (None: fp32, no autocast)
_active: contextvars.ContextVar = contextvars.ContextVar("alf_autocast_dtype", default=None)
#: True inside an autocast network call (nested calls neither re-enter nor cast back)
_inside: contextvars.ContextVar = contextvars.ContextVar("alf_inside_network", default=False)


def cpu_bf16_units() -> Optional[str]:
    """The CPU's bf16 units, from ``/proc/cpuinfo`` flags: ``"AMX-BF16"``,
    ``"AVX-512 BF16"`` or None (neither: bf16 runs emulated, slower than fp32)."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags.update(line.split(":", 1)[1].split())
                    break
    except OSError:
        return None
    if "amx_bf16" in flags:
        return "AMX-BF16"
    if "avx512_bf16" in flags:
        return "AVX-512 BF16"
    return None


def bf16_units(device: str) -> Optional[str]:
    """What runs bf16 on ``device`` ("cpu", "cuda", "cuda:1"), or None where nothing does."""
    dev = torch.device(device)
    if dev.type == "cuda":
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.cuda.get_device_name(dev)
        return None
    return cpu_bf16_units()


def resolve(name: str, value: str, device: str) -> Optional[torch.dtype]:
    """The autocast dtype a ``TrainerConfig`` precision field asks for on ``device``
    (None: fp32). ``name`` is the field, for the error message."""
    if value not in PRECISIONS:
        raise ConfigError(f"TrainerConfig.{name}={value!r}: expected one of {PRECISIONS} "
                          "('auto': bf16 where the hardware has bf16 units)")
    if value == "fp32":
        return None
    if value == "bf16":
        return torch.bfloat16
    return torch.bfloat16 if bf16_units(device) else None


def describe(train_precision: str, act_precision: str, device: str,
             act_device: Optional[str] = None) -> str:
    """The start-of-run log text, e.g. ``training bf16 (autocast; AVX-512 BF16), acting
    fp32``: what each field resolved to, training on ``device`` and acting on
    ``act_device`` (default ``device``; async env workers act on the CPU), and why."""
    def one(value: str, dev: str) -> str:
        dtype = resolve("", value, dev)
        if dtype is None:
            return "fp32" + (f" (auto: no bf16 units on {dev})" if value == "auto" else "")
        why = bf16_units(dev) or "no bf16 units: emulated, slower than fp32"
        return f"bf16 (autocast{', auto' if value == 'auto' else ''}; {why})"
    act_dev = act_device or device
    where = f" on {act_dev}" if act_dev != device else ""
    return (f"training {one(train_precision, device)}, "
            f"acting{where} {one(act_precision, act_dev)}")


@contextlib.contextmanager
def _activate(dtype: Optional[torch.dtype]) -> Iterator[None]:
    token = _active.set(dtype)
    try:
        yield
    finally:
        _active.reset(token)


def autocast_networks(dtype: Optional[torch.dtype]) -> contextlib.AbstractContextManager:
    """Networks called inside (on this thread) compute in ``dtype`` (None: fp32)."""
    return _activate(dtype)


@contextlib.contextmanager
def keep_weight_casts(dtype: Optional[torch.dtype]) -> Iterator[None]:
    """Acting with fixed weights: inside, the bf16 copies that autocast makes of the
    weights are made once and reused by every network call, until
    :func:`drop_weight_casts` or the end of the region. ``dtype`` None (fp32): nothing.

    Why: torch's autocast caches the cast of a leaf weight only until the *outermost*
    autocast region exits, and each network call is its own outermost region
    (:func:`call_network`), so every act step cast every weight again: for the Nature
    CNN at 8 envs per forward that made bf16 acting no faster than fp32 (0.344 vs 0.332
    CPU-ms per agent step). This region is an outer autocast region with autocast *off*:
    code outside the networks still runs in fp32, and only the weight casts outlive a
    call. The values are those of casting at every call, bit for bit.

    Only for code that does not change the weights in place inside the region (an
    actor between weight refreshes); whoever loads new weights calls
    :func:`drop_weight_casts`. Never around training: an optimizer step would leave
    the cached copies stale. Torch's cache is one per process (only the nesting is per
    thread): another thread's outermost autocast region ending, or its
    ``drop_weight_casts``, empties it too, which costs a re-cast, never a wrong value.
    Only weights that require grad are cached: frozen ones are cast at every call."""
    if dtype is None:
        yield
        return
    with torch.autocast("cpu", enabled=False):  # nesting + 1: the cache lives on
        yield


def drop_weight_casts() -> None:
    """Forget the weight casts kept by :func:`keep_weight_casts` (call after loading new
    weights in place; harmless outside a region)."""
    torch.clear_autocast_cache()


def act_dtype_of(algorithm: Any) -> Optional[torch.dtype]:
    """The acting dtype of ``algorithm``'s run context (None: fp32, also for a duck-typed
    policy without a context)."""
    return getattr(getattr(algorithm, "context", None), "act_dtype", None)


def unroll_dtype_of(algorithm: Any) -> Optional[torch.dtype]:
    """The dtype a sync unroll acts in: the training dtype for an on-policy algorithm
    (A2C, REINFORCE: its rollout's forward pass is the one it trains through, so
    ``train_precision`` must apply to it), else the acting dtype."""
    context = getattr(algorithm, "context", None)
    name = "train_dtype" if getattr(algorithm, "on_policy", False) else "act_dtype"
    return getattr(context, name, None)


def active_dtype() -> Optional[torch.dtype]:
    """The dtype networks compute in on this thread now (None: fp32)."""
    return _active.get()


_HALF = (torch.bfloat16, torch.float16)


def to_fp32(nest: Any) -> Any:
    """Cast every bf16 / fp16 tensor of ``nest`` to fp32; other leaves (fp32, fp64, ints,
    bools, distributions, ...) are returned as they are."""
    def cast(x):
        return x.float() if isinstance(x, torch.Tensor) and x.dtype in _HALF else x
    return alf_nest.map_structure(cast, nest)


def head_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                linear: Callable = torch.nn.functional.linear) -> torch.Tensor:
    """An output layer (logits, means, values, Q-values): ``linear(x, weight, bias)``, in
    fp32 when a bf16 autocast is on. Under autocast the last matmul would round its output
    to bf16 (8 bits of mantissa: a value near 100 in steps of 0.5, logits off by up to
    ~1%) before any cast back could help, so the head runs with autocast off on an fp32
    input. Without autocast it is the plain call (bit for bit)."""
    if torch.is_autocast_enabled(x.device.type):
        with torch.autocast(x.device.type, enabled=False):
            return linear(x.float(), weight, bias)
    return linear(x, weight, bias)


def call_network(module: torch.nn.Module, call: Callable, device_type: Callable[[], str],
                 *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` (a network's forward), under autocast if a dtype is
    active and this is the outermost network call, with fp32 outputs."""
    dtype = _active.get()
    if dtype is None or _inside.get():
        return call(*args, **kwargs)
    token = _inside.set(True)
    try:
        with torch.autocast(device_type(), dtype=dtype):
            out = call(*args, **kwargs)
    finally:
        _inside.reset(token)
    return to_fp32(out)
