"""Pretrained parts: build a network or algorithm and load a named part of another run.

In gin, wrap the ctor of the part (a network ctor such as
``PPOAlgorithm.actor_network_ctor``, a sub-algorithm's ctor, or
``TrainerConfig.algorithm_ctor`` itself)::

    PPOAlgorithm.actor_network_ctor = @bc_actor/pretrained
    bc_actor/pretrained.ctor = @bc_actor_network
    bc_actor/pretrained.checkpoint = "_actor@runs/bc_pendulum"
    bc_actor/pretrained.frozen = False

``pretrained(**kwargs)`` calls ``ctor(**kwargs)`` (the caller's arguments, e.g.
``input_spec=``, ``action_spec=``), then copies every tensor of the source
checkpoint whose ``state_dict`` key starts with ``prefix.`` into the new module (the
prefix stripped). The load happens at construction, in every process that builds
the part (learner, async actors, policy workers, play), so the path must be readable
there; a resumed run loads its own checkpoint afterwards, which wins. Each load logs one
line (the part, the source file, its checkpoint iteration and content hash) and is
recorded in the run's ``run_info/`` (:mod:`alf.algorithms.pretrained_sources`), so that
``--rerun`` loads the same bytes or refuses.
See docs/design/checkpoints.md ("Pretrained parts") for why it is a wrapper.
"""
import difflib
import glob
import logging
import os
import pickle
import re
import zipfile
from typing import Any, Callable, Dict, List, Optional, Tuple

import gin
import torch

import alf
from alf.algorithms import pretrained_sources
from alf.errors import ConfigError

# root_dir/train/ckpt-<iteration>.pt (alf/trainers/checkpointer.py writes them; the
# layer rule keeps algorithms from importing trainers, so the layout is repeated here)
_CKPT = re.compile(r"ckpt-(\d+)\.pt$")
_EXTRA = "_extra_state"  # optimizer state (Algorithm.get_extra_state): never loaded


@alf.configurable
def pretrained(ctor: Optional[Callable] = None, checkpoint: str = "", frozen: bool = False,
               **kwargs: Any) -> torch.nn.Module:
    """Build ``ctor(**kwargs)`` and load a part of another run's checkpoint into it.

    Args:
        ctor: what builds the part (a network ctor, an Algorithm class), called with the
            caller's keyword arguments.
        checkpoint: ``"prefix@path"``: ``path`` is a run directory (its newest readable
            checkpoint under ``train/``) or a ``.pt`` file (an alf checkpoint or a plain
            ``state_dict``); ``prefix`` is the part's key in the source algorithm's
            ``state_dict`` (e.g. ``_actor`` for BcAlgorithm's actor, ``_actor_network``
            for PPO's); an empty prefix (``"@path"``) loads the whole algorithm.
        frozen: True: the part's parameters get ``requires_grad=False``, so no optimizer
            (its own or its parent's) updates them.
        kwargs: passed to ``ctor``.
    Returns:
        the module ``ctor`` built, holding the source tensors.
    Raises:
        ConfigError: no such path, no readable checkpoint, a prefix that matches no key,
            or keys / shapes that differ between the source and the part.
    """
    where = _binding_name()
    if ctor is None:
        raise ConfigError(f"{where}.ctor is not set: bind what builds the part, e.g. "
                          f"`{where}.ctor = @ActorDistributionNetwork`")
    prefix, path = parse_checkpoint(checkpoint, where)
    source_file, state, iteration = _read(path, where)  # before building: fail fast
    module = ctor(**kwargs)
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"{where}.ctor built a {type(module).__name__}, not a torch module: "
                          "only networks and algorithms can be pretrained")
    part = f"{getattr(ctor, '__name__', type(module).__name__)} ({where})"
    tensors = load_part(module, state, prefix, source_file, part)
    record = pretrained_sources.record_load(module, where, checkpoint, prefix, source_file,
                                            iteration)
    logging.info(pretrained_sources.describe(record, part, tensors))
    if frozen:
        for p in module.parameters():
            p.requires_grad_(False)
    return module


def parse_checkpoint(checkpoint: str, where: str = "pretrained") -> Tuple[str, str]:
    """``"prefix@path"`` -> ``(prefix, path)``; no ``@``: the whole algorithm of ``path``."""
    if not isinstance(checkpoint, str) or not checkpoint.strip():
        raise ConfigError(f"{where}.checkpoint is not set: give it as 'prefix@path', e.g. "
                          f"`{where}.checkpoint = \"_actor@runs/bc_pendulum\"`")
    prefix, _, path = checkpoint.rpartition("@")
    return prefix.strip().rstrip("."), path.strip()


def checkpoint_files(run_dir: str) -> List[str]:
    """The checkpoint files of a run directory, newest first."""
    found = []
    for p in glob.glob(os.path.join(run_dir, "train", "ckpt-*.pt")):
        m = _CKPT.search(os.path.basename(p))
        if m:
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found, reverse=True)]


def read_checkpoint(path: str, where: str = "pretrained") -> Tuple[str, Dict[str, Any]]:
    """The algorithm ``state_dict`` stored at ``path`` and the file it came from.

    ``path``: a run directory (its newest readable ``train/ckpt-*.pt``; an unreadable
    newer one is skipped with a warning) or a ``.pt`` file."""
    source_file, state, _ = _read(path, where)
    return source_file, state


def _read(path: str, where: str) -> Tuple[str, Dict[str, Any], Optional[int]]:
    """:func:`read_checkpoint`, and the checkpoint's training iteration (None for a plain
    ``state_dict``)."""
    if not os.path.exists(path):
        cwd = "" if os.path.isabs(path) else f" (relative to {os.getcwd()})"
        raise ConfigError(f"{where}.checkpoint: '{path}' does not exist{cwd}: "
                          "give a run directory or a .pt file")
    if os.path.isdir(path):
        files = checkpoint_files(path)
        if not files:
            raise ConfigError(f"{where}.checkpoint: '{path}' holds no checkpoint "
                              f"({os.path.join(path, 'train', 'ckpt-*.pt')} matches nothing): "
                              "train that run first, or give a .pt file")
    else:
        files = [path]
    reasons = []
    for f in files:
        try:
            state = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any read failure is reported in one line
            reasons.append(f"{f}: {_reason(f, e)}")
            if f is not files[-1]:
                logging.warning("Pretrained checkpoint %s is unreadable (%s); trying the "
                                "previous one", f, _reason(f, e))
            continue
        if isinstance(state, dict) and isinstance(state.get("algorithm"), dict):
            return f, state["algorithm"], pretrained_sources.iteration_of(f, state)
        if isinstance(state, dict) and state and all(
                isinstance(v, torch.Tensor) or k.endswith(_EXTRA) for k, v in state.items()):
            return f, state, None  # a plain state_dict
        reasons.append(f"{f}: neither an alf checkpoint nor a state_dict")
    raise ConfigError(f"{where}.checkpoint: cannot read {reasons[0]}"
                      + (f" (and {len(reasons) - 1} older checkpoint(s))" if len(reasons) > 1
                         else ""))


@torch.no_grad()
def load_part(module: torch.nn.Module, state: Dict[str, Any], prefix: str, source: str,
              part: str) -> int:
    """Copy ``state``'s tensors under ``prefix`` into ``module`` (in place, ``copy_``);
    returns how many.

    Every tensor of ``module.state_dict()`` (optimizer state aside) must have a source
    tensor of the same shape under ``prefix`` and vice versa; otherwise nothing is
    copied and one :class:`ConfigError` names both sides (``<source>:<key>`` and
    ``part``)."""
    head = prefix + "." if prefix else ""
    src = {k[len(head):]: v for k, v in state.items()
           if k.startswith(head) and not k.endswith(_EXTRA) and isinstance(v, torch.Tensor)}
    if not prefix:  # attached to the algorithm after construction (set_data_transformer)
        src = {k: v for k, v in src.items() if not k.startswith("_data_transformer.")}
    if not src:
        tops = list(dict.fromkeys(k.split(".")[0] for k in state if not k.endswith(_EXTRA)))
        close = difflib.get_close_matches(prefix, tops, n=1, cutoff=0.4)
        raise ConfigError(f"prefix '{prefix}' matches no key of {source} (for {part}); its "
                          f"top-level parts: {_some(tops)}"
                          + (f". Did you mean: {close[0]}?" if close else ""))
    own = {k: v for k, v in module.state_dict(keep_vars=True).items()
           if not k.endswith(_EXTRA) and isinstance(v, torch.Tensor)}
    for key, t in own.items():
        if key in src and src[key].shape != t.shape:
            raise ConfigError(
                f"shape mismatch: {source}:{head}{key} is {list(src[key].shape)}, "
                f"{part} has {key} {list(t.shape)}: build the part with the source's sizes")
    missing = [k for k in own if k not in src]
    unexpected = [k for k in src if k not in own]
    if missing or unexpected:
        sides = ([f"{part} has {_some(missing)} that {source}:{head}* lacks"] if missing else []) \
            + ([f"{source} has {_some([head + k for k in unexpected])} that {part} lacks"]
               if unexpected else [])
        raise ConfigError("pretrained part does not fit: " + "; ".join(sides)
                          + " (another network shape or the wrong prefix?)")
    for key, t in own.items():
        t.copy_(src[key].to(dtype=t.dtype))
    return len(own)


def _binding_name() -> str:
    scope = gin.current_scope_str()
    return f"{scope}/pretrained" if scope else "pretrained"


def _reason(path: str, exc: Exception) -> str:
    """Why ``torch.load`` could not read ``path``, in a few words (never torch's
    paragraphs: the error line names the file)."""
    size = os.path.getsize(path) if os.path.exists(path) else -1
    if size == 0:
        return "empty file"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if os.path.isfile(path) and not zipfile.is_zipfile(path):  # torch.save writes zip files
        return f"not a torch file ({size:,} bytes: corrupt, truncated or another format)"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, pickle.UnpicklingError) or "Weights only load failed" in text:
        return (f"not a checkpoint of tensors ({size:,} bytes: corrupt, or pickled objects "
                "other than tensors, which torch.load(weights_only=True) refuses to run)")
    if "zip" in text or "central directory" in text or isinstance(exc, EOFError) \
            or "pickle" in text.lower() or "magic number" in text:
        return f"not a readable torch file ({size:,} bytes)"
    return f"{type(exc).__name__}: {_first_sentence(text)}" if text else type(exc).__name__


def _first_sentence(text: str, limit: int = 160) -> str:
    """``text`` up to its first sentence end, else cut at a word boundary."""
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    if m and len(m.group(1)) <= limit:
        return m.group(1)
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def _some(items: List[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
