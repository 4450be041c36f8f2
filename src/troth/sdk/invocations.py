"""What an execution's root promise is, as an app starts one (``app.run``, ``app.rpc``) or a
schedule fires one (``app.schedules``).

Its param is the ``{func, args}`` every Resonate SDK reads (``invocation_data``); its tags
route it to a worker group (``TARGET``), give it a lineage of its own (``ORIGIN``,
``BRANCH`` and ``PARENT`` are its own id), name its work (``work_tags``: the function and a
digest of the arguments) and its deadline's source; its deadline is the call's option, else
the function's registered timeout, else the app's default, else none.

Starting an id that exists joins it, but only if it runs the same work (``same_work``):
otherwise ``IdempotencyConflictError``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from troth.protocol.conventions import ARGS_TAG, FUNC_TAG, SCOPE, STEP_TAG
from troth.protocol.records import BRANCH, ORIGIN, PARENT, TARGET, PromiseRecord, Value
from troth.protocol.requests import PromiseCreateRequest
from troth.sdk.cancellation import grace_tags
from troth.sdk.clock import Clock
from troth.sdk.codec import Codec
from troth.sdk.errors import IdempotencyConflictError
from troth.sdk.network import anycast, target_address
from troth.sdk.options import DeadlineSource, Options, deadline, deadline_tags
from troth.sdk.registry import Registry, function_name, invocation_data
from troth.sdk.replay import digest


class Starter(Protocol):
    """What making a root promise needs of the app that starts it (``Troth`` is one),
    read at each start: its functions, its codec, its group, its clock and its default
    deadline."""

    registry: Registry
    codec: Codec
    group: str
    clock: Clock
    default_timeout: timedelta | None


def invocation(
    app: Starter,
    fn: Callable[..., Any] | str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    target: str | None = None,
    version: int | None = None,
) -> tuple[Value, dict[str, str]]:
    """The ``{func, args}`` param and the routing tags of a remote invocation."""
    entry = app.registry.of(fn) if not isinstance(fn, str) else None
    name = fn if isinstance(fn, str) else (entry.name if entry else function_name(fn))
    data = invocation_data(name, version or (entry.version if entry else None), args, kwargs)
    address = target_address(target) if target else anycast(app.group)
    tags = {SCOPE: "global", TARGET: address, **work_tags(name, args, kwargs)}
    return app.codec.encode(data), tags


def execution_deadline(
    app: Starter, fn: Callable[..., Any] | str, opts: Options
) -> tuple[int, DeadlineSource | None]:
    """An execution's deadline: the call's option, else the function's registered
    timeout (when this app registers it), else the app's default, else none."""
    registry = app.registry
    entry = registry.get(fn, opts.version) if isinstance(fn, str) else registry.of(fn)
    choices = [
        (opts.timeout, DeadlineSource.OPTION),
        (entry.timeout if entry else None, DeadlineSource.REGISTER),
        (app.default_timeout, DeadlineSource.APP),
    ]
    return deadline(app.clock.now(), choices)


def root(
    app: Starter,
    id: str,
    fn: Callable[..., Any] | str,
    opts: Options,
    param: Value,
    tags: dict[str, str],
) -> PromiseCreateRequest:
    """The root promise of execution ``id``, given its ``invocation``: a lineage of its
    own, the call's tags, and its deadline."""
    tags.update({ORIGIN: id, BRANCH: id, PARENT: id, **opts.tags})
    at, source = execution_deadline(app, fn, opts)
    tags.update(deadline_tags(source))
    tags.update(grace_tags(opts, at, source))
    return PromiseCreateRequest(id, at, param, tags)


# -- idempotency ------------------------------------------------------------------------------


def work_tags(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, str]:
    """The root tags naming an execution's work: its function and an argument digest (the
    same digest the replay check records for a child call, so that the two agree)."""
    return {FUNC_TAG: name, ARGS_TAG: digest(args, kwargs)}


def same_work(id: str, record: PromiseRecord, requested: dict[str, str]) -> None:
    """Raise ``IdempotencyConflictError`` unless the existing promise ``id`` runs the
    function and arguments of ``requested`` (its ``work_tags``); a promise that names no
    work (created by another SDK, or as a plain promise) is not judged.

    A child of a workflow (``ctx.rpc``, ``ctx.detached``, or even a step) names its work by
    its step tag, ``<kind>:<function>``, so starting its id as a root is judged too."""
    name = record.tags.get(FUNC_TAG)
    step = record.tags.get(STEP_TAG)
    if name is None and step is not None:
        name = step.partition(":")[2] or step  # a sleep or a promise: named by its kind
    if name is None:
        return
    if name != requested[FUNC_TAG]:
        raise IdempotencyConflictError(id, "function", name, requested[FUNC_TAG])
    recorded = record.tags.get(ARGS_TAG)
    if recorded is not None and recorded != requested[ARGS_TAG]:
        raise IdempotencyConflictError(id, "arguments", recorded, requested[ARGS_TAG])
