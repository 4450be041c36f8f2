"""HTML written so that escaping cannot be forgotten.

Every value the console shows is user data (ids, tags, function names, values, errors), so a
page is built from templates the console owns and values that are escaped by default:
``html("<td>{}</td>", value)`` escapes ``value`` unless it is already ``Html`` (a fragment
built the same way). No other function of the console writes markup.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape


class Html(str):
    """Markup that is safe to send: written by the console, with every value escaped."""

    __slots__ = ()


def _safe(value: object) -> str:
    if isinstance(value, Html):
        return value
    return escape("" if value is None else str(value), quote=True)


def html(template: str, *args: object, **kwargs: object) -> Html:
    """``template`` (the console's own markup) with each ``{}`` filled by an escaped value."""
    return Html(template.format(*map(_safe, args), **{k: _safe(v) for k, v in kwargs.items()}))


def join(parts: Iterable[Html], separator: str = "") -> Html:
    return Html(separator.join(_safe(p) for p in parts))
