"""What a person types, read into what the protocol takes: JSON values (encoded the way the
SDK's default codec encodes them, so a worker reads them as if the SDK had written them),
``KEY=VALUE`` pairs and durations with a unit. Each is an argparse ``type``, so a bad one is
a usage error (exit 2) that names the option."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from typing import Any

from troth.protocol.records import Value
from troth.sdk.codec import Codec

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")


class Json:
    """A JSON document given on the command line (``'{"n": 1}'``, ``42``, ``'"text"'``)."""

    def __init__(self, data: Any) -> None:
        self.data = data


def json_text(text: str) -> Json:
    try:
        return Json(json.loads(text))
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e}): {text!r}") from None


def pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"not KEY=VALUE: {text!r}")
    return key, value


def duration_ms(text: str) -> int:
    """``500ms``, ``30s``, ``5m``, ``2h``, ``1d`` as milliseconds: the unit is required."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"not a duration with a unit (500ms, 30s, 5m, 2h, 1d): {text!r}"
        )
    return int(match[1]) * _UNITS_MS[match[2]]


def tags(parser: argparse.ArgumentParser, help: str) -> None:
    """``--tag KEY=VALUE``, repeatable."""
    parser.add_argument(
        "--tag",
        type=pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"{help} (repeatable)",
    )


def headers(parser: argparse.ArgumentParser, of: str) -> None:
    """``--header KEY=VALUE``, repeatable: a header of the value given with it."""
    parser.add_argument(
        "--header",
        type=pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a header of the {of} (repeatable)",
    )


def value(given: Json | None, headers: Sequence[tuple[str, str]] = ()) -> Value:
    """A promise value: ``given`` encoded by the default codec (none: an empty value), plus
    the ``headers`` given (which win over the codec's)."""
    if given is None:
        return Value(headers=dict(headers) or None)
    encoded = Codec().encode(given.data)
    return Value(headers={**(encoded.headers or {}), **dict(headers)}, data=encoded.data)
