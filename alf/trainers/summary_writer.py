"""The run's TensorBoard writer, failing like every other file of the run.

TensorBoard writes events from a background thread. When that write fails (a full
disk), the thread prints a traceback of its own and the next ``add_scalar`` in the
training loop raises the same ``OSError``; opening a writer on a full disk also
leaves a 0-byte events file. :func:`open_summary_writer` returns a writer whose
failures are one :class:`~alf.errors.WriteFailedError` naming the events file and
the space left, raised in the training loop (the thread's own report is silenced:
the error is not lost, it surfaces at the next write), and that never leaves an
empty events file behind. With ``TrainerConfig.wandb_project`` set, every scalar is also
mirrored to a Weights & Biases run (:mod:`alf.trainers.wandb_mirror`), finished when the
writer closes. Event writing is made cheap first (:mod:`alf.trainers.event_file_speed`).
"""
import glob
import os
import socket
import sys
import threading
from typing import Any, Optional

from alf.trainers.event_file_speed import EVENT_QUEUE_SIZE, use_native_crc
from alf.trainers.wandb_mirror import WandbMirror, start_wandb_mirror
from alf.utils.atomic_write import os_error_in, remove_quietly, write_failed

_WHAT = "the TensorBoard events file"
_hook_lock = threading.Lock()
_hook_installed = False


def open_summary_writer(log_dir: str, config: Any = None,
                        context: Any = None) -> "SummaryWriterGuard":
    """A ``torch.utils.tensorboard.SummaryWriter`` for ``log_dir`` (a new events file).

    Args:
        log_dir: the run directory.
        config: the TrainerConfig; with ``wandb_project`` set, scalars are mirrored to W&B
            (a W&B run that fails to start is one warning line: TensorBoard only).
        context: the run's RunContext (the iteration of each scalar, for W&B).

    Raises:
        WriteFailedError: the events file could not be written (it is removed).
    """
    from torch.utils.tensorboard import SummaryWriter  # deferred: tensorboard is heavy
    _silence_writer_thread_errors()
    use_native_crc()
    try:
        writer = SummaryWriter(log_dir, max_queue=EVENT_QUEUE_SIZE)
    except Exception as e:  # noqa: BLE001 - an OSError in its chain is a failed write
        cause = os_error_in(e)
        if cause is None:
            raise
        mine = _own_empty_events_files(log_dir)
        for path in mine:
            remove_quietly(path)
        raise write_failed(mine[0] if mine else log_dir, cause, _WHAT) from None
    guard = SummaryWriterGuard(writer)
    if config is not None and context is not None:
        try:
            guard.mirror = start_wandb_mirror(config, log_dir, context)
        except BaseException:  # Ctrl-C while W&B starts
            guard.close()
            raise
    return guard


class SummaryWriterGuard:
    """Wraps a ``SummaryWriter``: its methods raise :class:`WriteFailedError` instead of
    TensorBoard's ``OSError``; :meth:`close` never raises and removes an empty events
    file. Scalars also go to :attr:`mirror` (a W&B run) when there is one."""

    def __init__(self, writer: Any):
        self._writer = writer
        self._failed = False
        event_writer = getattr(getattr(writer, "file_writer", None), "event_writer", None)
        self.path: Optional[str] = getattr(event_writer, "_file_name", None)
        self.mirror: Optional[WandbMirror] = None

    def __getattr__(self, name: str) -> Any:
        return self._guarded(name)

    def _guarded(self, name: str) -> Any:
        """The writer's attribute ``name``; a method raises WriteFailedError for a failed
        write."""
        attr = getattr(self._writer, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            try:
                return attr(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - converted only when it is a write error
                cause = os_error_in(e)
                if cause is None:
                    raise
                self._failed = True
                raise write_failed(self.path or "", cause, _WHAT) from None
        return call

    def add_scalar(self, tag: str, scalar_value: Any, global_step: Optional[int] = None,
                   *args: Any, **kwargs: Any) -> None:
        """TensorBoard's ``add_scalar``, then the same value to the W&B mirror (which
        never raises)."""
        self._guarded("add_scalar")(tag, scalar_value, global_step, *args, **kwargs)
        if self.mirror is not None:
            self.mirror.add_scalar(tag, float(scalar_value), int(global_step or 0))

    def close(self) -> None:
        """Flush and close; a failure is one warning line (none after a failure already
        reported). An events file left empty is removed. The W&B run, if any, is finished
        (failed when this is called while an exception propagates)."""
        try:
            self._close_events_file()
        finally:
            mirror, self.mirror = self.mirror, None
            if mirror is not None:
                mirror.close()

    def _close_events_file(self) -> None:
        try:
            self._writer.close()
        except Exception as e:  # noqa: BLE001 - closing must not hide the run's outcome
            cause = os_error_in(e)
            if not self._failed and cause is not None:
                print(f"[alf] warning: {write_failed(self.path or '', cause, _WHAT)}; the last "
                      "summaries are lost", file=sys.stderr, flush=True)
        if self.path:
            try:
                if os.path.getsize(self.path) == 0:
                    os.remove(self.path)
            except OSError:
                pass


def _own_empty_events_files(log_dir: str):
    """Empty events files this process created in ``log_dir`` (TensorBoard names them
    ``events.out.tfevents.<time>.<host>.<pid>.<n>``)."""
    pattern = os.path.join(log_dir, f"events.out.tfevents.*.{socket.gethostname()}."
                                    f"{os.getpid()}.*")
    found = []
    for path in glob.glob(pattern):
        try:
            if os.path.getsize(path) == 0:
                found.append(path)
        except OSError:
            pass
    return sorted(found)


def _silence_writer_thread_errors() -> None:
    """TensorBoard's writer thread re-raises a failed write, and ``threading`` prints
    its traceback; the same error is raised again by the next write in the main thread
    (and reported there in one line), so the thread's report is dropped."""
    global _hook_installed
    with _hook_lock:
        if _hook_installed:
            return
        previous = threading.excepthook

        def hook(args):
            thread_module = type(args.thread).__module__ if args.thread is not None else ""
            if thread_module.startswith("tensorboard.") and isinstance(args.exc_value, OSError):
                return
            previous(args)

        threading.excepthook = hook
        _hook_installed = True
