"""``ThreadVectorEnv``: gymnasium's ``SyncVectorEnv`` with every sub-env call on its own thread.

What for: *latency-bound* envs, whose ``step`` waits rather than computes (it
sleeps, or blocks on a socket to a remote simulator, a robot or a game engine
ticking at a fixed rate). ``SyncVectorEnv`` makes ``B`` such envs wait one after
another (``B x latency`` per batched step); ``AsyncVectorEnv`` overlaps the waits
but costs a process per env (imports, memory, IPC on every step, slow start).
Here one persistent pool of ``B`` threads steps all envs at once in this
process: waiting (``time.sleep``, socket I/O, most C extensions' blocking
calls) releases the GIL, so the ``B`` waits overlap and a batched step takes
about one latency.

What not for: envs whose step is Python computation (e.g. CartPole without a
latency). Only one thread runs Python at a time (the GIL), so they gain
nothing and pay the thread hand-offs; use ``"vector"``, ``"sync"`` or
``"async"`` for them.

Semantics are exactly ``SyncVectorEnv``'s (NEXT_STEP autoreset), because its
own ``step``/``reset`` code runs: the per-env calls are first run in the pool,
then gymnasium's loop runs over stand-ins (:class:`_FinishedCall`) that hand
it those calls' results, so its autoreset bookkeeping, info merging and
observation batching are reused, not rewritten. ``send(actions)`` starts the
per-env steps and returns at once; ``recv()`` waits for them (the split
:class:`alf.environments.gym_environment.GymVectorEnvironment` uses for
``step_async``/``step_wait``, so the waits overlap with the caller's work).
"""
import concurrent.futures
import logging
from copy import deepcopy
from typing import Any, Callable, List, Optional, Sequence, Tuple

import gymnasium as gym
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import iterate

_StepResult = Tuple[Any, Any, Any, Any, dict]


class _FinishedCall:
    """Stands in for one sub-env inside ``SyncVectorEnv.step``/``reset``.

    The sub-env's call already ran in the pool; this returns its result (or
    raises its exception) when gymnasium's loop makes the same call. A call of
    the other kind means gymnasium's autoreset rule no longer matches
    :meth:`ThreadVectorEnv.send`'s, which must not go unnoticed.
    """

    def __init__(self, method: str, future: concurrent.futures.Future):
        self._method = method
        self._future = future

    def step(self, action: Any) -> _StepResult:
        return self._result("step")

    def reset(self, **kwargs: Any) -> Tuple[Any, dict]:
        return self._result("reset")

    def _result(self, method: str) -> Any:
        if method != self._method:
            raise RuntimeError(f"ThreadVectorEnv: gymnasium's SyncVectorEnv called {method}() on "
                               f"a sub-env where {self._method}() was run (its autoreset logic "
                               f"differs from this gymnasium {gym.__version__}'s).")
        return self._future.result()  # re-raises the sub-env's exception here


class ThreadVectorEnv(gym.vector.SyncVectorEnv):
    """``SyncVectorEnv`` whose sub-env ``step``/``reset`` calls run concurrently on ``B`` threads.

    Sub-env calls may run on any pool thread (one call per env at a time);
    ``render``, ``call``, ``close`` run on the caller's thread. Envs with
    thread-bound state (e.g. an OpenGL context) need ``"sync"`` or ``"async"``.

    Args:
        env_fns: callables that build the sub-envs (in this thread, in order).
        copy: return copies of the observation batch (as ``SyncVectorEnv``).
        close_timeout: seconds ``close()`` waits for sub-env calls still running
            before it closes the envs anyway (their threads are then abandoned).

    Raises:
        ValueError: ``autoreset_mode`` is not ``NEXT_STEP`` (the only mode whose
            calls :meth:`send` can know in advance).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], copy: bool = True,
                 autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
                 close_timeout: float = 10.0):
        if AutoresetMode(autoreset_mode) != AutoresetMode.NEXT_STEP:
            raise ValueError(f"ThreadVectorEnv supports AutoresetMode.NEXT_STEP only, "
                             f"got {autoreset_mode}.")
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._pending: Optional[Tuple[Any, List[_FinishedCall]]] = None
        self._close_timeout = float(close_timeout)
        super().__init__(env_fns, copy=copy, autoreset_mode=AutoresetMode.NEXT_STEP)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.num_envs, thread_name_prefix="alf-env")

    # ------------------------------------------------------------------ step
    def send(self, actions: Any) -> None:
        """Start every sub-env's step (or its NEXT_STEP autoreset) in the pool; returns at once.

        ``actions`` is copied: the envs read it later, the caller may reuse its buffer.
        """
        self._check_idle("send")
        actions = deepcopy(actions)
        calls = []
        for i, (env, action) in enumerate(zip(self.envs, iterate(self.action_space, actions),
                                              strict=True)):
            if self._autoreset_envs[i]:  # the row SyncVectorEnv.step resets instead of stepping
                calls.append(_FinishedCall("reset", self._pool.submit(env.reset)))
            else:
                calls.append(_FinishedCall("step", self._pool.submit(env.step, action)))
        self._pending = (actions, calls)

    def recv(self) -> _StepResult:
        """Wait for the steps :meth:`send` started; the batch ``SyncVectorEnv.step`` returns.

        A sub-env's exception is raised here (the lowest env index first), once
        no sub-env call is running any more.
        """
        if self._pending is None:
            raise RuntimeError("ThreadVectorEnv.recv() called without a pending send().")
        (actions, calls), self._pending = self._pending, None
        return self._replay(calls, super().step, actions)

    def step(self, actions: Any) -> _StepResult:
        """``send(actions)`` then ``recv()``: one batched step, the sub-envs stepped concurrently."""
        self.send(actions)
        return self.recv()

    def reset(self, *, seed: Any = None, options: Optional[dict] = None) -> Tuple[Any, dict]:
        """``SyncVectorEnv.reset`` with the sub-env resets run concurrently.

        With ``options["reset_mask"]`` (partial reset), or seeds gymnasium would
        refuse, the sub-envs are reset by ``SyncVectorEnv.reset`` itself, serially.
        """
        self._check_idle("reset")
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs or (options is not None and "reset_mask" in options):
            return super().reset(seed=seed, options=options)
        calls = [_FinishedCall("reset", self._pool.submit(env.reset, seed=s, options=options))
                 for env, s in zip(self.envs, seeds)]
        return self._replay(calls, super().reset, seed=seed, options=options)

    def _replay(self, calls: List[_FinishedCall], gym_method: Callable, *args: Any,
                **kwargs: Any) -> Any:
        """Run gymnasium's ``gym_method`` over ``calls`` (the finished sub-env calls)."""
        concurrent.futures.wait([c._future for c in calls])  # none still runs if one raised
        envs, self.envs = self.envs, calls
        try:
            return gym_method(*args, **kwargs)
        finally:
            self.envs = envs

    # ---------------------------------------------------------------- others
    def render(self) -> Tuple[Any, ...]:
        self._check_idle("render")
        return super().render()

    def call(self, name: str, *args: Any, **kwargs: Any) -> Tuple[Any, ...]:
        self._check_idle("call")
        return super().call(name, *args, **kwargs)

    def set_attr(self, name: str, values: Any) -> None:
        self._check_idle("set_attr")
        super().set_attr(name, values)

    def _check_idle(self, method: str) -> None:
        """Refuse ``method`` while sub-env steps run (it would race with them) or once closed."""
        if self.closed or self._pool is None:
            raise RuntimeError(f"ThreadVectorEnv.{method}() called after close().")
        if self._pending is not None:
            raise RuntimeError(f"ThreadVectorEnv.{method}() called while a step is pending; "
                               "call recv() first.")

    def close_extras(self, **kwargs: Any) -> None:
        """Wait (``close_timeout``) for running sub-env calls, stop the threads, close the envs."""
        pending, self._pending = self._pending, None
        pool, self._pool = self._pool, None
        finished = True
        if pending is not None:
            futures = [c._future for c in pending[1]]
            finished = not concurrent.futures.wait(futures, timeout=self._close_timeout).not_done
            if not finished:
                logging.warning("ThreadVectorEnv.close: sub-env steps still running after %.1f s; "
                                "closing the envs anyway and abandoning their threads.",
                                self._close_timeout)
        if pool is not None:
            pool.shutdown(wait=finished, cancel_futures=True)  # joins the threads
        super().close_extras(**kwargs)
