"""How the Trainer runs one iteration of its Learner: in the main loop, or split
across two threads (``TrainerConfig.learner_thread=True``, RLlib's learner thread).

**Main loop** (:class:`InlineRunner`, the default): ``Learner.run_iteration``;
acting and learning alternate.

**Learner thread** (:class:`ThreadedRunner`): the main thread keeps collecting
(stepping envs for a sync unroller, copying trajectories out of their slots for
an async one) and stores each unroll; a learner thread trains, one
:meth:`Learner.train_from_replay` per collected unroll, fed by a bounded queue of
``learner_queue_size`` tokens (for APPO/IMPALA's async batches the token is the
batch ``[B, T+1]``). Reusing a batch for several passes (RLlib's
``num_sgd_iter``) is the existing ``num_updates_per_train_iter`` (epochs over the
batch, or sampled mini-batches). So collection of unroll ``k+1`` overlaps with
training on unroll ``k``; torch releases the GIL in its kernels, so both threads
use CPU cores (or the learner a GPU) at once.

Consistency:
- the replay buffer is written (store) and read (sample, gather, clear) under one
  lock, so a batch never mixes half of an unroll;
- the optimizers write the weights under ``RunContext.weights_lock``, which the
  acting thread also holds for each policy step and weight publication, so no
  action is computed from half an update;
- at a checkpoint, and at the end, the queue is drained first (every collected
  unroll trained), so a checkpoint holds the same state as in the main loop and a
  resume behaves as today.

What it costs: the policy acting is up to ``learner_queue_size`` training passes
behind the learner (the *policy lag*, shown in the progress line and as
``Learner/policy_lag`` like the async one); runs are not bit-identical (two
threads share torch's RNG). On-policy algorithms (A2C, REINFORCE) train through
the rollout's autograd graph and cannot use it (one error says so).

A learner thread that raises stops the run with its error at the next iteration
boundary; a queue that stays empty past ``learner_queue_timeout_s`` (nothing
collected: envs hung) is one :class:`LearnerStalledError` naming the wait.
"""
import contextlib
import queue
import sys
import threading
import time
from typing import Any, List, Optional

from alf.errors import ConfigError, UserError
from alf.trainers.learner import Learner


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

    def close(self) -> None:
        """Nothing to stop."""


_STOP = object()  # the queue's end marker


class ThreadedRunner:
    """The main thread collects; a learner thread trains (module docstring).

    Args:
        learner: the prepared :class:`~alf.trainers.learner.Learner`.
        queue_size: collected unrolls that may wait for the learner.
        timeout_s: the learner thread's longest wait for a batch.
    """

    def __init__(self, learner: Any, queue_size: int, timeout_s: float):
        check_threadable(learner)
        self._learner = learner
        self._timeout_s = float(timeout_s)
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, int(queue_size)))
        self._buffer_lock = threading.RLock()
        self._context = learner.context
        self._context.weights_lock = threading.RLock()
        learner.buffer_lock = self._buffer_lock
        learner.threaded = True
        self._error: Optional[BaseException] = None
        self._collected = 0  # unrolls queued so far
        self._trained = 0  # unrolls trained so far
        self._lags: List[int] = []
        self._last_lags: List[int] = []
        self._thread = threading.Thread(target=self._train_forever, name="alf-learner",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ main thread
    def run_iteration(self) -> int:
        """Collect one unroll, store it and queue it for the learner thread; returns the
        env steps collected. Raises the learner thread's error, if it had one."""
        self._raise_if_failed()
        learner = self._learner
        steps, batch = learner.collect_for_thread()
        if batch is not None:
            self._put((self._collected, batch))
            self._collected += 1
        if learner.unroller is not None:
            with self._context.weights_lock:  # publish a whole version, never half of one
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
        """Wait until every queued unroll is trained (before a checkpoint or the end)."""
        while self._queue.unfinished_tasks:
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
        lags, self._lags = self._lags, []
        if lags:
            self._last_lags = lags
        ctx = self._context
        if lags and ctx.should_summarize():
            ctx.add_scalar("Learner/policy_lag", sum(lags) / len(lags))
            ctx.add_scalar("Learner/queue_size", self._queue.qsize())

    def close(self) -> None:
        """Train what is queued, then stop the thread (idempotent)."""
        if self._thread.is_alive():
            try:
                if self._error is None:
                    self.drain()
            finally:
                try:  # the thread may be failing right now, with the queue full
                    self._queue.put(_STOP, timeout=1.0)
                except queue.Full:
                    pass
                self._thread.join(timeout=max(1.0, self._timeout_s))
                if self._thread.is_alive():  # a daemon: it ends with the process
                    print(f"[alf] warning: the learner thread did not stop within "
                          f"{self._timeout_s:.0f} s (TrainerConfig.learner_queue_timeout_s); "
                          "leaving it", file=sys.stderr, flush=True)
        self._context.weights_lock = contextlib.nullcontext()
        self._learner.buffer_lock = contextlib.nullcontext()
        self._learner.threaded = False

    # --------------------------------------------------------- learner thread
    def _train_forever(self) -> None:
        waited_since = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=0.5)
            except queue.Empty:
                if time.monotonic() - waited_since > self._timeout_s:
                    self._error = LearnerStalledError(
                        f"the learner thread waited {self._timeout_s:.0f} s "
                        "(TrainerConfig.learner_queue_timeout_s) for a collected batch and got "
                        "none: the envs or env workers produce nothing")
                    return
                continue
            if item is _STOP:
                self._queue.task_done()
                return
            collected_at, batch = item
            try:
                self._lags.append(self._trained - collected_at)
                self._learner.train_batch_in_thread(batch)
                self._trained += 1
            except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
                self._error = e
                self._queue.task_done()
                return
            self._queue.task_done()
            waited_since = time.monotonic()


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
