"""``LISTEN troth_outbox``: hearing that another server enqueued a message.

Every transaction that enqueues sends ``NOTIFY troth_outbox``, delivered when it commits.
A thread of its own holds a dedicated connection (a pooled one would be handed to requests,
and notifications only reach the session that listens) and reports each notification. When
the connection drops it reconnects, and reports once on every (re)start, because whatever
was committed while nobody listened was not heard.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

from troth.storage.postgres.transaction import CHANNEL

log = logging.getLogger(__name__)

# How often the thread looks up from waiting to see whether it should stop (seconds).
_POLL = 0.2
_RECONNECT_PAUSE = 1.0


class OutboxListener:
    def __init__(self, url: str, heard: Callable[[], None]) -> None:
        self._url = url
        self._heard = heard
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="troth-postgres-listen", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._heard()
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=_POLL):
                            self._heard()
            except psycopg.Error:
                log.warning("outbox listener lost its connection; reconnecting", exc_info=True)
                self._stop.wait(_RECONNECT_PAUSE)
