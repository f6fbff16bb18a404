"""User-facing errors.

Anything a *user* can cause (unknown env id, typo in a gin file, wrong action
space for an algorithm, corrupt checkpoint, dataset that does not fit the env)
raises :class:`UserError` with one message that names the offending thing and
says how to fix it. ``alf.bin.*`` commands print that message (no traceback
unless ``--debug``) and exit with status 2.
"""


class UserError(Exception):
    """An error caused by user input; its message is shown verbatim."""


class ConfigError(UserError):
    """A gin file, binding or override is wrong (unknown name, bad value, missing file)."""


class EnvironmentNotFoundError(UserError):
    """The requested environment id is not registered."""


class IncompatibleSpecError(UserError):
    """An algorithm, dataset or network does not fit the environment's specs."""


class CheckpointError(UserError):
    """No usable checkpoint could be loaded."""


class RunFailedError(Exception):
    """Training cannot go on for a reason that is not bad input (e.g. env workers crashed
    past their restart limit). ``alf.bin.*`` print the message in one line (no traceback
    unless ``--debug``) and exit with status 1; the newest checkpoint is kept."""


class WriteFailedError(RunFailedError):
    """A file of the run could not be written (disk full, quota exceeded, read-only or
    missing directory). The message names the file and, for a full disk, the space left;
    the previous version of the file (and the previous checkpoint) is left intact."""


class NonFiniteError(RunFailedError):
    """Training produced a non-finite loss, gradient or parameter (or a parameter so large
    that the next forward pass overflows): :mod:`alf.utils.finite_guard` stops the run
    before the bad step is used. One line naming the value, the iteration and the likely
    knobs; exit status 1 (the config may be valid: the run diverged); the newest
    checkpoint, written before, is finite and kept."""


class NonFiniteCheckpointError(CheckpointError):
    """A checkpoint holds a non-finite tensor (written by a run that diverged before the
    finite-value guard existed, or with it turned off): ``play`` and a resume refuse it
    (exit status 2) instead of acting with NaN weights."""


class EnvCheckError(UserError):
    """A user's environment does not keep gymnasium's contract or its own spaces (found by
    :mod:`alf.environments.env_checker` with one reset and one step before anything is
    written): one line naming the env id, the call, the space and the fix; exit status 2."""


class NonFiniteEnvValueError(RunFailedError):
    """An environment returned a NaN or infinite observation or reward during a run (the
    per-step check of :class:`~alf.environments.gym_environment.GymVectorEnvironment`):
    one line naming the env id, the env's index and its step; exit status 1, before the
    value reaches the agent (the newest checkpoint is kept)."""


class EnvRaisedError(RunFailedError):
    """An environment's own ``reset()`` or ``step()`` raised during a run (after the
    start-up check passed): one line naming the env id, the env's index, the call and the
    env's step, ending with the env's own error (``--debug`` shows its traceback); exit
    status 1 (the newest checkpoint is kept). Async env workers restart on it (a flaky
    simulator), up to ``TrainerConfig.max_env_worker_restarts``."""
