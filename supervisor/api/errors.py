"""The API's one error tree: a store failure underneath a call becomes StoreFailed."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

from store.errors import StoreError
from supervisor.errors import StoreFailed

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def store_errors(
    fn: Callable[Concatenate[S, P], Awaitable[R]],
) -> Callable[Concatenate[S, P], Awaitable[R]]:
    """A store failure underneath becomes StoreFailed: callers see one error tree."""

    async def wrapper(owner: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(owner, *args, **kwargs)
        except StoreError as exc:
            raise StoreFailed(exc) from exc

    functools.update_wrapper(wrapper, fn)  # in place: `wrapper` keeps its own type
    return wrapper
