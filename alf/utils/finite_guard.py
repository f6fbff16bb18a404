"""Stop a run whose loss, gradients or parameters become non-finite, before the bad step is
used (``TrainerConfig.check_finite``, on by default; docs/design/finite_guard.md).

Every gradient step of every algorithm goes through ``Algorithm.update_with_gradient``,
which calls the run's :class:`FiniteGuard` (``RunContext.finite_guard``) at three points:

1. after ``backward``: the total loss is finite (data-parallel: a rank whose loss is not
   turns its gradients into NaN, so that after the gradient all-reduce every rank sees the
   same non-finite gradients and all stop at the same update: none waits for another);
2. after the gradient all-reduce, before any optimizer step: every gradient is finite;
3. after the optimizer steps, still under ``RunContext.weights_lock``: every updated
   parameter is finite and at most :data:`PARAM_LIMIT` in magnitude. A finite but huge
   step (Adam with ``lr=1e30`` moves every weight by ~1e30) leaves finite weights whose
   next forward pass overflows, often inside ``rollout_step`` or ``torch.distributions``
   before any update sees a loss. A failure is recorded (:attr:`FiniteGuard.failed`)
   before the lock is released, and a learner thread's lock then refuses the acting
   thread: nothing acts on or publishes the diverged weights.

A buffer or optimizer state is none of these: a checkpoint save that finds one
non-finite raises :meth:`FiniteGuard.checkpoint_error` (the Trainer's checkpoints).

On the CPU each check reads one number (free: nothing runs asynchronously), so the run
stops before the optimizer step that a bad loss or gradient would take. On CUDA reading a
number waits for the GPU, so the flags are OR-ed into one device tensor and read once per
training iteration (:meth:`FiniteGuard.flush`, called by the Learner before it publishes
weights and before a checkpoint can be written); the diagnosis is then made from the
state at that point. The checks only read tensors: no computed number changes.

A failure raises :class:`~alf.errors.NonFiniteError` (exit status 1): one line naming the
loss term (``Loss/<Algorithm>/<term>``, from ``LossInfo.extra``), or the gradient or
parameter (its ``state_dict`` name), the iteration, and the knobs that usually cause it
(learning rate and where it is set, precision, reward scale).
"""
import math
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import gin
import torch

from alf import nest as alf_nest
from alf.config import binding_location
from alf.errors import NonFiniteError, UserError

#: a parameter larger than this in magnitude counts as diverged: its square overflows fp32
#: and bf16 (both top out at 3.4e38), so a layer multiplying two such values gives inf
PARAM_LIMIT = 2.0 ** 64
_FLOAT32_MAX = float(torch.finfo(torch.float32).max)

_Entries = Sequence[Tuple[Any, Any, List[torch.Tensor]]]  # (optimizer, factory, params)


def max_abs(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The largest ``|x|`` over ``tensors`` (a 0-d fp32 tensor on the first one's device;
    NaN if any element is NaN): one foreach kernel and a max, no device sync. Tensors of
    several devices or dtypes, or sparse ones, take a slower per-tensor path."""
    tensors = [t.detach() for t in tensors]
    first = tensors[0]
    if any(t.is_sparse or t.device != first.device or t.dtype != first.dtype
           for t in tensors):
        return torch.stack([(t.coalesce().values() if t.is_sparse else t).abs().max()
                            .float().to(first.device) if t.numel() else
                            torch.zeros((), device=first.device) for t in tensors]).max()
    return torch.stack(torch._foreach_norm(tensors, math.inf)).max().float()


def within(tensors: Sequence[torch.Tensor], limit: float, may_read: bool) -> torch.Tensor:
    """0-d bool tensor: every element of ``tensors`` is finite and ``|x| <= limit``
    (``limit`` may be inf: finiteness only). Exactly ``max_abs(tensors) <= limit``, but where
    ``may_read`` (the CPU) it first takes the L2 norm of each tensor, one foreach kernel that
    bounds its largest ``|x|`` from above: the infinity norm has no vectorised CPU kernel
    (~1,000 us against ~120 us for SAC's 0.5M parameters, measured for issue 39), so the
    exact :func:`max_abs` runs only when the L2 bound does not already settle it (a value
    past the limit, a NaN, or a sum of squares that overflows)."""
    if may_read and all(not t.is_sparse for t in tensors) and \
            len({(t.device, t.dtype) for t in tensors}) == 1:
        bound = min(limit, _FLOAT32_MAX)  # an inf or NaN norm fails ``<= bound``, as it should
        # one float() per tensor: cheaper than stacking the norms and reducing them (~40 us)
        if all(float(n) <= bound for n in torch._foreach_norm([t.detach() for t in tensors])):
            return torch.tensor(True)
    peak = max_abs(tensors)
    return peak <= limit if math.isfinite(limit) else torch.isfinite(peak)


def first_non_finite(named: Iterable[Tuple[str, Any]]) -> Optional[Tuple[str, str]]:
    """``(name, what)`` of the first floating-point tensor in ``named`` with a NaN or an
    infinity (``what``: ``"nan"``, ``"inf"`` or ``"-inf"``), or None."""
    for name, t in named:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() and \
                not bool(torch.isfinite(t).all()):
            return name, _kind(t)
    return None


def flat_tensors(state: Any, prefix: str = "") -> Iterable[Tuple[str, torch.Tensor]]:
    """``(dotted name, tensor)`` of every tensor in a nest of dicts / lists (a checkpoint's
    ``state["algorithm"]``: parameters, buffers, optimizer states)."""
    if isinstance(state, torch.Tensor):
        yield prefix, state
    elif isinstance(state, dict):
        for k, v in state.items():
            yield from flat_tensors(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(state, (list, tuple)):
        for i, v in enumerate(state):
            yield from flat_tensors(v, f"{prefix}.{i}" if prefix else str(i))


class FiniteGuard:
    """The run's non-finite check (module docstring); one per :class:`RunContext`.

    Args:
        defer: read the flags once per iteration (:meth:`flush`) instead of at once; None
            (the default): on CUDA only, where reading a number waits for the GPU.
    """

    def __init__(self, defer: Optional[bool] = None):
        self._defer_always = defer
        # the algorithm the Learner trains (set by Learner.prepare): parameters are named
        # by their state_dict keys in it, and its Agent's reward weights are shown
        self.root: Any = None
        self._pending: Optional[torch.Tensor] = None  # CUDA: flags of updates not yet read
        self._last: Any = None  # CUDA: (algorithm, loss_info, entries) of the newest update
        self._loss_ok: Any = True  # this update's total loss was finite (a bool or tensor)
        # the error this guard raised (set before raising, under RunContext.weights_lock in
        # a learner thread): the acting thread checks it there before it acts or publishes
        self.failure: Optional[NonFiniteError] = None

    @property
    def failed(self) -> bool:
        """Whether a check failed (a step diverged): its weights must not be used."""
        return self.failure is not None

    def raise_if_failed(self) -> None:
        """Raise the failure again (a copy, in the calling thread) if a check failed in
        another thread: called by the acting thread under ``RunContext.weights_lock``
        before it acts on or publishes the weights."""
        failure = self.failure
        if failure is not None:
            again = NonFiniteError(str(failure))
            again.alf_silent = getattr(failure, "alf_silent", False)
            raise again

    # -------------------------------------------------------------- the three checks
    def after_backward(self, context: Any, loss: torch.Tensor, entries: _Entries) -> None:
        """Note whether the total ``loss`` is finite; data-parallel: a non-finite loss turns
        one gradient into NaN so that every rank sees it after the all-reduce."""
        if self._deferred(loss):
            ok = self._loss_ok = torch.isfinite(loss.detach())
        else:  # float() of a 0-d CPU tensor: a fifth of torch.isfinite's cost
            self._loss_ok = math.isfinite(float(loss.detach()))
            ok = torch.tensor(self._loss_ok)
        if context.data_parallel is None or self._loss_ok is True:
            return
        grad = next((p.grad for _, _, ps in entries for p in ps if p.grad is not None), None)
        if grad is not None:  # torch.where: the gradient is unchanged, bit for bit, if ok
            grad.copy_(torch.where(ok, grad, torch.full_like(grad, math.nan)))

    def before_step(self, algorithm: Any, loss_info: Any, entries: _Entries) -> None:
        """Raise (CPU) or note (CUDA) a non-finite loss or gradient, before any step."""
        grads = [p.grad for _, _, ps in entries for p in ps if p.grad is not None]
        grads_ok = (within(grads, math.inf, self._may_read(grads)) if grads
                    else torch.tensor(True))
        local = algorithm.context.data_parallel is None  # else the loss is in the gradients
        if self._deferred(grads_ok):
            self._defer(grads_ok & self._loss_ok if local else grads_ok,
                        (algorithm, loss_info, entries))
        elif not (bool(grads_ok) and (self._loss_ok or not local)):
            self._fail(algorithm, loss_info, entries, "the optimizer step was not taken")

    def after_step(self, algorithm: Any, loss_info: Any, entries: _Entries) -> None:
        """Raise (CPU) or note (CUDA) a parameter that is non-finite or past
        :data:`PARAM_LIMIT` after the optimizer steps."""
        params = [p for _, _, ps in entries for p in ps]
        if not params:
            return
        ok = within(params, PARAM_LIMIT, self._may_read(params))  # False for NaN too
        if self._deferred(ok):
            self._defer(ok, (algorithm, loss_info, entries))
        elif not bool(ok):
            self._fail(algorithm, loss_info, entries, "the step was taken, and training stops "
                       "before anything uses it")

    def flush(self) -> None:
        """CUDA: read the flags of the updates since the last flush (one device sync) and
        raise if one failed. Called once per iteration; a no-op on the CPU."""
        pending, self._pending = self._pending, None
        if pending is not None and not bool(pending):
            algorithm, loss_info, entries = self._last
            self._fail(algorithm, loss_info, entries, "found at the end of the iteration "
                       "(on CUDA the check is read once per iteration)", deferred=True)

    def checkpoint_error(self, algorithm: Any, name: str, kind: str) -> NonFiniteError:
        """The error that stops the run when the checkpoint about to be saved holds the
        non-finite tensor ``name`` (its flat name in the checkpoint, ``kind``: ``"nan"``,
        ``"inf"``, ``"-inf"``): a buffer (a normaliser's statistics, a reward module's
        counts) or an optimizer state, which the three checks do not watch. The run
        stops there, in the guard's one-line form, instead of training on without
        checkpoints; the checkpoint is not written."""
        top = self.root or algorithm
        role = ("the parameter" if name in dict(top.named_parameters()) else
                "the buffer" if name in dict(top.named_buffers()) else "the optimizer state")
        return NonFiniteError(_message(
            algorithm, f"{role} {name} ({kind}), found in the checkpoint of iteration "
            f"{algorithm.context.iteration:,}, which was not written", None, update=False,
            top=self.root, by=True))

    def explain(self, algorithm: Any, error: BaseException) -> BaseException:
        """The error to report for ``error``, raised while training: a
        :class:`NonFiniteError` naming the parameter if one is non-finite or diverged (torch's
        own message, e.g. from ``torch.distributions``, would not say why), else ``error``."""
        if algorithm is None or isinstance(error, (NonFiniteError, UserError,
                                                   KeyboardInterrupt)):
            return error
        bad = _bad_parameters(self.root or algorithm)
        if bad is None:
            return error
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return NonFiniteError(_message(
            algorithm, f"the parameter {bad} ({type(error).__name__}: {first})", None,
            update=False, top=self.root))

    def raise_explained(self, algorithm: Any, error: BaseException) -> None:
        """Raise :meth:`explain`'s error for ``error`` (chained), or ``error`` itself."""
        explained = self.explain(algorithm, error)
        if explained is error:
            raise error
        raise explained from error

    # ------------------------------------------------------------------ internals
    def _may_read(self, tensors: Sequence[torch.Tensor]) -> bool:
        """Whether a check of ``tensors`` may read a number now (not deferred)."""
        return not self._deferred(tensors[0])

    def _deferred(self, flag: torch.Tensor) -> bool:
        return flag.device.type != "cpu" if self._defer_always is None else self._defer_always

    def _defer(self, ok: torch.Tensor, last: Any) -> None:
        self._pending = ok if self._pending is None else self._pending & ok
        self._last = last

    def _fail(self, algorithm: Any, loss_info: Any, entries: _Entries, when: str,
              deferred: bool = False) -> None:
        what = _diagnose(algorithm, loss_info, entries, self.root or algorithm)
        dp = algorithm.context.data_parallel
        silent = False
        if dp is not None:  # every rank is here (same gradients): rank 0 says it for all
            found = dp.group.all_gather_object(what, "the non-finite check")
            culprits = [f"{w} on rank {r}" for r, w in enumerate(found)
                        if w.startswith("the loss")]
            what = culprits[0] if culprits else found[0]
            silent = not dp.group.is_main
        error = NonFiniteError(_message(algorithm, what, when, entries, update=not deferred,
                                        top=self.root))
        error.alf_silent = silent
        self.failure = error  # before the raise releases RunContext.weights_lock
        raise error


def _kind(t: torch.Tensor) -> str:
    if bool(torch.isnan(t).any()):
        return "nan"
    return "inf" if bool((t == math.inf).any()) else "-inf"


def _diagnose(algorithm: Any, loss_info: Any, entries: _Entries, top: Any) -> str:
    """What is non-finite, most telling first: a loss term (tagged as ``algorithm``'s), a
    gradient, a parameter (named by its ``state_dict`` key in ``top``)."""
    name = algorithm.name
    terms = [] if loss_info is None else [
        (f"Loss/{name}/{path}", v) for path, v in alf_nest.flatten_with_paths(loss_info.extra)
        if isinstance(v, torch.Tensor)] + [(f"Loss/{name}/loss", loss_info.loss)]
    bad_term = first_non_finite((k, v.detach()) for k, v in terms)
    if bad_term is not None:
        return f"the loss term {bad_term[0]} ({bad_term[1]})"
    names = _param_names(top)
    grad = first_non_finite((names.get(id(p), "?"), p.grad) for _, _, ps in entries for p in ps
                            if p.grad is not None)
    if grad is not None:
        return f"the gradient of {grad[0]} ({grad[1]})"
    bad = _bad_parameters(top)
    return f"the parameter {bad}" if bad else "a value of the update"


def _param_names(algorithm: Any) -> Dict[int, str]:
    return {id(p): n for n, p in algorithm.named_parameters()}


def _bad_parameters(algorithm: Any) -> Optional[str]:
    """``"<state_dict name> (nan)"`` / ``"<name> (|x| up to 1e+30)"`` of the first parameter
    or buffer that is non-finite or past :data:`PARAM_LIMIT`, else None."""
    with torch.no_grad():
        for name, t in algorithm.state_dict(keep_vars=True).items():
            if not (isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()):
                continue
            if not bool(torch.isfinite(t).all()):
                return f"{name} ({_kind(t)})"
            peak = float(t.detach().abs().max())
            if peak > PARAM_LIMIT:
                return f"{name} (|x| up to {peak:.3g})"
    return None


def _message(algorithm: Any, what: str, when: Optional[str],
             entries: Optional[_Entries] = None, update: bool = True, top: Any = None,
             by: bool = False) -> str:
    """The one line: what, when (the update being taken, if ``update``; ``by``: found
    at this iteration, gone bad at it or before), likely causes."""
    ctx = algorithm.context
    where = f"{'by' if by else 'at'} iteration {ctx.summary_iteration():,}" + (
        f" (update {ctx.num_updates + 1:,})" if update else "")
    when = f"; {when}" if when else ""
    return (f"training went non-finite {where}: {what}{when}. Likely causes: "
            f"{_knobs(algorithm, entries, top or algorithm)}. The newest checkpoint before it "
            "is kept; set TrainerConfig.check_finite=False to train on regardless")


def _knobs(algorithm: Any, entries: Optional[_Entries], top: Any) -> str:
    """The usual suspects, with this run's values: learning rate, precision, reward scale
    (``top``'s reward weights: an Agent's, whichever part stepped)."""
    ctx = algorithm.context
    if entries is None:
        entries = algorithm._all_optimizer_entries()
    progress = ctx.progress()
    lrs = sorted({float(f.lr_schedule(progress)) for _, f, _ in entries})
    lr = "the learning rate (" + ", ".join(f"{v:g}" for v in lrs) + " now"
    bound = _lr_bindings()
    lr += (f"; {bound})" if bound else ")")
    dtype = getattr(ctx, "train_dtype", None)
    precision = ("bf16 training (TrainerConfig.train_precision; fp32 overflows later)"
                 if dtype is not None else "the precision (fp32 here)")
    weights = [f"{[round(w, 6) for w in t.tolist()]}" for n, t in top.named_buffers()
               if n.endswith("_reward_weights") and t.is_floating_point()]
    reward = "the reward scale (" + (f"Agent.reward_weights = {weights[0]}; " if weights
                                     else "") + "reward normalisation, the env's rewards)"
    return f"{lr}, {precision}, {reward}"


def _lr_bindings(limit: int = 3) -> str:
    """``key = value at <where>`` of the gin bindings that set a learning rate (``*.lr``, and
    the parameters of a scoped schedule an ``lr`` refers to), at most ``limit``."""
    bound: List[Tuple[str, Any]] = []
    scopes = []
    config = list(gin.config._CONFIG.items())  # pylint: disable=protected-access
    for (scope, selector), params in config:
        if "lr" in params:
            bound.append(((f"{scope}/" if scope else "") + selector + ".lr", params["lr"]))
            ref = getattr(params["lr"], "scoped_selector", "")
            if "/" in ref:
                scopes.append(ref.rpartition("/")[0])
    for (scope, selector), params in config:
        if scope in scopes:
            bound += [(f"{scope}/{selector.split('.')[-1]}.{p}", v) for p, v in params.items()]
    where = {key: _location(key) for key, _ in bound}
    scoped = {w for key, w in where.items() if "/" in key}
    # an unscoped key's line search also matches scoped lines (``rnd/Adam.lr``): a location
    # a scoped binding has is not the unscoped one's
    shown = [f"{key} = {value!r}" + (f" at {where[key]}" if where[key] and (
        "/" in key or where[key] not in scoped) else "") for key, value in bound]
    return "; ".join(shown[:limit])


def _location(key: str) -> Optional[str]:
    """Where the binding ``key`` was set (its file and line, or --conf_param), if known."""
    scope, _, name = key.rpartition("/")
    short = ".".join(name.split(".")[-2:])  # gin files name the configurable bare
    return binding_location(key) or binding_location(f"{scope}/{short}" if scope else short)
