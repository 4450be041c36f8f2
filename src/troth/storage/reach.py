"""Which outbox rows one server can deliver: the SQL filter behind ``Outbox.undelivered``.

A poll message reaches only a connection of its group, and a server holds connections of
a few groups. Rows for every other group are left to the servers that hold them (or wait
for a worker to connect), so a server need not read them at all: thousands of messages for
a group with no worker then cost a server nothing, not a re-read on every delivery pass.

The filter is written for both SQLite and PostgreSQL, with ``?`` for its parameters (the
patterns), as every shared query is (``troth.storage.sql.dialect``).
It errs only towards reading too much, which delivery then skips as before: LIKE ignores
case on SQLite, and a poll address with a percent-escape (its group may be encoded) is
always read, since only ``parse_poll`` can say where it goes.
"""

from __future__ import annotations

from collections.abc import Collection

# Past this many groups the filter would cost more than it saves: read every row.
MAX_GROUPS = 64

# A group ends at one of these characters of the address (``parse_poll``): the id's path, a
# port, a query or a fragment.
_ENDS = ("", "/%", ":%", "?%", "#%")


def _escaped(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


def poll_groups(groups: Collection[str] | None) -> tuple[str, list[str]]:
    """A SQL condition on ``address`` keeping every row except poll rows of groups not in
    ``groups``, and its parameters. No groups given (None), or too many: a condition that
    keeps every row."""
    if groups is None or len(groups) > MAX_GROUPS:
        return "TRUE", []
    terms = ["address NOT LIKE ?", "address LIKE ? ESCAPE '!'"]
    params = ["poll:%", "%!%%"]
    for group in groups:
        for end in _ENDS:
            terms.append("address LIKE ? ESCAPE '!'")
            params.append("poll://___@" + _escaped(group) + end)
    return "(" + " OR ".join(terms) + ")", params
