"""Per-call options: the keyword arguments every durable call accepts besides the function's.

``ctx.run(f, x, timeout=timedelta(seconds=30), retry=Linear())`` passes ``x`` to ``f`` and
the options to the SDK. The option names below are therefore reserved: a function with a
parameter of one of these names must receive it positionally.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from troth.sdk.retry import RetryPolicy

OPTION_NAMES = frozenset(
    {"options", "timeout", "retry", "non_retryable", "target", "version", "id", "tags"}
)

DEFAULT_TIMEOUT = timedelta(days=1)


@dataclass(frozen=True)
class Options:
    timeout: timedelta | None = None
    retry: RetryPolicy | None = None
    non_retryable: tuple[type[BaseException], ...] = ()
    target: str | None = None
    version: int | None = None
    id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


def split_options(kwargs: dict[str, Any]) -> tuple[Options, dict[str, Any]]:
    """The SDK's options and the function's own keyword arguments, apart."""
    opts = kwargs.pop("options", None) or Options()
    given = {name: kwargs.pop(name) for name in list(kwargs) if name in OPTION_NAMES}
    if "timeout" in given:
        given["timeout"] = as_timedelta(given["timeout"])
    if "non_retryable" in given:
        given["non_retryable"] = tuple(given["non_retryable"])
    return (replace(opts, **given) if given else opts), kwargs


def as_timedelta(value: timedelta | float | None) -> timedelta | None:
    """A duration given as a ``timedelta`` or as seconds."""
    return timedelta(seconds=value) if isinstance(value, int | float) else value


def deadline(now_ms: int, timeout: timedelta | None, cap: int | None = None) -> int:
    """The absolute ``timeoutAt`` for a call: now + timeout, never past ``cap``."""
    if timeout is None:
        at = cap if cap is not None else now_ms + _ms(DEFAULT_TIMEOUT)
    else:
        at = now_ms + _ms(timeout)
    return min(at, cap) if cap is not None else at


def _ms(delta: timedelta) -> int:
    return max(0, round(delta.total_seconds() * 1000))
