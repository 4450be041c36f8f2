"""Promise ids: a root id, and the lineage below it.

The official SDKs (TypeScript 0.11, Python 0.8) and the current Resonate server read an id
as ``<origin>:<lineage>``: the **origin** (the root of the call tree) is everything before
the first ``:``, and lineage segments below it are separated by ``.``::

    root -> root:1 -> root:1.2 -> root:1.2.3

So ``:`` is reserved in root ids (an origin holding one could not be split back out of its
children's ids), while ``.`` is free in a root (``my.app.job`` is one origin). Same-origin
rules (``register_callback``, ``task.suspend``) and the ``resonate:origin``/``branch``/
``parent`` prefix rules are all stated in these terms.
"""

from __future__ import annotations

ORIGIN_SEP = ":"
LINEAGE_SEP = "."


def origin(id: str) -> str:
    """The root of an id's call tree: the text before the first ``:``."""
    return id.split(ORIGIN_SEP, 1)[0]


def child_id(ancestor: str, segment: str) -> str:
    """The id of a child: a root's first segment joins with ``:``, deeper ones with ``.``."""
    sep = LINEAGE_SEP if ORIGIN_SEP in ancestor else ORIGIN_SEP
    return f"{ancestor}{sep}{segment}"


def descends(id: str, ancestor: str) -> bool:
    """True when ``id`` is ``ancestor`` or lies in the subtree below it."""
    return id == ancestor or id.startswith(child_id(ancestor, ""))
