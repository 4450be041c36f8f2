"""The settlement chain's step for one awaiter.

Lean's ``spec/02-actions/00-resume.lean`` (docs/references.md#the-abstract-machine).
"""

from __future__ import annotations

from dataclasses import replace

from troth.oracle.state import RETRY, ServerState, target_of
from troth.protocol.messages import execute_message
from troth.protocol.records import TaskState


def enqueue_resume(s: ServerState, awaited_id: str, awaiter_id: str, now: int) -> None:
    """Wake a suspended awaiter, or record the resume on an active one.

    The version is not bumped (only acquire does that): the execute is a wake-up hint. The
    awaiter's own deadline is not checked; its own settlement is what fulfils its task.
    """
    t = s.get_task(awaiter_id)
    if t is None:
        return
    match t.state:
        case TaskState.SUSPENDED:
            t = replace(t, state=TaskState.PENDING, resumes=(awaited_id,))
            s.set_task(t)
            s.set_task_timeout(t.id, RETRY, now + s.config.retry_timeout)
            p = s.get_promise(awaiter_id)
            if p is None:
                return
            target = target_of(p)
            if target != "":
                s.set_message(target, execute_message(t.id, t.version))
        case TaskState.PENDING | TaskState.ACQUIRED | TaskState.HALTED:
            if awaited_id in t.resumes:
                return
            s.set_task(replace(t, resumes=(*t.resumes, awaited_id)))
        case TaskState.FULFILLED:
            return
