"""Preload (an extension of the reference server, not in Lean): the settled promises of a
task's branch, sent with a claim so the worker can replay without reading them one by one.
"""

from __future__ import annotations

from troth.engine.store import Store
from troth.protocol.records import BRANCH, PromiseRecord


def preload(store: Store, task_promise: PromiseRecord) -> list[PromiseRecord]:
    """Every stored, non-pending promise on ``task_promise``'s ``resonate:branch`` but
    itself, by id; nothing when the promise carries no branch tag."""
    branch = task_promise.tags.get(BRANCH)
    if branch is None:
        return []
    return store.settled_in_branch(branch, excluding=task_promise.id)
