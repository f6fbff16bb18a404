"""One rank of a data-parallel run launched by ``torchrun``: who it is and the
collectives alf uses.

``torchrun --nproc_per_node=N [--nnodes=M --node_rank=K --rdzv_endpoint=H:P]``
starts ``N x M`` processes with ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` and a
rendezvous in their environment. :meth:`RankGroup.from_environment` joins the
process group (gloo for CPU tensors; NCCL for CUDA ones when CUDA is available)
and exchanges every rank's host and pid, so a failure can name the rank that
is gone. Every collective goes through :meth:`RankGroup._guard`: a peer that
died turns into one :class:`~alf.distributed.faults.PeerLostError` naming it,
never a hang or a traceback from inside torch.

Collectives are issued in the same order by every rank (the training loop is
deterministic in what it reduces); the timeout (``ALF_DIST_TIMEOUT_S``, default
1800 s) bounds the wait for a rank that hangs without dying.
"""
import contextlib
import datetime
import os
import pickle
import re
import sys
from typing import Any, Callable, Iterator, List, Optional, TypeVar

import torch
import torch.distributed as dist

from alf.distributed import local_reduce
from alf.distributed.faults import (PeerInfo, PeerLostError, PeerTable, StopHandler,
                                    start_parent_watch, this_peer, timed_out)
from alf.errors import UserError

T = TypeVar("T")

TIMEOUT_ENV = "ALF_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 1800.0


def launched_by_torchrun() -> bool:
    """Whether this process is one rank of a multi-process launch (``WORLD_SIZE > 1``)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ
    except ValueError:
        return False


class RankGroup:
    """This process's place in the run and the collectives over all ranks.

    Attributes:
        rank: global rank, ``0 .. world_size - 1``; rank 0 alone writes files.
        world_size: number of ranks.
        local_rank: rank on this host (picks the GPU, ``cuda:<local_rank>``).
        peers: a :class:`PeerTable` of every rank's host and pid.
    """

    def __init__(self, rank: int, world_size: int, local_rank: int, peers: PeerTable,
                 owns_process_group: bool):
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.peers = peers
        self._owns_process_group = owns_process_group
        self._stop_handler = StopHandler(peers)
        self._local = None  # a LocalReducer when every rank is on this host
        self._closed = False

    # ------------------------------------------------------------ lifecycle
    @classmethod
    def from_environment(cls) -> Optional["RankGroup"]:
        """Join the process group torchrun describes (None when not launched by it, or
        with a single rank). Installs the SIGTERM handler and the launcher watch."""
        if not launched_by_torchrun():
            return None
        timeout_s = _timeout_s()
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        owns = not dist.is_initialized()
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available() and local_rank < torch.cuda.device_count():
            torch.cuda.set_device(local_rank)  # NCCL and this rank's "cuda" tensors
        if owns:
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
        try:
            return cls.from_process_group(local_rank, owns)
        except BaseException:
            if owns:  # a live gloo group aborts the process at exit
                dist.destroy_process_group()
            raise

    @classmethod
    def from_process_group(cls, local_rank: int = 0,
                           owns_process_group: bool = False) -> "RankGroup":
        """Wrap an initialised default process group (tests start one without torchrun)."""
        rank, world = dist.get_rank(), dist.get_world_size()
        gathered: List[Any] = [None] * world
        dist.all_gather_object(gathered, this_peer(rank, local_rank))
        group = cls(rank, world, local_rank, PeerTable([PeerInfo(*p) for p in gathered], rank),
                    owns_process_group)
        if local_reduce.usable([p.machine for p in group.peers.peers]):
            group._local = local_reduce.LocalReducer(
                rank, world, lambda obj: group.broadcast_object(obj, "sharing a buffer name"),
                lambda ok: all(group.all_gather_object(bool(ok), "mapping the shared buffer")),
                group._check_peers, _timeout_s(),
                warn=lambda text: print(text, file=sys.stderr, flush=True) if rank == 0 else None)
        group._stop_handler.install()
        start_parent_watch(group._stop_handler)
        return group

    def close(self, completed: bool = False) -> None:
        """Leave the process group (idempotent); the SIGTERM handler is removed (after a
        failure it stays, ignoring SIGTERM, until the process exits).

        Args:
            completed: every rank finished normally: wait for all of them first (a rank
                tearing down its connections while another still uses them aborts it).
                After a failure nothing is waited for: the process exits and the kernel
                closes its connections.
        """
        if self._closed:
            return
        self._closed = True
        if completed:
            self._stop_handler.uninstall()
        else:  # leaving after a failure: a SIGTERM from torchrun must not cut the exit
            # short, not even during interpreter shutdown (which resets Python handlers
            # but keeps SIG_IGN); torchrun's SIGKILL after its shutdown timeout remains
            self._stop_handler.ignore_from_now_on()
        if not (self._owns_process_group and dist.is_initialized()):
            return
        try:
            if completed:
                with self._guard("the final barrier"):
                    dist.barrier()
        except BaseException:
            self._stop_handler.ignore_from_now_on()
            raise
        finally:
            try:  # also after a failure: a live gloo group aborts the process at exit
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - peers may be gone
                pass

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def leaving(self) -> None:
        """This rank is stopping (after an agreed stop, a failure or the end): from now on
        a SIGTERM from torchrun (sent when a faster rank already exited) is ignored, so it
        cannot cut a checkpoint write or the cleanup short; a rank that is really gone
        still fails the next collective, and torchrun's SIGKILL stays the backstop."""
        self._stop_handler.disarm()

    def on_stop_request(self, callback: Optional[Callable[[int, Optional[str]], None]]
                        ) -> None:
        """While training: a SIGTERM from the launcher with every local rank alive calls
        ``callback(signum, cause)`` (the trainer counts it as a Ctrl-C) instead of raising;
        ``cause`` says why when no person sent it (the launcher exited), else None."""
        self._stop_handler.on_stop_request = callback

    def device_for(self, device: str) -> str:
        """The device of this rank: ``cuda`` without an index becomes ``cuda:<local_rank>``."""
        d = torch.device(device)
        if d.type == "cuda" and d.index is None:
            return f"cuda:{self.local_rank}"
        return str(d)

    # ---------------------------------------------------------- collectives
    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """A failed collective becomes one :class:`PeerLostError` naming the lost rank."""
        try:
            yield
        except PeerLostError:
            raise
        except (RuntimeError, dist.DistError, TimeoutError) as e:
            self._stop_handler.disarm()  # the cleanup that follows must not be cut short
            why = self.peers.describe_failure(e, timeout_s=_timeout_s())
            if timed_out(e):
                what += f"; {TIMEOUT_ENV} sets the wait"
            raise self.peers.lost(f"rank {self.rank}: {why} (during {what}); this rank stops "
                                  "without saving (a checkpoint needs every rank): rerun to "
                                  "resume from the newest checkpoint") from None

    def all_reduce_(self, tensor: torch.Tensor, what: str,
                    op: dist.ReduceOp = dist.ReduceOp.SUM) -> torch.Tensor:
        """In place: ``tensor`` becomes the reduction over ranks (identical on all).
        Sums of contiguous CPU tensors between ranks of one host go through shared
        memory (:mod:`alf.distributed.local_reduce`), everything else through gloo/NCCL."""
        with self._guard(what):
            if not (self._local is not None and op == dist.ReduceOp.SUM
                    and tensor.device.type == "cpu" and tensor.is_contiguous()
                    and self._local.all_reduce_sum_(tensor)):
                dist.all_reduce(tensor, op=op)
        return tensor

    def _check_peers(self, waited_s: float) -> None:  # noqa: ARG002 - the reducer's hook
        """Raise (for :meth:`_guard` to name) when a rank on this host has exited."""
        if self.peers.dead_local_peers():
            raise RuntimeError("a rank on this host has exited")

    def broadcast_(self, tensor: torch.Tensor, what: str) -> torch.Tensor:
        """In place: ``tensor`` becomes rank 0's."""
        with self._guard(what):
            dist.broadcast(tensor, src=0)
        return tensor

    def broadcast_object(self, obj: Any, what: str) -> Any:
        """Rank 0's ``obj`` (picklable) on every rank."""
        box = [obj if self.is_main else None]
        with self._guard(what):
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather_object(self, obj: Any, what: str) -> List[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        out: List[Any] = [None] * self.world_size
        with self._guard(what):
            dist.all_gather_object(out, obj)
        return out

    def gather_object(self, obj: Any, what: str) -> Optional[List[Any]]:
        """Every rank's ``obj`` in rank order on rank 0; None on the others."""
        out: Optional[List[Any]] = [None] * self.world_size if self.is_main else None
        with self._guard(what):
            dist.gather_object(obj, out, dst=0)
        return out

    def scatter_object(self, objs: Optional[List[Any]], what: str) -> Any:
        """Rank 0 sends ``objs[r]`` to rank ``r`` (``objs`` is ignored elsewhere)."""
        box: List[Any] = [None]
        with self._guard(what):
            dist.scatter_object_list(box, objs if self.is_main else None, src=0)
        return box[0]

    def rank0_decides(self, decide: Callable[[], T], what: str) -> T:
        """Run ``decide`` on rank 0 only and give its result (or its exception) to every
        rank: reading ``root_dir`` (config, checkpoints) is rank 0's job, so that a
        directory only rank 0 can see, or that rank 0 is about to write, never splits
        the ranks' decisions. The other ranks re-raise rank 0's exception as theirs."""
        outcome = None
        if self.is_main:
            try:
                outcome = ("ok", decide())
            except BaseException as e:  # noqa: BLE001 - handed to every rank, then raised
                self.broadcast_object(("error", _picklable(e)), what)
                raise
        outcome = self.broadcast_object(outcome, what)
        if outcome[0] == "error":
            exc = outcome[1]
            exc.alf_silent = True  # rank 0 prints it
            raise exc
        return outcome[1]


    def check_together(self, error: Optional[BaseException], what: str) -> None:
        """Every rank says whether ``what`` (e.g. building the experiment) worked on it;
        raises on every rank if it failed anywhere. A rank re-raises its own ``error``
        (silenced, ``alf_silent``, when a lower rank reports the same message, so one
        mistake is printed once); a rank that succeeded raises a silent
        :class:`PeerLostError` naming the rank that failed. Ranks that failed must call
        this too before leaving, or the others would wait for them."""
        mine = None if error is None else (type(error).__name__, _first_message(error))
        outcomes = self.all_gather_object(mine, what)
        failed = [(r, o) for r, o in enumerate(outcomes) if o is not None]
        if not failed:
            return
        if error is not None:
            first = min(r for r, o in failed if o[1] == mine[1])
            error.alf_silent = first != self.rank
            raise error
        rank, (_, message) = failed[0]
        lost = PeerLostError(f"rank {rank} failed {what}: {message}")
        lost.alf_silent = True
        raise lost


def _timeout_s() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    except ValueError:
        raise UserError(f"{TIMEOUT_ENV}={os.environ[TIMEOUT_ENV]!r} is not a number of "
                        "seconds") from None


def _first_message(error: BaseException) -> str:
    """``error``'s message as ranks compare it: without the "In call to configurable 'f'
    (<function f at 0x...>)" lines gin appends, whose addresses differ between ranks (an
    unknown env name was printed once per rank)."""
    lines = [l for l in str(error).splitlines() if not _GIN_CALL_LINE.match(l)]
    return "\n".join(lines).strip() or type(error).__name__


_GIN_CALL_LINE = re.compile(r"^\s*In call to configurable '")


def _picklable(e: BaseException) -> BaseException:
    """``e`` if it survives pickling, else an exception of its first built-in (or alf)
    base class with its message: gin wraps errors raised in a configurable in classes
    that do not pickle, and the CLI maps a ValueError/TypeError/UserError to one line."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001
        for cls in type(e).__mro__:
            if cls.__module__ in ("builtins", "alf.errors") and cls is not BaseException:
                try:
                    return cls(str(e))
                except Exception:  # noqa: BLE001 - a base class with another signature
                    continue
        return RuntimeError(str(e))
