"""Mirror the run's TensorBoard scalars to a Weights & Biases run (``TrainerConfig.wandb_project``).

Many researchers follow their runs in W&B. When ``TrainerConfig.wandb_project`` is set, the
run's summary writer (:mod:`alf.trainers.summary_writer`) hands every scalar it writes to
TensorBoard to a :class:`WandbMirror` too: the same tag, the iteration it belongs to as
W&B's step, and for a ``<group>_vs_EnvironmentSteps/<name>`` tag the env steps as the
``EnvironmentSteps`` metric of that row (``define_metric`` makes it those charts' x axis).
The W&B run is named after ``root_dir``, its config is the run's gin bindings, and its id
is kept in ``root_dir/wandb_run_id`` so that resuming the alf run resumes the W&B run.

W&B is optional and secondary: ``wandb`` is imported only when enabled, and a failure at
start or while logging is one warning line, after which the run goes on with TensorBoard
alone. The W&B run is finished on every exit path, with a bounded wait.
"""
import importlib.util
import os
import secrets
import string
import sys
import threading
from typing import Any, Dict, Optional

import gin
from gin import config_parser

from alf import config as alf_config
from alf.errors import ConfigError
from alf.utils.atomic_write import atomic_write_text

RUN_ID_FILE = "wandb_run_id"
INSTALL_HINT = "pip install -e '.[wandb]'"
ENV_STEPS_METRIC = "EnvironmentSteps"
MODES = ("online", "offline", "disabled")
VS_ENV_STEPS = "_vs_EnvironmentSteps"
#: W&B gives up uploading after this long at the end of a run (the data stays on disk
#: for ``wandb sync``); alf waits a little longer for the finish as a whole
FINISH_TIMEOUT_S = 60.0
#: an interactive W&B login prompt waits at most this long (then W&B is disabled)
LOGIN_TIMEOUT_S = 30.0


def wandb_installed() -> bool:
    """Whether ``import wandb`` can work, without importing it (it is heavy)."""
    if "wandb" in sys.modules:
        return sys.modules["wandb"] is not None
    try:
        return importlib.util.find_spec("wandb") is not None
    except (ImportError, ValueError):
        return False


def effective_mode(mode: Optional[str]) -> str:
    """``TrainerConfig.wandb_mode``, else the ``WANDB_MODE`` env var, else W&B's default."""
    return mode or os.environ.get("WANDB_MODE") or "online"


def check_wandb_config(project: Optional[str], mode: Optional[str]) -> None:
    """Refuse a bad ``wandb_*`` setting at construction, before anything is written.

    Raises:
        ConfigError: an unknown ``wandb_mode``, an empty project name, or W&B enabled
            without the ``wandb`` package (one line: how to install it).
    """
    if mode is not None and mode not in MODES:
        raise ConfigError(f"TrainerConfig.wandb_mode must be one of {', '.join(MODES)} "
                          f"(or None: the WANDB_MODE env var), got {mode!r}")
    if project is None:
        return
    if not isinstance(project, str) or not project.strip():
        raise ConfigError("TrainerConfig.wandb_project must be a W&B project name (None: no "
                          f"W&B logging), got {project!r}")
    if effective_mode(mode) != "disabled" and not wandb_installed():
        raise ConfigError("TrainerConfig.wandb_project is set but the wandb package is not "
                          f"installed: {INSTALL_HINT}")


def wandb_enabled(config: Any) -> bool:
    """Whether ``config`` (a TrainerConfig) asks for a W&B run (a project, mode not
    ``disabled``)."""
    project = getattr(config, "wandb_project", None)
    return bool(project) and effective_mode(getattr(config, "wandb_mode", None)) != "disabled"


def _warn(what: str, error: BaseException) -> None:
    message = " ".join(str(error).split()) or type(error).__name__
    print(f"[alf] warning: W&B {what} failed ({type(error).__name__}: {message[:300]}); "
          "the run goes on with TensorBoard only", file=sys.stderr, flush=True)


def start_wandb_mirror(config: Any, root_dir: str, context: Any) -> Optional["WandbMirror"]:
    """Start (or resume) the W&B run of ``root_dir``; None when W&B is off or failed to
    start (one warning line: training goes on with TensorBoard alone).

    Args:
        config: the TrainerConfig (``wandb_*`` fields).
        root_dir: the run directory: the W&B run's name, and where its id is kept
            (:data:`RUN_ID_FILE`) and its local files go (``root_dir/wandb``, unless the
            ``WANDB_DIR`` env var says otherwise).
        context: the run's :class:`~alf.utils.run_context.RunContext` (which iteration a
            scalar belongs to); a resumed run (iteration > 0) resumes the same W&B run.
    """
    if not wandb_enabled(config):
        return None
    # wandb.init replaces sys.exit and sys.excepthook to learn the exit code for its atexit
    # teardown; alf finishes the run itself (WandbMirror.close), so alf's are put back
    saved_hooks = (sys.exit, sys.excepthook)
    try:
        import wandb  # deferred: optional (the [wandb] extra) and heavy
        run = _init_run(wandb, config, root_dir, context)
    except Exception as e:  # noqa: BLE001 - W&B must never stop the training run
        _warn("start", e)
        _teardown_quietly()  # also finishes a run started before the failure
        return None
    except BaseException:  # Ctrl-C while W&B starts: leave no W&B process behind
        _teardown_quietly()
        raise
    finally:
        sys.exit, sys.excepthook = saved_hooks
    hold = config.learner_queue_size + 1 if getattr(config, "learner_thread", False) else 0
    return WandbMirror(run, context, hold)


def _init_run(wandb: Any, config: Any, root_dir: str, context: Any) -> Any:
    """``wandb.init`` for ``root_dir``; writes the run id into ``root_dir/wandb_run_id``."""
    id_path = os.path.join(root_dir, RUN_ID_FILE)
    run_id = None
    if context.iteration > 0 and os.path.isfile(id_path):  # resumed from a checkpoint
        with open(id_path) as f:
            run_id = f.read().strip() or None
    run_id = run_id or "".join(secrets.choice(string.ascii_lowercase + string.digits)
                               for _ in range(8))
    settings = wandb.Settings(quiet=True, console="off", finish_timeout=FINISH_TIMEOUT_S,
                              login_timeout=LOGIN_TIMEOUT_S)
    run = wandb.init(project=config.wandb_project, entity=config.wandb_entity,
                     group=config.wandb_group, tags=list(config.wandb_tags or ()) or None,
                     mode=config.wandb_mode, name=os.path.basename(root_dir.rstrip(os.sep)),
                     id=run_id, resume="allow", reinit="create_new",  # leave others' runs
                     config=gin_bindings(), allow_val_change=True,  # overrides at a resume
                     dir=os.environ.get("WANDB_DIR") or root_dir, settings=settings)
    if run is None or getattr(run, "disabled", False):
        raise RuntimeError("wandb.init gave no run (W&B disabled, e.g. after a login timeout)")
    run.define_metric(ENV_STEPS_METRIC)
    atomic_write_text(id_path, run.id + "\n", "the W&B run id")
    return run


def gin_bindings() -> Dict[str, Any]:
    """The run's gin bindings (:func:`alf.config.config_text`) as W&B's flat config:
    ``{"[scope/]Name.param": value}``, references as gin writes them (``"@Adam()"``)."""
    flat: Dict[str, Any] = {}
    parser = config_parser.ConfigParser(alf_config.config_text(),
                                        gin.config.ParserDelegate(skip_unknown=True))
    for statement in parser:
        if isinstance(statement, config_parser.BindingStatement):
            key = f"{statement.scope + '/' if statement.scope else ''}{statement.selector}"
            flat[f"{key}.{statement.arg_name}" if statement.arg_name else key] = \
                _plain(statement.value)
    return flat


def _plain(value: Any) -> Any:
    """A JSON value for W&B's config (numbers, strings and lists of them kept)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)


def _teardown_quietly(exit_code: int = 1) -> None:
    """Stop W&B's service process, if one was started, unless a W&B run of the caller's
    own (``wandb.run``, e.g. in a notebook) still uses it."""
    wandb = sys.modules.get("wandb")
    if wandb is None or getattr(wandb, "run", None) is not None:
        return
    try:
        wandb.teardown(exit_code=exit_code)
    except Exception:  # noqa: BLE001 - best effort: the failure was already reported
        pass


class WandbMirror:
    """Sends the run's scalars to one W&B run, a row per iteration.

    W&B has one step per row, and steps may only grow, while TensorBoard keeps a step per
    tag: the values of one iteration are gathered and sent as one row (committed) once a
    value of an iteration more than ``hold`` later arrives, and at :meth:`close`. A
    learner thread writes its losses up to ``learner_queue_size + 1`` iterations late, so
    rows are held that long then; a value of an iteration already sent stays in
    TensorBoard only (one notice). Thread-safe.

    Args:
        run: the ``wandb`` run.
        context: the RunContext (:meth:`~alf.utils.run_context.RunContext.summary_iteration`).
        hold: iterations a row waits for late values before it is sent.
    """

    def __init__(self, run: Any, context: Any, hold: int = 0):
        self._run = run
        self._context = context
        self._hold = max(0, int(hold))
        self._lock = threading.Lock()
        self._rows: Dict[int, Dict[str, float]] = {}  # iteration -> row not yet sent
        self._sent_step = -1  # the newest step sent to W&B
        self._groups = set()  # `<group>_vs_EnvironmentSteps` with their x axis defined
        self._failed = False
        self._late_noted = False

    @property
    def run_id(self) -> str:
        return self._run.id

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        """Mirror one TensorBoard ``add_scalar(tag, value, step)``. Never raises."""
        if self._failed or self._run is None:
            return
        iteration = int(self._context.summary_iteration())
        group = tag.rpartition("/")[0]
        with self._lock:
            if self._failed or self._run is None:  # closed meanwhile
                return
            try:
                if iteration <= self._sent_step:
                    self._note_late(iteration)
                    return
                row = self._rows.setdefault(iteration, {})
                row[tag] = float(value)
                if group.endswith(VS_ENV_STEPS):  # its step is the env steps
                    # the first: a learner thread's late losses count the main thread's
                    # newer env steps; W&B's one x per row stays the iteration's own
                    row.setdefault(ENV_STEPS_METRIC, int(step))
                    if group not in self._groups:
                        self._run.define_metric(f"{group}/*", step_metric=ENV_STEPS_METRIC)
                        self._groups.add(group)
                self._send_rows(self._run, before=max(self._rows) - self._hold)
            except Exception as e:  # noqa: BLE001 - W&B must never stop the training run
                self._fail("logging", e)

    def _send_rows(self, run: Any, before: Optional[int] = None) -> None:
        """Send the held rows of iterations before ``before`` (None: all), oldest first,
        committed (W&B shows them now)."""
        for step in sorted(self._rows):
            if before is not None and step >= before:
                break
            run.log(self._rows.pop(step), step=step, commit=True)
            self._sent_step = step

    def _note_late(self, iteration: int) -> None:
        if not self._late_noted:
            self._late_noted = True
            print(f"[alf] note: W&B: summaries of iteration {iteration:,} came after "
                  f"iteration {self._sent_step:,} was sent (W&B steps only go forward); "
                  "such late values are in TensorBoard only", file=sys.stderr, flush=True)

    def _fail(self, what: str, error: BaseException) -> None:
        self._failed = True
        self._rows.clear()
        _warn(what, error)

    def close(self, exit_code: Optional[int] = None) -> None:
        """Send the rows held and finish the W&B run; never raises, and gives up waiting
        after :data:`FINISH_TIMEOUT_S` (+ a margin) with one warning line.

        Args:
            exit_code: the W&B run's exit code; None: 0, or when called while an
                exception propagates (a crash, Ctrl-C) 1 or 255 (Ctrl-C, W&B's code).
        """
        if self._run is None:
            return
        if exit_code is None:
            exit_code = _exit_code(sys.exc_info()[1])
        with self._lock:
            run, self._run = self._run, None
            if not self._failed:
                try:
                    self._send_rows(run)
                except Exception as e:  # noqa: BLE001
                    self._fail("logging", e)
        done = threading.Event()

        def finish() -> None:
            try:
                run.finish(exit_code=exit_code)
            except Exception as e:  # noqa: BLE001 - the run's own outcome matters more
                if not self._failed:
                    _warn("finish", e)
            finally:
                _teardown_quietly(exit_code)
                done.set()

        thread = threading.Thread(target=finish, name="alf-wandb-finish", daemon=True)
        thread.start()
        if not done.wait(FINISH_TIMEOUT_S + 15):
            print(f"[alf] warning: W&B did not finish within {FINISH_TIMEOUT_S + 15:.0f} s; "
                  "its local files can be uploaded later with `wandb sync`",
                  file=sys.stderr, flush=True)


def _exit_code(error: Optional[BaseException]) -> int:
    if error is None:
        return 0
    return 255 if isinstance(error, KeyboardInterrupt) else 1
