"""``with_defaults``: a subclass constructor that only changes its parent's defaults.

TD3 is DDPG with other defaults, IMPALA is APPO with another loss. Re-declaring the
parent's 15-20 arguments to change three of them copies their types, ranges and
order, and the copy drifts. ``__init__ = with_defaults(Parent.__init__, x=2)``
instead gives the subclass the parent's constructor with new defaults, and a
signature (``inspect.signature``, gin, ``--describe``) that shows them.
"""
import functools
import inspect
from typing import Any, Callable


def with_defaults(init: Callable, **defaults: Any) -> Callable:
    """``init`` (a parent's ``__init__``) with some defaults replaced.

    Every argument is passed on explicitly, so a gin binding of the parent's name
    (``DdpgAlgorithm.num_critics``) never reaches the subclass: only the subclass's
    own bindings (``Td3Algorithm.num_critics``) and these defaults do.

    Raises:
        TypeError: a name in ``defaults`` is not a parameter of ``init``.
    """
    signature = inspect.signature(init)
    unknown = sorted(set(defaults) - set(signature.parameters))
    if unknown:
        raise TypeError(f"with_defaults: {init.__qualname__} has no parameter(s) "
                        f"{', '.join(unknown)}")
    new_signature = signature.replace(parameters=[
        p.replace(default=defaults[p.name]) if p.name in defaults else p
        for p in signature.parameters.values()])

    @functools.wraps(init)
    def __init__(*args: Any, **kwargs: Any) -> None:
        bound = new_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        init(*bound.args, **bound.kwargs)

    __init__.__signature__ = new_signature
    return __init__
