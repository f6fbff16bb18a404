"""Which checkpoint file each pretrained part (:func:`alf.algorithms.pretrained.pretrained`)
was loaded from, so that a run says it, records it and can be rerun from the same weights.

A load is recorded per gin binding (``bc_actor/pretrained``): the configured
``checkpoint`` string, the file it resolved to (a run directory resolves to its newest
checkpoint, which changes as that run goes on), the file's checkpoint iteration and its
content hash (sha256 of the bytes). The record is kept on the module the load built (its
``pretrained_source`` attribute), not in this module: it belongs to that build, so a later
build in the same process (tests, a notebook) never reports an earlier one's loads.
``alf.trainers.run_provenance`` collects the records of the run's algorithm
(:func:`loaded_sources`) into ``run_info/start-NNNN.json`` (``"pretrained"``), and
``alf.bin.train --rerun`` refuses a rerun whose pretrained source would now load other
bytes (:func:`changed_sources`), in one line.
"""
import hashlib
import os
import re
from typing import Any, Dict, List, Optional

import gin
import torch

_CKPT = re.compile(r"ckpt-(\d+)\.pt$")  # alf/trainers/checkpointer.py's file names

#: attribute of a module built by ``pretrained``: the record of what was loaded into it
SOURCE_ATTR = "pretrained_source"


def file_sha256(path: str) -> str:
    """The hex sha256 of ``path``'s bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def record_load(module: torch.nn.Module, binding: str, checkpoint: str, prefix: str,
                source_file: str, iteration: Optional[int]) -> Dict[str, Any]:
    """Note on ``module`` (its :data:`SOURCE_ATTR`) that ``binding`` loaded ``prefix`` of
    ``source_file`` into it; returns the record."""
    record = {"binding": binding, "checkpoint": checkpoint, "prefix": prefix,
              "file": os.path.abspath(source_file), "iteration": iteration,
              "sha256": file_sha256(source_file)}
    setattr(module, SOURCE_ATTR, record)
    return record


def describe(record: Dict[str, Any], part: str, tensors: int) -> str:
    """The log line of a load: part, source file, checkpoint iteration, hash prefix."""
    iteration = ("" if record["iteration"] is None else
                 f"checkpoint iteration {record['iteration']:,}, ")
    return (f"Pretrained {part}: loaded {tensors} tensors under "
            f"'{record['prefix'] or '(the whole algorithm)'}' from {record['file']} "
            f"({iteration}sha256 {record['sha256'][:12]})")


def _bound_checkpoint(binding: str) -> Optional[str]:
    try:
        return gin.query_parameter(f"{binding}.checkpoint")
    except (ValueError, RuntimeError):
        return None


def loaded_sources(algorithm: torch.nn.Module) -> List[Dict[str, Any]]:
    """The records of the pretrained parts inside ``algorithm`` (itself included, for a
    whole pretrained algorithm), one per binding (a copied part, e.g. a target network,
    carries its original's record), sorted by binding."""
    found: Dict[str, Dict[str, Any]] = {}
    for module in algorithm.modules():
        record = getattr(module, SOURCE_ATTR, None)
        if isinstance(record, dict):
            found.setdefault(record["binding"], dict(record))
    return [found[b] for b in sorted(found)]


def iteration_of(path: str, state: Any) -> Optional[int]:
    """The training iteration of an alf checkpoint (its ``iteration`` entry, else its
    file name ``ckpt-<n>.pt``); None for a plain ``state_dict``."""
    if isinstance(state, dict) and isinstance(state.get("iteration"), int):
        return state["iteration"]
    m = _CKPT.search(os.path.basename(path))
    return int(m.group(1)) if m else None


def changed_sources(recorded: List[Dict[str, Any]], newest_file) -> List[str]:
    """One sentence per recorded pretrained source that a rerun would load differently:
    its binding is still bound to the recorded ``checkpoint`` (a ``--conf_param`` that
    changes it is the user's choice), and the file that string resolves to now
    (``newest_file(path)``: a run directory's newest checkpoint) is another file, is
    gone, or has other bytes."""
    out = []
    for r in recorded:
        binding, checkpoint = r.get("binding"), r.get("checkpoint")
        if not binding or _bound_checkpoint(binding) != checkpoint:
            continue
        path = checkpoint.rpartition("@")[2].strip()
        now = newest_file(path) if os.path.isdir(path) else path
        was = f"{r['file']} (sha256 {str(r.get('sha256'))[:12]})"
        if now is None or not os.path.isfile(now):
            out.append(f"{binding} loaded {was}, and {path} now holds no such file")
        elif os.path.abspath(now) != r["file"]:
            out.append(f"{binding} loaded {was}, and {path} now resolves to {now}")
        elif file_sha256(now) != r.get("sha256"):
            out.append(f"{binding} loaded {was}, whose content has changed since")
    return out
