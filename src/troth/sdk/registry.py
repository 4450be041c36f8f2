"""The function registry: names (and versions) a fresh process can map back to code.

A worker that resumes an execution knows only the function name and version recorded in
the promise's param, so every durable function is registered by name at startup. Several
versions of one name may be registered side by side: new executions use the latest (or
the one asked for) and an execution stays pinned to the version it started with.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Any

from troth.sdk.codec import parameter_hints
from troth.sdk.retry import RetryPolicy


def takes_context(fn: Callable[..., Any]) -> bool:
    """True for a durable function: its first parameter is a ``Context`` (or named ``ctx``).

    Remembered per function, as ``ctx.run`` asks on every call of an unregistered step."""
    try:
        return _remembered_takes_context(fn)
    except TypeError:  # an unhashable callable
        return _takes_context(fn)


def _takes_context(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    if not params:
        return False
    first = params[0]
    annotation = first.annotation
    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] == "Context"
    if annotation is not inspect.Parameter.empty:
        return getattr(annotation, "__name__", "") == "Context"
    return first.name == "ctx"


_remembered_takes_context = functools.lru_cache(maxsize=1024)(_takes_context)


def function_name(fn: Callable[..., Any]) -> str:
    """The default registered name: the function's ``__name__``, as other SDKs use."""
    return getattr(fn, "__name__", None) or repr(fn)


def invocation_data(
    name: str, version: int | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The param of an execution, before encoding: ``{"func", "args"}`` (plus ``kwargs`` and
    ``version`` when given), the shape every Resonate SDK reads."""
    data: dict[str, Any] = {"func": name, "args": list(args)}
    if kwargs:
        data["kwargs"] = kwargs
    if version is not None:
        data["version"] = version
    return data


@dataclass(frozen=True)
class Registered:
    name: str
    version: int
    fn: Callable[..., Any]
    durable: bool
    retry: RetryPolicy | None = None
    timeout: timedelta | None = None
    inline: bool = False  # its plain ``def`` steps run on the loop (``Options.inline``)

    @cached_property
    def hints(self) -> tuple[list[tuple[str, Any, Any]], Any]:
        """The parameters (name, kind, hint) and the return hint, for decoding values."""
        return parameter_hints(self.fn)


class Registry:
    def __init__(self) -> None:
        self._by_name: dict[str, dict[int, Registered]] = {}
        self._by_fn: dict[Callable[..., Any], Registered] = {}

    def add(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        version: int = 1,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
        inline: bool = False,
    ) -> Registered:
        if version < 1:
            raise ValueError("versions start at 1")
        name = name or function_name(fn)
        if not name or name == "<lambda>":
            raise ValueError("a lambda needs an explicit name to be registered")
        versions = self._by_name.setdefault(name, {})
        existing = versions.get(version)
        if existing is not None and existing.fn is not fn:
            raise ValueError(f"{name!r} version {version} is already registered")
        entry = Registered(name, version, fn, takes_context(fn), retry, timeout, inline)
        versions[version] = entry
        self._by_fn[fn] = entry
        return entry

    def get(self, name: str, version: int | None = None) -> Registered | None:
        """The entry for ``name`` at ``version``, or its latest version when None."""
        versions = self._by_name.get(name)
        if not versions:
            return None
        if version is None:
            return versions[max(versions)]
        return versions.get(version)

    def of(self, fn: Callable[..., Any]) -> Registered | None:
        return self._by_fn.get(fn)

    def names(self) -> list[str]:
        return sorted(self._by_name)
