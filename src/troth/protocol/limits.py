"""How much one request may ask of the server, checked before any handler runs.

One request must not be able to take the host's memory or write what a backend cannot
store, and both backends must answer the same input the same way. The numbers follow from
what PostgreSQL refuses, with room to spare for what clients actually send:

- PostgreSQL ``text`` cannot hold U+0000, and ``->>`` cannot read ``\\u0000`` out of a
  stored tag, so no id, address or tag may contain it (SQLite would store it, and then
  answer differently than PostgreSQL);
- a btree index entry holds about 2,700 bytes. The widest entries pair two ids
  (callbacks), an id and an address (listeners), or both JSON-escaped in the outbox key
  (``["unblock", id, address]``). Ids of 512 bytes without control characters (escaped
  at most to 2 bytes each) and addresses of 1,024 bytes without quotes, backslashes or
  control characters (never escaped) keep every entry under 2,100 bytes;
- tags travel with every record and every unblock message, and a tag filter costs a
  subquery per row searched (SQLite gives up near 1,000 of them), so tags are counted
  and weighed, and a search takes few filters;
- a search page is bounded in bytes as well as records (``MAX_PAGE_BYTES``, applied by
  the search handlers): with large payloads, a thousand records would be gigabytes.

The official SDKs' ids, ``resonate:*`` tags and poll addresses are tens of bytes, far
within these. Each check answers messages naming the field and the limit.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

MAX_ID_BYTES = 512
"""UTF-8 bytes in a promise, task or schedule id, a pid or a search cursor."""
MAX_ADDRESS_BYTES = 1024
"""UTF-8 bytes in a delivery address (``resonate:target``, a listener's address)."""
MAX_TAGS = 100
"""Tags on one promise or in one schedule's ``promiseTags``."""
MAX_TAG_BYTES = 32 * 1024
"""UTF-8 bytes of all tag keys and values of one promise (or ``promiseTags``) together."""
MAX_FILTERS = 16
"""Tag filters in one ``promise.search`` or ``schedule.search``."""
MAX_PAGE_BYTES = 1024 * 1024
"""JSON bytes of the records of one search page; a page always holds its first record."""
MAX_FENCES = 100
"""Fence actions in one ``task.fences`` batch (troth's extension): one engine pass and one
commit each, so a batch is bounded like the rest of a request."""

# C0 controls and DEL: never part of an id a client mints, and each would be escaped to six
# bytes in the outbox key. NUL is among them.
_CONTROL = re.compile("[\x00-\x1f\x7f]")
# What an address may not hold besides controls: a URL carries these percent-encoded.
_UNADDRESSABLE = re.compile('[\x00-\x1f\x7f"\\\\]')

_encode = msgspec.json.Encoder().encode


def byte_size(text: str) -> int:
    """The UTF-8 length of ``text`` (ASCII, the usual case, is measured without encoding)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _holds(pattern: re.Pattern[str], text: str) -> bool:
    # Printable text holds no control character: the usual case skips the regex (this runs
    # for every id of every request).
    return not text.isprintable() and pattern.search(text) is not None


def id_errors(field: str, value: str) -> list[str]:
    """An id's limits: at most ``MAX_ID_BYTES`` bytes, no control characters."""
    errors = []
    if (size := byte_size(value)) > MAX_ID_BYTES:
        errors.append(f"{field} is {size} bytes long: the limit is {MAX_ID_BYTES} bytes")
    if _holds(_CONTROL, value):
        errors.append(
            f"{field} must not contain null bytes or other control characters"
            " (U+0000-U+001F, U+007F)"
        )
    return errors


def address_errors(field: str, value: str) -> list[str]:
    """An address's limits: at most ``MAX_ADDRESS_BYTES`` bytes, nothing a URL encodes."""
    errors = []
    if (size := byte_size(value)) > MAX_ADDRESS_BYTES:
        errors.append(f"{field} is {size} bytes long: the limit is {MAX_ADDRESS_BYTES} bytes")
    if ('"' in value or "\\" in value) or _holds(_UNADDRESSABLE, value):
        errors.append(
            f"{field} must not contain control characters, quotes or backslashes:"
            " percent-encode them"
        )
    return errors


def tags_errors(field: str, tags: dict[str, str], most: int = MAX_TAGS) -> list[str]:
    """Tags' limits: at most ``most`` of them, ``MAX_TAG_BYTES`` bytes in all, no NUL."""
    if len(tags) > most:
        # Refused on the count alone: nothing else is read of a huge map.
        return [f"{field} has {len(tags)} entries: the limit is {most}"]
    errors = []
    text = "".join(tags) + "".join(tags.values())  # at most ``most`` entries: cheap to join
    if (size := byte_size(text)) > MAX_TAG_BYTES:
        errors.append(
            f"{field} hold {size} bytes of keys and values: the limit is {MAX_TAG_BYTES} bytes"
        )
    if "\x00" in text:
        errors.append(f"{field} must not contain null bytes (U+0000)")
    return errors


def record_bytes(record: Any) -> int:
    """What a record adds to a search page: the length of its JSON."""
    return len(_encode(record))
