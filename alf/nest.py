"""Nested-structure helpers: a thin, explicit layer over :mod:`optree`.

A *nest* is any tree of tuples, lists, dicts and named tuples whose leaves are
tensors (or specs, or numbers). ``()`` is the empty nest and is used for
"no state" / "no info". ``None`` is treated as an empty node as well.

Everything here delegates to optree (C++), so mapping over a nest costs a few
microseconds regardless of how it is nested.
"""
from typing import Any, Callable, List, Optional, Sequence

import optree
import torch

Nest = Any

_NONE_IS_LEAF = False


def flatten(nest: Nest) -> List[Any]:
    """Leaves of ``nest`` in a canonical (sorted-dict-key) order."""
    return optree.tree_leaves(nest, none_is_leaf=_NONE_IS_LEAF)


def flatten_with_paths(nest: Nest) -> List[tuple]:
    """``[(path_string, leaf), ...]`` with paths like ``"time_step.observation"``."""
    accessors, leaves, _ = optree.tree_flatten_with_accessor(nest, none_is_leaf=_NONE_IS_LEAF)
    return [(_path_string(a), leaf) for a, leaf in zip(accessors, leaves)]


def _path_string(accessor) -> str:
    parts = []
    for entry in accessor:
        for attr in ("field", "key", "name", "index"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
    return ".".join(parts)


def path_selected(path: str, fields: Optional[Sequence[str]]) -> bool:
    """Whether nest path ``path`` (as :func:`flatten_with_paths` gives it) is one of
    ``fields`` or lies under one of them (``"camera"`` selects ``"camera.rgb"``);
    ``fields=None`` selects every path."""
    if fields is None:
        return True
    return any(path == f or path.startswith(f + ".") for f in fields)


def map_structure(fn: Callable, *nests: Nest) -> Nest:
    """Apply ``fn`` leaf-wise to nests of identical structure."""
    return optree.tree_map(fn, *nests, none_is_leaf=_NONE_IS_LEAF)


def map_structure_with_path(fn: Callable, *nests: Nest) -> Nest:
    """Like :func:`map_structure` but ``fn(path_string, *leaves)``.

    Raises ``ValueError`` if the nests' structures differ (as :func:`map_structure`)."""
    return optree.tree_map_with_accessor(lambda a, *xs: fn(_path_string(a), *xs), *nests,
                                         none_is_leaf=_NONE_IS_LEAF)


def pack_sequence_as(structure: Nest, leaves: List[Any]) -> Nest:
    """Inverse of :func:`flatten`: put ``leaves`` back into ``structure``'s shape."""
    treespec = optree.tree_structure(structure, none_is_leaf=_NONE_IS_LEAF)
    return optree.tree_unflatten(treespec, leaves)


def assert_same_structure(a: Nest, b: Nest) -> None:
    """Raise ``ValueError`` naming both structures if they differ."""
    sa = optree.tree_structure(a, none_is_leaf=_NONE_IS_LEAF)
    sb = optree.tree_structure(b, none_is_leaf=_NONE_IS_LEAF)
    if sa != sb:
        raise ValueError(f"Nests have different structures:\n  {sa}\n  {sb}")


def is_empty(nest: Nest) -> bool:
    """True for ``()``, ``None``, ``{}`` and nests of those."""
    return len(flatten(nest)) == 0


def stack(nests: List[Nest], dim: int = 0) -> Nest:
    """Stack a list of same-structured tensor nests along a new ``dim``."""
    if not nests:
        raise ValueError("stack() needs at least one nest")
    # tree_map checks that every nest has the first one's structure (a plain zip of
    # leaves would silently pair up leaves of differently-structured nests).
    return optree.tree_map(lambda *c: torch.stack(c, dim), *nests, none_is_leaf=_NONE_IS_LEAF)
