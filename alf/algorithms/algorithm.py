"""``Algorithm``: the base of every trainable component (ALF's hook surface, kept small).

An Algorithm is an ``nn.Module`` that owns its optimizers and declares its
state specs up front. Subclasses implement some of:

- ``predict_step(time_step, state) -> AlgStep``   greedy / deployment behaviour
- ``rollout_step(time_step, state) -> AlgStep``   acting while collecting data
- ``train_step(experience, state, rollout_info) -> AlgStep``   recompute for training
- ``preprocess_experience(experience) -> Experience``   e.g. advantages, n-step targets
- ``calc_loss(info) -> LossInfo``   ``info`` is time-major ``[T, B]``
- ``after_update(experience, info)`` / ``after_train_iter(experience, info)``

``update_with_gradient`` does backward, global-norm clipping and every
optimizer step; optimizer state travels in ``state_dict()`` (via torch's
``extra_state`` hook) so one call checkpoints the whole algorithm.

``rollout_state_dict()`` / ``load_rollout_state_dict()`` are the weights an
actor process needs to act (``state_dict`` less optimizer state and the
modules given to :meth:`Algorithm.exclude_from_rollout`, e.g. target networks).
"""
from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from alf import nest as alf_nest
from alf.data_structures import AlgStep, Experience, LossInfo, TimeStep
from alf.tensor_specs import zeros_from_spec
from alf.utils.fast_optim import clip_grad_norm_
from alf.utils.optimizer_summaries import summarize_optimizer
from alf.utils.optimizers import OptimizerFactory
from alf.utils.run_context import RunContext, default_run_context


class Algorithm(nn.Module):
    """Base class for trainable components.

    Args:
        train_state_spec: nest of TensorSpec for the state threaded through ``train_step``.
        rollout_state_spec: same for ``rollout_step`` (defaults to ``train_state_spec``).
        predict_state_spec: same for ``predict_step`` (defaults to ``rollout_state_spec``).
        optimizer: an :class:`OptimizerFactory` for every parameter not claimed by
            :meth:`add_optimizer` or by a child algorithm that has its own optimizer.
        context: the run context (counters, progress, summaries); a default one if None.
        debug_summaries: write extra (more expensive) summaries.
        name: used in summary tags.
    """

    def __init__(self, train_state_spec: Any = (), rollout_state_spec: Any = None,
                 predict_state_spec: Any = None, optimizer: Optional[OptimizerFactory] = None,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "Algorithm"):
        super().__init__()
        self._name = name
        self._train_state_spec = train_state_spec
        self._rollout_state_spec = train_state_spec if rollout_state_spec is None else rollout_state_spec
        self._predict_state_spec = (self._rollout_state_spec if predict_state_spec is None
                                    else predict_state_spec)
        self._default_optimizer_factory = optimizer
        self._extra_optimizer_factories: List[Tuple[OptimizerFactory, List[nn.Module]]] = []
        # Built lazily (networks exist only after the subclass ctor), but always
        # before a checkpoint is loaded or a gradient step is taken.
        self._optimizers: Optional[List[Tuple[torch.optim.Optimizer, OptimizerFactory, list]]] = None
        self._context = context if context is not None else default_run_context()
        self._debug_summaries = debug_summaries
        # Submodules only training needs (target networks): left out of rollout_state_dict.
        # A plain list, so they are not registered twice; identity is what counts.
        self._rollout_excluded: List[nn.Module] = []
        self._device_cache: Optional[torch.device] = None  # see ``device``
        self._optimizer_entries_cache: Optional[list] = None  # see ``_all_optimizer_entries``

    # ------------------------------------------------------------------ specs
    @property
    def name(self) -> str:
        return self._name

    @property
    def context(self) -> RunContext:
        return self._context

    @property
    def train_state_spec(self) -> Any:
        return self._train_state_spec

    @property
    def rollout_state_spec(self) -> Any:
        return self._rollout_state_spec

    @property
    def predict_state_spec(self) -> Any:
        return self._predict_state_spec

    @property
    def device(self) -> torch.device:
        """Device of the parameters (CPU for a parameter-free algorithm)."""
        device = self._device_cache
        if device is None:  # walking the module tree costs ~30 us: cache until .to()/.cuda()
            p = next(self.parameters(), None)
            device = p.device if p is not None else torch.device("cpu")
            self._device_cache = device
        return device

    def _apply(self, fn, recurse=True):
        self._device_cache = None
        return super()._apply(fn, recurse)

    def get_initial_train_state(self, batch_size: int) -> Any:
        return zeros_from_spec(self._train_state_spec, batch_size, device=self.device)

    def get_initial_rollout_state(self, batch_size: int) -> Any:
        return zeros_from_spec(self._rollout_state_spec, batch_size, device=self.device)

    def get_initial_predict_state(self, batch_size: int) -> Any:
        return zeros_from_spec(self._predict_state_spec, batch_size, device=self.device)

    # ------------------------------------------------------------------ hooks
    def predict_step(self, time_step: TimeStep, state: Any) -> AlgStep:
        """Greedy behaviour for evaluation; defaults to :meth:`rollout_step`."""
        return self.rollout_step(time_step, state)

    def rollout_step(self, time_step: TimeStep, state: Any) -> AlgStep:
        """Act while collecting data; ``AlgStep.info`` is stored for training."""
        raise NotImplementedError(f"{type(self).__name__} must implement rollout_step")

    def train_step(self, experience: Experience, state: Any, rollout_info: Any) -> AlgStep:
        """Recompute what the loss needs from stored experience ``[B]``; defaults to
        re-running :meth:`rollout_step` on ``experience.time_step``."""
        return self.rollout_step(experience.time_step, state)

    def preprocess_experience(self, experience: Experience) -> Experience:
        """Batch-major ``[B, T]`` experience in, same out (e.g. with advantages added)."""
        return experience

    def calc_loss(self, info: Any) -> LossInfo:
        """``info``: time-major ``[T, B]`` nest from train/rollout steps -> :class:`LossInfo`."""
        raise NotImplementedError(f"{type(self).__name__} must implement calc_loss")

    def after_update(self, experience: Any, info: Any) -> None:
        """Called after every gradient step (target networks, ...)."""

    def after_train_iter(self, experience: Any, info: Any) -> None:
        """Called once per training iteration."""

    def summarize_train(self, experience: Any, info: Any, loss_info: LossInfo,
                        step: Optional[int] = None) -> None:
        """Write loss terms (``LossInfo.extra``) as scalars when summaries are due.

        ``step`` given: the caller decided they are due (per-mini-batch summaries,
        ``TrainerConfig.update_counter_every_mini_batch``); they are written against
        ``step`` (the gradient-step counter) instead of the iteration."""
        if step is None and not self._context.should_summarize():
            return
        self._context.add_scalar(f"Loss/{self._name}/loss", _scalar(loss_info.loss), step)
        for path, value in alf_nest.flatten_with_paths(loss_info.extra):
            self._context.add_scalar(f"Loss/{self._name}/{path}", _scalar(value), step)

    # ------------------------------------------------------------- optimizers
    def add_optimizer(self, optimizer: OptimizerFactory, modules: Sequence[nn.Module]) -> None:
        """Give ``modules``' parameters their own optimizer (e.g. SAC's alpha)."""
        if self._optimizers is not None:
            raise RuntimeError("add_optimizer must be called before the first update/checkpoint")
        self._extra_optimizer_factories.append((optimizer, list(modules)))

    def _child_algorithms(self) -> List["Algorithm"]:
        return [m for m in self.modules() if isinstance(m, Algorithm) and m is not self]

    def ensure_optimizers(self) -> None:
        """Build the optimizers (once; the networks exist only after the subclass
        constructor): before the first update or checkpoint load, and by the Learner."""
        if self._optimizers is not None:
            return
        self._optimizers = []
        claimed = set()
        for child in self._child_algorithms():
            child.ensure_optimizers()
            for _, _, params in child._optimizers:
                claimed.update(id(p) for p in params)
        for factory, modules in self._extra_optimizer_factories:
            params = [p for m in modules for p in m.parameters()
                      if p.requires_grad and id(p) not in claimed]
            claimed.update(id(p) for p in params)
            if params:
                self._optimizers.append((factory.create(params), factory, params))
        if self._default_optimizer_factory is not None:
            params = [p for p in self.parameters() if p.requires_grad and id(p) not in claimed]
            if params:
                f = self._default_optimizer_factory
                self._optimizers.append((f.create(params), f, params))

    def optimizers(self) -> List[torch.optim.Optimizer]:
        """Every optimizer of this algorithm and its children, in a fixed order."""
        self.ensure_optimizers()
        opts = []
        for child in self._child_algorithms():
            opts.extend(o for o, _, _ in child._optimizers)
        opts.extend(o for o, _, _ in self._optimizers)
        return opts

    def _all_optimizer_entries(self):
        # Cached: walking the module tree costs ~0.5 ms, and this runs every update.
        entries = self._optimizer_entries_cache
        if entries is None:
            self.ensure_optimizers()
            entries = []
            for child in self._child_algorithms():
                entries.extend(child._optimizers)
            entries.extend(self._optimizers)
            self._optimizer_entries_cache = entries
        return entries

    def update_with_gradient(self, loss_info: LossInfo, valid_masks: Optional[torch.Tensor] = None,
                             weight: float = 1.0, count_update: bool = True,
                             keep_existing_grads: bool = False) -> LossInfo:
        """Average ``loss_info.loss`` (masked by ``valid_masks``), backprop, clip, step; the
        run's :class:`~alf.utils.finite_guard.FiniteGuard` checks the loss, gradients and
        updated parameters, and summary iterations get ``Optimizer/<name>/<k>/*`` tags.

        Args:
            loss_info: ``loss`` is a per-sample tensor (any shape) or a scalar.
            valid_masks: same shape as ``loss``; 0 marks samples to ignore.
            weight: multiplies the loss (e.g. for hybrid offline/online mixing).
            count_update: add 1 to ``context.num_updates`` (the clock of target updates,
                schedules and summaries); False for an auxiliary step that is not an
                update of the policy (e.g. a learned model's, alf/examples/dyna_dqn.py).
            keep_existing_grads: add this loss's gradients to those already on the
                parameters instead of replacing them (an Agent's shared encoder: the RL
                loss's gradient, then the representation loss's, one optimizer step).
        Returns:
            ``loss_info`` with ``loss`` replaced by the scalar that was minimised.
        """
        loss = loss_info.loss
        if isinstance(loss, torch.Tensor) and loss.ndim > 0:
            if valid_masks is not None:
                loss = (loss * valid_masks).sum() / valid_masks.sum().clamp(min=1)
            else:
                loss = loss.mean()
        if isinstance(loss_info.scalar_loss, torch.Tensor) or isinstance(loss_info.scalar_loss, float):
            loss = loss + loss_info.scalar_loss
        loss = loss * weight
        entries = self._all_optimizer_entries()
        if not entries:
            raise RuntimeError(f"{type(self).__name__} has no optimizer: pass optimizer= to its "
                               "constructor (e.g. `optimizer=@alf.optimizers.Adam()` in gin)")
        progress = self._context.progress()
        if not keep_existing_grads:
            for _, _, params in entries:
                for p in params:  # = zero_grad(set_to_none=True), without its profiling hooks
                    p.grad = None
        loss.backward()
        guard = self._context.finite_guard  # None: TrainerConfig.check_finite=False
        if guard is not None:
            guard.after_backward(self._context, loss, entries)
        if self._context.data_parallel is not None:  # torchrun: mean gradient over ranks
            self._context.data_parallel.average_gradients([p for _, _, ps in entries for p in ps])
        if guard is not None:  # a non-finite loss or gradient stops the run before the step
            guard.before_step(self, loss_info, entries)
        summarize = self._context.should_summarize()
        with self._context.weights_lock:  # a learner thread: the actor never sees half a step
            for k, (opt, factory, params) in enumerate(entries):
                lr = factory.lr_schedule(progress)
                for group in opt.param_groups:
                    group["lr"] = lr
                norm = (None if factory.gradient_clipping is None else
                        clip_grad_norm_(params, factory.gradient_clipping))
                if summarize:
                    summarize_optimizer(self._context, f"{self._name}/{k}", lr, params, norm)
                opt.step()
            if guard is not None:  # a diverged parameter (|x| ~ 1e30 after lr=1e30), checked
                guard.after_step(self, loss_info, entries)  # before the actor can take them
        if count_update:
            self._context.num_updates += 1
        self._context.tick_cpu_governor()
        return loss_info._replace(loss=loss.detach())

    # ------------------------------------------------------- rollout weights
    def exclude_from_rollout(self, module: nn.Module) -> None:
        """Leave ``module`` (a submodule that only training reads, e.g. a target network)
        out of :meth:`rollout_state_dict`, wherever it sits in the module tree.
        :meth:`~alf.algorithms.off_policy_algorithm.OffPolicyAlgorithm.register_target`
        calls this for every target."""
        if not isinstance(module, nn.Module):
            raise TypeError(f"exclude_from_rollout expects an nn.Module, got {type(module).__name__}")
        if not any(m is module for m in self._rollout_excluded):
            self._rollout_excluded.append(module)

    def _rollout_tensors(self) -> Iterator[Tuple[str, torch.Tensor]]:
        """``(state_dict key, live tensor)`` of the rollout state, in ``state_dict`` order."""
        excluded = {id(m) for alg in self.modules() if isinstance(alg, Algorithm)
                    for m in alg._rollout_excluded}

        def walk(module: nn.Module, prefix: str):
            if id(module) in excluded:
                return
            # the same traversal as nn.Module.state_dict, minus `_extra_state`
            for name, p in module._parameters.items():
                if p is not None:
                    yield prefix + name, p
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent_buffers_set:
                    yield prefix + name, b
            for name, child in module._modules.items():
                if child is not None:
                    yield from walk(child, prefix + name + ".")

        return walk(self, "")

    def rollout_state_dict(self) -> Dict[str, torch.Tensor]:
        """The parameters and persistent buffers an actor needs for ``rollout_step`` /
        ``predict_step``: ``state_dict()`` without optimizer state (``_extra_state``
        entries), without modules given to :meth:`exclude_from_rollout` (target networks)
        and without anything that is not a tensor. Data transformers that are
        submodules (``RLAlgorithm._data_transformer``) are included, so their running
        statistics travel with the weights.

        Returns:
            ``{state_dict key: tensor}`` in ``state_dict`` order (deterministic, so a
            flattened copy lines up between processes). Tensors are detached, on their
            own device, contiguous and share memory with the live parameters (copy them
            before the next update if a snapshot is needed).
        """
        out: Dict[str, torch.Tensor] = OrderedDict()
        for key, t in self._rollout_tensors():
            t = t.detach()
            out[key] = t if t.is_contiguous() else t.contiguous()
        return out

    @torch.no_grad()
    def load_rollout_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Copy a :meth:`rollout_state_dict` (of an algorithm built from the same config) into
        this one in place (``copy_``: no tensor is replaced, so parameters living in
        shared or pinned memory stay there).

        Raises:
            ValueError: keys missing or unexpected, or a tensor whose shape or dtype
                differs; nothing is copied then.
        """
        own = list(self._rollout_tensors())
        keys = {k for k, _ in own}
        missing = [k for k, _ in own if k not in state]
        unexpected = [k for k in state if k not in keys]
        wrong = [f"{k} ({tuple(state[k].shape)} {state[k].dtype} for {tuple(t.shape)} {t.dtype})"
                 if isinstance(state[k], torch.Tensor) else f"{k} (a {type(state[k]).__name__})"
                 for k, t in own if k in state and not (
                     isinstance(state[k], torch.Tensor) and state[k].shape == t.shape
                     and state[k].dtype == t.dtype)]
        if missing or unexpected or wrong:
            parts = [f"{what} {_some(items)}" for what, items in
                     (("missing keys", missing), ("unexpected keys", unexpected),
                      ("mismatched tensors", wrong)) if items]
            raise ValueError(f"{type(self).__name__}.load_rollout_state_dict: "
                             + "; ".join(parts) + " (was the state made by an algorithm built "
                             "from a different config?)")
        for key, t in own:
            t.copy_(state[key])

    # ---------------------------------------------------------- checkpointing
    def get_extra_state(self) -> Any:
        """Optimizer states (torch puts this under ``<prefix>_extra_state`` in state_dict)."""
        self.ensure_optimizers()
        return {"optimizers": [opt.state_dict() for opt, _, _ in self._optimizers]}

    def set_extra_state(self, state: Any) -> None:
        self.ensure_optimizers()
        saved = state.get("optimizers", [])
        if len(saved) != len(self._optimizers):
            raise ValueError(f"{type(self).__name__}: checkpoint has {len(saved)} optimizers, "
                             f"the algorithm has {len(self._optimizers)}")
        for (opt, _, _), s in zip(self._optimizers, saved):
            opt.load_state_dict(s)


def _some(items: List[str], limit: int = 6) -> str:
    """``items`` listed, at most ``limit`` of them (a count for the rest)."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _scalar(x: Any) -> float:
    if isinstance(x, torch.Tensor):
        return float(x.detach().float().mean())
    return float(x)


# registers the gin configurable ``pretrained`` wherever an algorithm is importable
from alf.algorithms import pretrained as _pretrained  # noqa: E402,F401
