"""How every example makes its app: embedded by default, or a server's client and worker.

    TROTH_URL=http://localhost:8001 python examples/hello.py   # against `troth serve`
    TROTH_DB=/tmp/x.db python examples/hello.py                 # embedded, choosing the file
"""

from __future__ import annotations

from datetime import timedelta

from troth import Troth


def make_app(**kwargs) -> Troth:
    # Troth() reads TROTH_URL, TROTH_GROUP and TROTH_DB itself.
    return Troth(**kwargs)


SHORT_LEASE = timedelta(seconds=2)
