"""The executions query: every parameter read, every bad one named; a row's state and
function whichever SDK started the execution; the operator's actions as requests."""

from __future__ import annotations

import pytest

from troth.protocol.conventions import FUNC_TAG, cancel_id
from troth.protocol.records import (
    EMPTY_VALUE,
    ORIGIN,
    PromiseRecord,
    PromiseState,
    SettleState,
    TaskState,
    Value,
)
from troth.sdk.codec import Codec
from troth.views import actions
from troth.views.executions import Cursor, Execution, ExecutionQuery, QueryError
from troth.views.values import json_value


def test_parse_reads_every_parameter_and_params_writes_them_back() -> None:
    params = {
        "state": "halted",
        "function": "checkout",
        "tag": "tenant:acme:eu",
        "since": "100",
        "until": "200",
        "cursor": "150.order:7",
        "limit": "20",
    }
    query = ExecutionQuery.parse(params)
    assert query == ExecutionQuery(
        "halted", "checkout", ("tenant", "acme:eu"), 100, 200, Cursor(150, "order:7"), 20
    )
    assert ExecutionQuery.parse(query.params()) == query
    assert ExecutionQuery.parse({}) == ExecutionQuery()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "running"}, "state"),
        ({"tag": "novalue"}, "tag"),
        ({"tag": ":v"}, "tag"),
        ({"since": "yesterday"}, "since"),
        ({"until": "-5"}, "until"),
        ({"limit": "0"}, "limit"),
        ({"limit": "100000"}, "limit"),
        ({"cursor": "garbage"}, "cursor"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_parameter_is_named(params: dict[str, str], field: str) -> None:
    with pytest.raises(QueryError) as raised:
        ExecutionQuery.parse(params)
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")


def promise(tags: dict[str, str], param: Value = EMPTY_VALUE) -> PromiseRecord:
    return PromiseRecord("e", PromiseState.PENDING, param, Value(), tags, 10**12, 5)


def test_a_row_names_its_function_and_a_halted_task() -> None:
    row = Execution.of(promise({FUNC_TAG: "checkout"}), TaskState.HALTED)
    assert (row.function, row.state, row.task) == ("checkout", "halted", TaskState.HALTED)
    official = promise({}, Codec().encode({"func": "greet", "args": []}))
    assert Execution.of(official, None).function == "greet"
    assert Execution.of(promise({}, Value(data="%%")), None).function is None
    assert Execution.from_json(row.to_json()) == row


def test_cancel_is_troths_cooperative_cancellation() -> None:
    root = promise({FUNC_TAG: "checkout", ORIGIN: "e"})
    create, settle = actions.cancel(root, "customer left")
    assert create is not None and create.id == cancel_id("e")
    assert settle.id == cancel_id("e") and settle.state == SettleState.RESOLVED
    assert Codec().decode(settle.value) == {"reason": "customer left"}


def test_an_official_sdk_execution_is_canceled_by_its_promise() -> None:
    create, settle = actions.cancel(promise({}), "stop")
    assert create is None
    assert (settle.id, settle.state) == ("e", SettleState.REJECTED_CANCELED)


def test_settle_and_resume() -> None:
    assert actions.settle("p", SettleState.RESOLVED, {"ok": 1}).value == json_value({"ok": 1})
    assert actions.settle("p", SettleState.REJECTED).value == Value()
    assert actions.resume("e").id == "e"
