"""The operator's actions, as the standard protocol requests that carry them out.

One place for each convention, so the CLI and the console act exactly as the SDK does:

- cancel an execution: troth's cooperative cancellation (``troth.sdk.cancellation``):
  create the execution's cancel promise if absent and resolve it with the reason; the
  execution observes ``CanceledError`` and may clean up. An execution that no troth SDK
  runs (no ``troth:func`` tag: an official SDK's) has no cancel promise to hear, so its
  promise is settled ``rejected_canceled`` instead;
- resume a halted execution (or continue a halted task): ``task.continue``;
- resolve, reject or cancel a promise: ``promise.settle``, the value given as JSON.
"""

from __future__ import annotations

from typing import Any

from troth.protocol.conventions import FUNC_TAG, cancel_request
from troth.protocol.records import EMPTY_VALUE, PromiseRecord, SettleState
from troth.protocol.requests import (
    PromiseCreateRequest,
    PromiseSettleRequest,
    TaskContinueRequest,
)
from troth.views.values import json_value


def cancel(
    root: PromiseRecord, reason: str | None = None
) -> tuple[PromiseCreateRequest | None, PromiseSettleRequest]:
    """The requests that ask execution ``root`` to stop, in order: the cancel promise's
    create (None where it is settled directly) and its settle. A settle that answers 409
    found it settled already (canceled before, or the execution ended)."""
    if FUNC_TAG not in root.tags:
        return None, settle(root.id, SettleState.REJECTED_CANCELED, {"reason": reason})
    create = cancel_request(root)
    return create, settle(create.id, SettleState.RESOLVED, {"reason": reason})


def resume(id: str) -> TaskContinueRequest:
    """Resume a halted execution: a worker picks its task up and replays it."""
    return TaskContinueRequest(id)


def settle(id: str, state: SettleState, value: Any = None) -> PromiseSettleRequest:
    """Settle promise ``id`` with ``value`` (any JSON; None settles it with no value)."""
    return PromiseSettleRequest(id, state, EMPTY_VALUE if value is None else json_value(value))
