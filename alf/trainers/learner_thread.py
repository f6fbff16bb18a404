"""How the Trainer runs one iteration of its Learner: in the main loop, or split
across two threads (``TrainerConfig.learner_thread=True``, RLlib's learner thread).

**Main loop** (:class:`InlineRunner`, the default): ``Learner.run_iteration``
(``collect_step`` then ``train_collected``);
acting and learning alternate.

**Learner thread** (:class:`ThreadedRunner`): the main thread keeps collecting
(stepping envs for a sync unroller, copying trajectories out of their slots for
an async one) and stores each unroll; a learner thread trains, one
:meth:`Learner.train_collected` per collected unroll, fed by a bounded queue of
``learner_queue_size`` tokens (for APPO/IMPALA's async batches the token is the
batch ``[B, T+1]``). Reusing a batch for several passes (RLlib's
``num_sgd_iter``) is the existing ``num_updates_per_train_iter`` (epochs over the
batch, or sampled mini-batches). So collection of unroll ``k+1`` overlaps with
training on unroll ``k``; torch releases the GIL in its kernels, so both threads
use CPU cores (or the learner a GPU) at once.

Consistency:
- the replay buffer is written (store) and read (sample, gather, clear) under one
  lock, so a batch never mixes half of an unroll; whole-buffer training that clears
  the buffer (PPO) takes each unroll out in the main thread right after storing it, so
  a late learner thread never trains two unrolls as one (and the next on nothing);
- the optimizers write the weights, and the non-finite guard checks them, under
  ``RunContext.weights_lock``, which the acting thread also holds for each policy step
  and weight publication, so no action is computed from half an update, and none from
  (nor any publication of) a step the guard found diverged (:class:`_WeightsLock`);
- at a checkpoint, an evaluation and the end, the queue is drained first (every
  collected unroll trained), so a checkpoint holds the same state as in the main loop,
  a resume behaves as today and an evaluation sees the policy of its iteration;
- losses are summarised against the iteration that collected the unroll
  (``RunContext.pinned_iteration``).

What it costs: the policy acting is up to ``learner_queue_size`` + 1 training passes
behind the learner (the *policy lag*, shown in the progress line and as
``Learner/policy_lag`` like the async one); runs are not bit-identical (two
threads share torch's RNG). On-policy algorithms (A2C, REINFORCE) train through
the rollout's autograd graph and cannot use it (one error says so).

A learner thread that raises stops the run with its error at the next iteration
boundary; one collection that takes longer than ``learner_queue_timeout_s`` while
the learner waits (envs hung) is one :class:`LearnerStalledError` naming the wait,
raised in the main thread even while it is blocked (SIGUSR1, see :class:`_StallSignal`).
After a crash the queued unrolls are dropped, not trained.
"""
import queue
import signal
import sys
import threading
import time
from typing import Any, List, Optional

import torch

from alf.errors import ConfigError, UserError
from alf.trainers.learner import Learner
from alf.unrollers.sync_unroller import SyncUnroller


class LearnerStalledError(UserError):
    """The learner thread waited past ``TrainerConfig.learner_queue_timeout_s`` for a batch."""


class InlineRunner:
    """Acting and learning in the main loop: one ``Learner.run_iteration`` per call."""

    def __init__(self, learner: Any):
        self._learner = learner

    def run_iteration(self) -> int:
        return self._learner.run_iteration()

    def drain(self) -> None:
        """Nothing is in flight between iterations."""

    def progress_text(self) -> str:
        return ""

    def close(self, drain: bool = True) -> None:
        """Nothing to stop."""


_STOP = object()  # the queue's end marker


class ThreadedRunner:
    """The main thread collects; a learner thread trains (module docstring).

    Args:
        learner: the prepared :class:`~alf.trainers.learner.Learner`.
        queue_size: collected unrolls that may wait for the learner.
        timeout_s: the longest the learner thread waits for an unroll while the main
            thread is collecting one.
    """

    def __init__(self, learner: Any, queue_size: int, timeout_s: float):
        check_threadable(learner)
        self._learner = learner
        self._timeout_s = float(timeout_s)
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, int(queue_size)))
        self._context = learner.context
        learner.use_locks(threading.RLock(), _WeightsLock(self._context.finite_guard))
        self._error: Optional[BaseException] = None
        self._failed = False  # sticky: the thread stopped on an error
        self._collecting_since: Optional[float] = None  # main thread inside collection
        self._trained = 0  # unrolls trained so far
        self._lags_lock = threading.Lock()
        self._lags: List[int] = []
        self._last_lags: List[int] = []
        self._stall_signal = _StallSignal()
        self._run_threads = torch.get_num_threads()  # without a governor (tests)
        # a sync unroll acts on the main thread, in this process; an async one in env
        # worker processes, and the main thread only copies finished trajectories out
        self._acts_here = isinstance(getattr(learner, "unroller", None), SyncUnroller)
        self._thread = threading.Thread(target=self._train_forever, name="alf-learner",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ main thread
    def run_iteration(self) -> int:
        """Collect one unroll, store it and queue it for the learner thread; returns the
        env steps collected. Raises the learner thread's error, if it had one."""
        self._raise_if_failed()
        learner, ctx = self._learner, self._context
        if torch.get_num_threads() != 1:  # acting is small: the learner's pool gets the CPUs
            torch.set_num_threads(1)
        trained_before = self._trained  # the policy acting is this many passes old
        self._collecting_since = time.monotonic()
        try:
            steps, batch = learner.collect_step()
        except Exception as e:
            # acting on weights the learner thread just broke (a non-finite step it is
            # reporting): its error, or the diverged parameter, says why; this one would not
            self._raise_if_failed()
            if ctx.finite_guard is None:
                raise
            ctx.finite_guard.raise_explained(learner.algorithm, e)
        finally:
            self._collecting_since = None
        if batch is not None:
            # the learner writes its summaries for this iteration, whenever it trains
            self._put((trained_before, batch, ctx.iteration, ctx.should_summarize()))
        if learner.unroller is not None:
            # publish a whole version, never half of one, nor a diverged one: taking the
            # lock raises the guard's failure if the learner thread's last step diverged
            with ctx.weights_lock:
                learner.unroller.after_train_iter(learner.algorithm)
        self._summarize()
        return steps

    def _put(self, item: Any) -> None:
        while True:
            self._raise_if_failed()
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def drain(self) -> None:
        """Wait until every queued unroll is trained (before a checkpoint, an evaluation
        or the end); raises the learner thread's error if it stopped on one."""
        while self._queue.unfinished_tasks and self._thread.is_alive():
            self._raise_if_failed()
            time.sleep(0.001)
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def progress_text(self) -> str:
        """`` | learner lag avg/max`` (training passes between collecting and training)."""
        lags = self._last_lags
        if not lags:
            return ""
        return f" | learner lag {sum(lags) / len(lags):.1f}/{max(lags)}"

    def _summarize(self) -> None:
        with self._lags_lock:
            lags, self._lags = self._lags, []
        if lags:
            self._last_lags = lags
        ctx = self._context
        if lags and ctx.should_summarize():
            ctx.add_scalar("Learner/policy_lag", sum(lags) / len(lags))
            ctx.add_scalar("Learner/queue_size", self._queue.qsize())

    def close(self, drain: bool = True) -> None:
        """Stop the thread (idempotent). ``drain``: train what is queued first (a normal
        end or a stop that saves); False after a crash, when nothing more is saved."""
        try:
            if self._thread.is_alive():
                try:
                    if drain and not self._failed:
                        self.drain()
                finally:
                    self._stop_thread()
        finally:
            self._learner.use_locks(None, None)
            self._stall_signal.restore()

    def _stop_thread(self) -> None:
        try:  # the queue may be full (a crash): make room for the end marker
            while True:
                self._queue.get_nowait()
                self._queue.task_done()
        except queue.Empty:
            pass
        self._queue.put(_STOP)
        self._thread.join(timeout=max(1.0, self._timeout_s))
        if self._thread.is_alive():  # a daemon: it ends with the process
            print(f"[alf] warning: the learner thread did not stop within "
                  f"{self._timeout_s:.0f} s (TrainerConfig.learner_queue_timeout_s); "
                  "leaving it", file=sys.stderr, flush=True)

    # --------------------------------------------------------- learner thread
    def _train_forever(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=0.5)
            except queue.Empty:
                self._check_stall()
                if self._failed:
                    return
                continue
            if item is _STOP:
                self._queue.task_done()
                return
            trained_before, batch, iteration, summarize = item
            _follow_thread_governor(self._context, self._run_threads, self._acts_here)
            try:
                with self._lags_lock:
                    self._lags.append(self._trained - trained_before)
                with self._context.pinned_iteration(iteration, summarize):
                    self._learner.train_collected(batch)
                    if self._context.finite_guard is not None:  # CUDA: read once per unroll
                        self._context.finite_guard.flush()
                self._trained += 1
            except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
                guard = self._context.finite_guard
                self._fail(e if guard is None else guard.explain(self._learner.algorithm, e))
                return
            finally:
                self._queue.task_done()

    def _check_stall(self) -> None:
        """The main thread has been collecting one unroll for longer than the timeout
        while this thread waited: stop the run with one named error, raised in the main
        thread even while it is blocked (envs hung)."""
        since = self._collecting_since
        if since is None or time.monotonic() - since <= self._timeout_s:
            return
        self._fail(LearnerStalledError(
            f"the learner thread waited more than {self._timeout_s:.0f} s "
            "(TrainerConfig.learner_queue_timeout_s) while the main thread collected one "
            "unroll: the envs produce nothing (hung env or env worker?)"))
        self._stall_signal.raise_in_main_thread(self)

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._failed = True


class _WeightsLock:
    """``RunContext.weights_lock`` beside a learner thread: a re-entrant lock that the
    optimizers hold while they step and the guard checks the step
    (``Algorithm.update_with_gradient``), and that the main thread holds to act, to
    publish weights to env workers and to run callbacks. Once the guard has failed (a
    step diverged: :attr:`FiniteGuard.failed`, set before the check raises and the lock
    is released), taking it raises that failure instead: nothing acts on or publishes
    the diverged weights, even before the learner thread's error reaches the runner.

    Args:
        guard: the run's :class:`~alf.utils.finite_guard.FiniteGuard` (None: off).
    """

    def __init__(self, guard: Any):
        self._lock = threading.RLock()
        self._guard = guard

    def __enter__(self) -> "_WeightsLock":
        self._lock.acquire()
        if self._guard is not None and self._guard.failed:
            self._lock.release()
            self._guard.raise_if_failed()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._lock.release()


class _StallSignal:
    """Delivers a stalled learner's error to a main thread blocked in a system call (an
    env pipe): SIGUSR1 to the main thread interrupts the call, and its handler raises the
    runner's error there. Installed while a ThreadedRunner lives (main thread only)."""

    def __init__(self):
        self._runner: Any = None
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGUSR1, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        runner = self._runner
        if runner is not None:
            runner._raise_if_failed()

    def raise_in_main_thread(self, runner: Any) -> None:
        if self._previous is None:
            return  # not installed (runner built off the main thread): raised at the next put
        self._runner = runner
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGUSR1, self._previous)
            self._previous = None


def _follow_thread_governor(context: Any, default: int, acts_here: bool = True) -> None:
    """The learner thread's torch threads: the run's count (the thread governor's, fixed
    for the run so that results do not depend on the load), less one CPU for the acting
    thread when this process acts (``acts_here``: a sync unroll), at least 1. With
    OpenMP, ``torch.set_num_threads`` sets the calling thread's pool only, and an OpenMP
    pool whose threads wait for a core the acting thread holds loses more than the thread
    it gains (measured on 2 cores: SAC HalfCheetah at 58 env steps/s with 2 learner
    threads, 71 with 1). With an async unroll the env workers act in their own processes:
    keeping a CPU back left one idle (``appo_atari.gin`` on 2 cores: 372 agent steps/s
    with 1 learner thread, 453 with 2). ``default``: the count without a governor."""
    governor = getattr(context, "cpu_governor", None)
    wanted = max(1, (governor.threads if governor is not None else default) - int(acts_here))
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


def check_threadable(learner: Any) -> None:
    """Refuse ``TrainerConfig.learner_thread`` for a Learner it cannot split (one
    :class:`ConfigError`; the Trainer checks at build time, before writing anything)."""
    alg = learner.algorithm
    if alg.on_policy:
        raise ConfigError(
            f"TrainerConfig.learner_thread=True: {type(alg).__name__} is on-policy and "
            "trains through its rollout's autograd graph, which a second thread would "
            "change under it; use it with algorithms that train on stored experience "
            "(PPO, APPO, IMPALA, SAC, DQN, ...)")
    if type(learner).train_iter is not Learner.train_iter:
        raise ConfigError(
            f"TrainerConfig.learner_thread=True: {type(alg).__name__} trains with its own "
            f"{type(learner).__name__}.train_iter, which the learner thread would bypass "
            "(it splits the standard iteration into collecting and training); set "
            "learner_thread=False")


def make_iteration_runner(learner: Any, threaded: bool) -> Any:
    """The :class:`ThreadedRunner` when ``threaded`` (``TrainerConfig.learner_thread``),
    else the :class:`InlineRunner`."""
    if not threaded:
        return InlineRunner(learner)
    settings = learner.settings
    return ThreadedRunner(learner, settings.learner_queue_size, settings.learner_queue_timeout_s)
