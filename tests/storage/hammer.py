"""The child of the crash test: hammer a storage service with writes, report acknowledgements.

Usage, from the repository root: ``python -m tests.storage.hammer sqlite PATH`` or
``python -m tests.storage.hammer pg CONNINFO``. Eight concurrent workers each loop:
task.create of a fresh promise, register a listener on it, task.fulfill it. After each
answer the worker prints ``<step> <id>`` and flushes, so every line the parent reads is an
acknowledged write. It runs until killed.
"""

from __future__ import annotations

import asyncio
import itertools
import sys

from troth.protocol.envelope import Request
from troth.protocol.records import SettleState, Value
from troth.protocol.requests import (
    CreateAction,
    PromiseCreateRequest,
    PromiseRegisterListenerRequest,
    PromiseSettleRequest,
    SettleAction,
    TaskCreateRequest,
    TaskFulfillRequest,
)
from troth.storage.postgres import PostgresService
from troth.storage.service import Service
from troth.storage.sqlite import SqliteService

TARGET = "poll://any@workers"
LISTENER = "poll://uni@watchers/1"
WORKERS = 8


def task_create(id: str) -> Request:
    action = CreateAction(
        "promise.create",
        None,
        PromiseCreateRequest(id, 10**12, Value(), {"resonate:target": TARGET}),
    )
    return Request("task.create", "c", TaskCreateRequest("hammer", 60_000, action))


def listen(id: str) -> Request:
    return Request("promise.register_listener", "c", PromiseRegisterListenerRequest(id, LISTENER))


def fulfill(id: str) -> Request:
    settle = PromiseSettleRequest(id, SettleState.RESOLVED, Value(data=id))
    return Request(
        "task.fulfill", "c", TaskFulfillRequest(id, 1, SettleAction("promise.settle", None, settle))
    )


async def worker(service: Service, ids: itertools.count) -> None:
    while True:
        id = f"c{next(ids)}"
        for step, request in (
            ("created", task_create(id)),
            ("listened", listen(id)),
            ("fulfilled", fulfill(id)),
        ):
            reply = await service.handle(request, 1)
            assert reply.status == 200, (step, id, reply)
            print(step, id, flush=True)


async def main(backend: str, target: str) -> None:
    service: Service
    if backend == "sqlite":
        service = SqliteService(target)
    else:
        service = PostgresService(target, pool_size=WORKERS)
    ids = itertools.count()
    await asyncio.gather(*(worker(service, ids) for _ in range(WORKERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
