"""How every example makes its app: embedded by default, or a server's client and worker.

    TROTH_URL=http://localhost:8001 python examples/hello.py   # against `troth serve`
    TROTH_DB=/tmp/x.db python examples/hello.py                 # embedded, choosing the file
"""

from __future__ import annotations

import os
from datetime import timedelta

from troth import Troth


def make_app(**kwargs) -> Troth:
    url = os.environ.get("TROTH_URL")
    if url:
        return Troth(url=url, group=os.environ.get("TROTH_GROUP", "default"), **kwargs)
    return Troth(db=os.environ.get("TROTH_DB", "troth.db"), **kwargs)


SHORT_LEASE = timedelta(seconds=2)
