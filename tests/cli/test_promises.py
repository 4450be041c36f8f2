"""``troth promises``: values go in as JSON and are stored as the SDK's codec stores them;
they come out decoded; settling, searching and the errors of each."""

from __future__ import annotations

import time


def test_create_then_get_shows_the_param_decoded_and_stores_it_as_the_sdk_would(troth, place):
    made = troth("promises", "create", "order-1", "--param", '{"sku": "a", "n": 2}',
                 "--tag", "team=ops", "--timeout", "1h", "--json", *place.flags)  # fmt: skip
    assert made.code == 0, made.err
    got = troth("promises", "get", "order-1", "--json", *place.flags)
    assert got.code == 0, got.err
    promise = got.json
    assert promise["state"] == "pending"
    assert promise["param"]["decoded"] is True
    assert promise["param"]["data"] == {"sku": "a", "n": 2}
    assert promise["tags"] == {"team": "ops"}
    # An hour from now, in ms (the unit is the flag's, not the wire's).
    assert abs(promise["timeoutAt"] - (time.time() * 1000 + 3_600_000)) < 60_000
    # What a workflow awaiting it reads: the SDK's codec decodes the stored param.
    assert place.read("order-1").param() == {"sku": "a", "n": 2}


def test_the_table_shows_the_decoded_param(troth, place):
    troth("promises", "create", "order-2", "--param", '{"total": 12.5}', *place.flags)
    shown = troth("promises", "get", "order-2", *place.flags)
    assert shown.code == 0
    assert '{"total": 12.5}' in shown.out and "pending" in shown.out


def test_resolve_reject_and_cancel_settle_with_the_value_given(troth, place):
    for id in ("s-1", "s-2", "s-3"):
        assert troth("promises", "create", id, *place.flags).code == 0
    resolved = troth("promises", "resolve", "s-1", "--value", '"approved"', "--json", *place.flags)
    assert resolved.code == 0, resolved.err
    assert resolved.json["state"] == "resolved"
    assert resolved.json["value"]["data"] == "approved"
    assert place.read("s-1").value() == "approved"
    rejected = troth("promises", "reject", "s-2", "--value", '{"why": 1}', "--json", *place.flags)
    assert (rejected.code, rejected.json["state"]) == (0, "rejected")
    canceled = troth("promises", "cancel", "s-3", "--json", *place.flags)
    assert (canceled.code, canceled.json["state"]) == (0, "rejected_canceled")


def test_settling_a_settled_promise_changes_nothing_and_says_so(troth, place):
    troth("promises", "create", "twice", *place.flags)
    troth("promises", "resolve", "twice", "--value", "1", *place.flags)
    again = troth("promises", "reject", "twice", "--value", "2", *place.flags)
    assert again.code == 6
    assert again.err.strip() == (
        "troth: promise 'twice' was already resolved with 1; not rejected with 2"
    )
    # The same state with another value is a conflict too, naming both values.
    other = troth("promises", "resolve", "twice", "--value", '"b"', *place.flags)
    assert other.code == 6 and 'with 1; not resolved with "b"' in other.err
    # The same outcome again is idempotent.
    same = troth("promises", "resolve", "twice", "--value", "1", *place.flags)
    assert same.code == 0, same.err
    got = troth("promises", "get", "twice", "--json", *place.flags).json
    assert (got["state"], got["value"]["data"]) == ("resolved", 1)


def test_search_filters_by_tag_and_state_and_pages_with_the_cursor(troth, place):
    for n in range(3):
        troth("promises", "create", f"batch-{n}", "--tag", "batch=b7", *place.flags)
    troth("promises", "resolve", "batch-1", *place.flags)
    pending = troth("promises", "search", "--tag", "batch=b7", "--state", "pending", "--json",
                    *place.flags).json  # fmt: skip
    assert sorted(p["id"] for p in pending["promises"]) == ["batch-0", "batch-2"]
    seen, cursor = [], None
    for _ in range(4):
        page = troth("promises", "search", "--tag", "batch=b7", "--limit", "1", "--json",
                     *(["--cursor", cursor] if cursor else []), *place.flags).json  # fmt: skip
        seen += [p["id"] for p in page["promises"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert sorted(seen) == ["batch-0", "batch-1", "batch-2"]
    table = troth("promises", "search", "--tag", "batch=b7", "--limit", "1", *place.flags)
    assert "next page: --cursor" in table.out


def test_an_unknown_id_is_one_line_and_exit_5(troth, place):
    for words in (["get", "nope"], ["resolve", "nope"], ["cancel", "nope"]):
        ran = troth("promises", *words, *place.flags)
        assert ran.code == 5
        assert ran.err == "troth: promise 'nope': not found\n"
        assert ran.out == ""


def test_bad_json_is_a_usage_error_naming_the_option_and_creates_nothing(troth, place):
    ran = troth("promises", "create", "bad-json", "--param", "{nope", *place.flags)
    assert ran.code == 2
    assert len(ran.err.splitlines()) == 1 and "--param: not JSON" in ran.err
    assert troth("promises", "get", "bad-json", *place.flags).code == 5


def test_a_duration_needs_a_unit(troth, place):
    ran = troth("promises", "create", "no-unit", "--timeout", "30", *place.flags)
    assert ran.code == 2 and "not a duration with a unit" in ran.err
    assert troth("promises", "get", "no-unit", *place.flags).code == 5
