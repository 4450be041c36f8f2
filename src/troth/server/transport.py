"""A delivery transport: the plugin that carries the outbox messages of some address schemes.

The delivery loop (``troth.server.delivery``) reads the outbox page by page and hands each
row to the transport registered for its address's scheme; it knows none of them by name.
troth has two: ``poll`` (a worker's SSE stream, ``poll_transport``) and ``http``/``https``
(HTTP push, ``push_transport``). A row whose scheme no transport serves is dropped.

A transport talks back to the loop through its ``Courier``: it claims rows before delivering
them (several servers may share the outbox), reports each as delivered, and the loop removes
the delivered rows from the outbox in batches. To add a transport, implement ``Transport``,
register it with ``DeliveryLoop.add`` in ``troth.server.app``, and let
``troth.protocol.addresses.is_valid`` accept its addresses so requests may name them.
"""

from __future__ import annotations

from typing import Protocol

from troth.storage.service import Delivery


class Courier(Protocol):
    """What the delivery loop does for its transports."""

    @property
    def claim_ttl_ms(self) -> int:
        """How long a claim lasts beyond the delivery it covers."""
        ...

    @property
    def in_order(self) -> bool:
        """Whether rows commit in seq order, so that one server owns the outbox (SQLite)."""
        ...

    def wire(self, delivery: Delivery) -> bytes:
        """The message as sent."""
        ...

    async def claim(self, deliveries: list[Delivery], ttl_ms: int) -> list[Delivery]:
        """The deliveries this server may make now, claimed for ``ttl_ms`` (0 gives a claim
        up); other servers may hold some of them."""
        ...

    def take(self, delivery: Delivery) -> None:
        """``delivery`` is being delivered: later pages skip it until it is acknowledged or
        given up."""
        ...

    def delivered(self, delivery: Delivery) -> None:
        """``delivery`` reached its address: remove it from the outbox with the next batch."""
        ...

    def give_up(self, delivery: Delivery) -> None:
        """``delivery`` was not delivered: let go of its claim, and of the row."""
        ...

    def wake(self) -> None:
        """Something finished: acknowledge and dispatch soon, without reading the outbox."""
        ...

    def read_again(self, *, now: bool) -> None:
        """Rows were left behind: read the outbox from its start now (a connection that may
        take them registered), or else at the next interval (nothing will say when)."""
        ...


class Transport(Protocol):
    """Delivers the messages whose address has one of ``schemes``; ``name`` labels its
    metrics (``troth_messages_total``)."""

    name: str
    schemes: tuple[str, ...]

    async def offer(self, rows: list[Delivery]) -> list[Delivery]:
        """Take this page's rows for this transport (none of them in hand); the rows it can
        never deliver, which the loop drops."""
        ...

    async def dispatch(self) -> None:
        """Start the deliveries that came due since the last call (retries after a backoff)."""
        ...

    def next_due(self) -> float:
        """Loop time at which ``dispatch`` has work to start; ``math.inf`` for none."""
        ...

    async def stop(self) -> None:
        """Cancel the deliveries in flight."""
        ...
