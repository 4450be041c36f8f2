"""Hypothesis strategies for the fuzzing tests: JSON values of every shape, biased towards
the names and values the decoder knows, and valid requests with parts changed."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.support.wire import DELETE, VALID, mutate
from troth.protocol import Kind

# Names the decoder knows, so that generated objects hit real fields often.
FIELDS = [
    "id", "timeoutAt", "param", "value", "tags", "state", "awaited", "awaiter", "address",
    "limit", "cursor", "pid", "ttl", "action", "actions", "kind", "head", "data", "version",
    "tasks", "cron", "promiseId", "promiseTimeout", "promiseParam", "promiseTags", "time",
    "headers", "corrId", "auth", "resonate:debug_time", "resonate:target", "resonate:origin",
    "resonate:branch", "resonate:parent", "resonate:delay", "resonate:timer",
]  # fmt: skip
WORDS = [
    "", "p", "p:1", "p:1.2", "p.1", "p\x00", "resolved", "pending", "rejected_timedout", "acquired",
    "promise.create", "promise.settle", "promise.get", "poll://any@g", "poll://uni@g/w",
    "http://h", "ftp://h", "* * * * *", "@daily", "0 0 30 2 *", "2026-04-01", "10", "-1",
]  # fmt: skip
NUMBERS = [0, 1, -1, 1000, 1001, 2**63 - 1, 2**63, -(2**63), 2**64, 1.0, 0.5, 1e300]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(NUMBERS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(WORDS)
)
keys = st.sampled_from(FIELDS) | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=6),
    max_leaves=24,
)
objects = st.dictionaries(keys, json_values, max_size=8)


def paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path into a JSON value, the value itself excluded."""
    if isinstance(value, dict):
        items: list[tuple[str | int, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return []
    out: list[tuple[str | int, ...]] = []
    for key, child in items:
        out.append((*prefix, key))
        out.extend(paths(child, (*prefix, key)))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any]:
    """A valid request of some kind with one part replaced, removed or added."""
    kind = draw(st.sampled_from(sorted(Kind)))
    data = VALID[kind]
    for _ in range(draw(st.integers(1, 3))):
        targets = paths(data)
        how = draw(st.sampled_from(["replace", "delete", "add"]))
        if how == "add" or not targets:
            containers = [p for p in targets if isinstance(_at(data, p), dict)]
            where = draw(st.sampled_from([(), *containers]))
            data = mutate(data, (*where, draw(keys)), draw(json_values))
        else:
            path = draw(st.sampled_from(targets))
            value = DELETE if how == "delete" and isinstance(path[-1], str) else draw(json_values)
            data = mutate(data, path, value)
    return kind, data


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        value = value[step]
    return value
