"""Per-call options, given through one channel that never touches the function's arguments.

``ctx.run(fetch, url, timeout=5)`` passes ``timeout=5`` to ``fetch``: every argument after
the function is the function's. Options go through ``options(...)``::

    await ctx.options(timeout=timedelta(seconds=30), retry=Linear()).run(fetch, url)
    app.options(target="payments").rpc("pay-7", charge, "acct", 100)

so no keyword name is reserved, and the function's signature types the call.

Deadlines are explicit. An execution has no deadline unless one is given: by the call's
``timeout`` option, by ``@app.register(timeout=...)``, or by ``Troth(default_timeout=...)``,
in that order; a child's deadline never passes its parent's. Each promise records where its
deadline came from (``troth:deadline``), so a ``TimedOutError`` says which one fired.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import TypedDict, Unpack

from troth.protocol.queues import DEBOUNCE_TAG, PRIORITY_TAG, QUEUE_KEY_TAG, QUEUE_TAG
from troth.protocol.records import MAX_MILLIS
from troth.sdk.retry import RetryPolicy

DEADLINE_TAG = "troth:deadline"
"""Where a promise's deadline came from: a ``DeadlineSource`` value."""

NO_DEADLINE = MAX_MILLIS
"""The ``timeoutAt`` of a promise without a deadline: the largest instant the protocol
carries (the year 287396)."""


class DeadlineSource(StrEnum):
    OPTION = "option"  # the call's ``timeout`` option
    REGISTER = "register"  # ``@app.register(timeout=...)``
    APP = "app"  # ``Troth(default_timeout=...)``
    PARENT = "parent"  # the calling execution's own deadline, which a child cannot pass


@dataclass(frozen=True)
class Options:
    """How to make one durable call; every field is optional.

    - ``timeout``: the call's deadline, from now (a ``timedelta``, or seconds);
    - ``retry`` / ``non_retryable``: the retry policy of a local step, and the error types
      it never retries;
    - ``target``: the worker group (or full address) an rpc goes to;
    - ``version``: the registered version of the function to run;
    - ``id``: the promise's id, instead of the next position in the caller's history;
    - ``tags``: extra tags on the call's promise;
    - ``inline``: run a local step that is a plain ``def`` on the event loop itself rather
      than in a worker thread (the default). It saves the thread hand-off, which costs more
      than a cheap step; but while it runs nothing else in the process does: no heartbeat
      (a lease may lapse and the task run again elsewhere), no other execution. Only for
      steps that take microseconds; one that ran longer than a tenth of the lease is
      logged at WARNING, once per function. It is not recorded, so changing it never
      stops a replay;
    - ``grace``: for an execution (``rpc``, ``detached``, ``app.run``, ``app.rpc``) with a
      deadline: it is canceled cooperatively, with a ``TimedOutError`` as the reason, this
      long before the deadline, so that its cleanup can still record steps (see
      ``troth.sdk.cancellation``).

    ``options(queue=..., queue_key=..., priority=..., debounce=...)`` puts an execution in
    a queue declared with ``app.queue`` (docs/queues.md); they travel as tags of its
    promise.
    """

    timeout: timedelta | None = None
    retry: RetryPolicy | None = None
    non_retryable: tuple[type[BaseException], ...] = ()
    target: str | None = None
    version: int | None = None
    id: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    grace: timedelta | None = None
    inline: bool | None = None  # None: the registered default (``@app.register(inline=...)``)


class StepOptions(TypedDict, total=False):
    """The keywords of ``saga.options(...)``: how a compensation's step runs."""

    timeout: timedelta | float | None
    retry: RetryPolicy | None
    non_retryable: tuple[type[BaseException], ...] | list[type[BaseException]]
    inline: bool | None


class StartOptions(TypedDict, total=False):
    """The keywords of ``app.options(...)``: how an execution starts."""

    timeout: timedelta | float | None
    target: str | None
    version: int | None
    tags: Mapping[str, str] | None
    grace: timedelta | float | None
    queue: str | None
    queue_key: str | None
    priority: int | None
    debounce: timedelta | float | None


class CallOptions(StepOptions, StartOptions, total=False):
    """The keywords of ``ctx.options(...)``: every option (see ``Options``)."""

    id: str | None


def options(**given: Unpack[CallOptions]) -> Options:
    """``Options`` from the keywords of an ``options(...)`` call; durations may be seconds."""
    return Options(
        timeout=as_timedelta(given.get("timeout")),
        retry=given.get("retry"),
        non_retryable=tuple(given.get("non_retryable", ())),
        target=given.get("target"),
        version=given.get("version"),
        id=given.get("id"),
        tags={**(given.get("tags") or {}), **queue_tags(given)},
        grace=as_timedelta(given.get("grace")),
        inline=as_flag("inline", given.get("inline")),
    )


def queue_tags(given: CallOptions) -> dict[str, str]:
    """The tags that put an execution in a queue, from the options naming it."""
    queue, key, priority = given.get("queue"), given.get("queue_key"), given.get("priority")
    debounce = as_timedelta(given.get("debounce"))
    if queue is None:
        if key is not None or priority is not None or debounce is not None:
            raise TypeError("the queue_key, priority and debounce options need the queue option")
        return {}
    tags = {QUEUE_TAG: queue}
    if key is not None:
        tags[QUEUE_KEY_TAG] = key
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
            raise TypeError(f"the priority option is an integer >= 0, not {priority!r}")
        tags[PRIORITY_TAG] = str(priority)
    if debounce is not None:
        if _ms(debounce) < 1:
            raise ValueError(f"the debounce option is a window of 1 ms or more, not {debounce!r}")
        tags[DEBOUNCE_TAG] = str(_ms(debounce))
    return tags


def as_flag(name: str, value: object) -> bool | None:
    """A yes/no option as given (None: not given); anything else names the option."""
    if value is None or isinstance(value, bool):
        return value
    raise TypeError(f"the {name} option is True or False, not {value!r}")


def as_timedelta(value: timedelta | float | None) -> timedelta | None:
    """A duration given as a ``timedelta`` or as seconds."""
    return timedelta(seconds=value) if isinstance(value, int | float) else value


def deadline(
    now_ms: int,
    choices: list[tuple[timedelta | None, DeadlineSource]],
    cap: int | None = None,
) -> tuple[int, DeadlineSource | None]:
    """The absolute ``timeoutAt`` of a call and where it came from.

    ``choices`` in order of precedence; the first that is given wins. Without one the call
    has no deadline (``NO_DEADLINE``, source None). ``cap`` is the parent's deadline.
    """
    at, source = NO_DEADLINE, None
    for timeout, given in choices:
        if timeout is not None:
            at, source = min(now_ms + _ms(timeout), NO_DEADLINE), given
            break
    if cap is not None and cap < at:
        at, source = cap, DeadlineSource.PARENT
    return at, source


def deadline_tags(source: DeadlineSource | None) -> dict[str, str]:
    return {DEADLINE_TAG: source.value} if source is not None else {}


def _ms(delta: timedelta) -> int:
    return max(0, round(delta.total_seconds() * 1000))
