"""Cron (docs/semantics.md "Cron"): standard cron in UTC, 5 fields or 6 with leading seconds,
Sunday as 0 or 7, day-of-month and day-of-week ORed, the @-shorthands; ``next_cron(c, t)`` is
the first fire strictly after ``t`` ms.

Expected instants are worked out by hand from the calendar: 1970-01-01 was a Thursday, so the
first Sunday is the 4th (3 days = 259_200_000 ms) and the first Monday the 5th.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from troth.protocol.cron import expand, is_valid, next_cron

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp()) * 1000  # type: ignore[misc]


@pytest.mark.parametrize(
    "cron",
    [
        "* * * * *",
        "*/15 9-17 * * 1-5",
        "0 0 1,15 * *",
        "0 12 * jan,jul *",
        "0 0 * * sun",
        "0 0 * * 0",
        "0 0 * * 7",
        "0 0 29 2 *",  # fires in leap years only, but fires
        "* * * * * *",
        "30 */5 * * * *",
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "  0   0  *  * *  ",
    ],
)
def test_standard_expressions_are_valid(cron: str) -> None:
    assert is_valid(cron)


@pytest.mark.parametrize(
    "cron",
    [
        "",
        "   ",
        "*",
        "* * * *",  # 4 fields
        "* * * * * * *",  # 7 fields: no year field
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * 32 * *",
        "* * * 13 *",
        "* * * * 8",
        "61 * * * * *",
        "*/0 * * * *",
        "a b c d e",
        "not a cron",
        "@reboot",
        "@every 5m",
        "@daily *",
        "0 0 30 2 *",  # parses, never fires
        "0 0 31 4,6,9,11 *",
    ],
)
def test_other_expressions_are_invalid(cron: str) -> None:
    assert not is_valid(cron)


@pytest.mark.parametrize(
    ("cron", "after", "expected"),
    [
        ("* * * * *", 0, MINUTE),
        # strictly after: an `after` exactly on a fire time skips it ...
        ("* * * * *", MINUTE, 2 * MINUTE),
        # ... and one in the middle of a second still gets the next fire after it
        ("* * * * *", MINUTE + 500, 2 * MINUTE),
        ("* * * * *", MINUTE - 1, MINUTE),
        ("* * * * * *", 0, SECOND),
        ("* * * * * *", SECOND, 2 * SECOND),
        ("* * * * * *", 1500, 2 * SECOND),
        ("* * * * * *", 999, SECOND),
        ("* * * * * *", -1, 0),
        # six fields: the first one is seconds
        ("30 * * * * *", 0, 30 * SECOND),
        ("30 * * * * *", 30 * SECOND, MINUTE + 30 * SECOND),
        ("0 */5 * * * *", 0, 5 * MINUTE),
        ("0 12 * * *", 0, 12 * HOUR),  # UTC, not local time
        ("@hourly", 0, HOUR),
        ("@daily", 0, DAY),
        ("@midnight", 0, DAY),
        ("@daily", DAY - 1, DAY),
        ("@weekly", 0, 3 * DAY),  # Sunday 1970-01-04
        ("@monthly", 0, 31 * DAY),
        ("@yearly", 0, 365 * DAY),
        ("@annually", 0, 365 * DAY),
        # Sunday is 0 or 7; 1 is Monday
        ("0 0 * * 0", 0, 3 * DAY),
        ("0 0 * * 7", 0, 3 * DAY),
        ("0 0 * * 1", 0, 4 * DAY),
        # day-of-month OR day-of-week: the 1st, or any Monday
        ("0 0 1 * 1", 0, 4 * DAY),
        ("0 0 1 * 1", 4 * DAY, 11 * DAY),
        ("0 0 1 * 1", 25 * DAY, 31 * DAY),  # Sunday Feb 1 beats Monday Feb 2
        ("0 0 29 2 *", 0, (365 + 365 + 31 + 28) * DAY),  # 1972-02-29
        ("30 2 * * *", ms(2024, 3, 10), ms(2024, 3, 10, 2, 30)),  # a US DST change day
        ("0 0 1 1 *", ms(2099, 6, 1), ms(2100, 1, 1)),
    ],
)
def test_next_cron_is_the_first_fire_strictly_after(cron: str, after: int, expected: int) -> None:
    assert next_cron(cron, after) == expected


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("far_from_utc")
def test_the_local_time_zone_does_not_matter() -> None:
    assert next_cron("0 12 * * *", 0) == 12 * HOUR
    assert next_cron("30 2 * * *", ms(2024, 3, 10)) == ms(2024, 3, 10, 2, 30)
    assert next_cron("@daily", ms(2024, 11, 3, 5)) == ms(2024, 11, 4)


CRONS = ["* * * * *", "*/7 * * * *", "0 0 * * 0", "15 3 1 * *", "*/10 * * * * *", "@hourly"]


@settings(max_examples=200, deadline=None)
@given(cron=st.sampled_from(CRONS), after=st.integers(0, ms(2200, 1, 1)))
def test_next_cron_skips_no_fire_and_lands_on_a_whole_second(cron: str, after: int) -> None:
    fire = next_cron(cron, after)
    assert fire > after
    assert fire % SECOND == 0
    if len(cron.split()) == 5 or cron.startswith("@"):
        assert fire % MINUTE == 0
    # Nothing fires in between: every instant in [after, fire) has the same next fire.
    assert next_cron(cron, fire - 1) == fire
    assert next_cron(cron, after + (fire - after) // 2) == fire
    assert next_cron(cron, fire) > fire


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{.id}}.{{.timestamp}}", "nightly.1700000000000"),
        ("{{.id}}", "nightly"),
        ("run-{{.timestamp}}", "run-1700000000000"),
        (
            "{{.id}}/{{.id}}-{{.timestamp}}-{{.timestamp}}",
            "nightly/nightly-1700000000000-1700000000000",
        ),
        ("fixed", "fixed"),
        ("{{ .id }}", "{{ .id }}"),  # only the exact placeholders
    ],
)
def test_expand_substitutes_the_schedule_id_and_the_fire_time(template: str, expected: str) -> None:
    assert expand(template, "nightly", 1_700_000_000_000) == expected
