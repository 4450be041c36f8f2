"""What a command prints: a rich table for people, or JSON for scripts (``--json``).

Each command builds its result once as plain JSON data and says how to draw it; ``emit``
picks one. Instants are printed as UTC times, durations in milliseconds as on the wire.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
from rich.console import Console, Group, RenderableType
from rich.table import Table

from troth.protocol.records import Record, Value
from troth.views.values import error_text, shown


def emit(args: argparse.Namespace, data: Any, draw: Callable[[], RenderableType]) -> None:
    """``data`` as JSON with ``--json``, else ``draw()`` for the terminal."""
    if args.json:
        json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        Console(soft_wrap=False).print(draw())


def wire(record: Record) -> dict[str, Any]:
    """A protocol record as its JSON (camelCase names, absent fields left out)."""
    data: dict[str, Any] = msgspec.to_builtins(record)
    return data


def table(columns: Sequence[str], rows: Iterable[Sequence[RenderableType]]) -> Table:
    grid = Table(header_style="bold")
    for column in columns:
        grid.add_column(column, overflow="fold")  # ids and times whole, even on a pipe
    for row in rows:
        grid.add_row(*row)
    return grid


def page(listing: RenderableType, cursor: str | None) -> RenderableType:
    """A page of a search, and how to ask for the next one if there is one."""
    if cursor is None:
        return listing
    return Group(listing, f"next page: --cursor {cursor}")


def fields(pairs: Iterable[tuple[str, RenderableType]]) -> Table:
    """One object as a two-column table of its fields."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in pairs:
        grid.add_row(name, value)
    return grid


def instant(ms: int | None) -> str:
    """An instant (ms since the epoch) as a UTC time; ``-`` for none."""
    if ms is None:
        return "-"
    try:
        moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    except (OverflowError, ValueError):
        return "never"  # "no deadline" is the largest instant, past any calendar's year 9999
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def tags(tags: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in sorted(tags.items())) or "-"


def value_json(value: Value) -> dict[str, Any]:
    """A param or value as JSON: ``{decoded, data, headers, note}`` (``troth.views.values``;
    ``data`` is the JSON held when ``decoded``, else the raw base64 and ``note`` says why)."""
    return shown(value).to_json()


def value_text(value: Value) -> str:
    """A param or value for the terminal: its JSON (a recorded error as its one line), or
    the raw value labelled with why it is not decoded; ``-`` for none."""
    seen = shown(value)
    if seen.empty:
        return "-"
    if not seen.decoded:
        return f"(raw: {seen.note}) {seen.data}"
    return error_text(seen.data) or json.dumps(seen.data, ensure_ascii=False)
