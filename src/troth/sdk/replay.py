"""The replay check: every durable call meets its own record, or the replay is refused.

Replay is re-execution, so a call finds its past by position: the n-th call a context
makes has the id ``<context id>.n`` (an explicit ``id=`` names its promise directly and
takes no position). When the code changed between runs, the n-th call may no longer be
the call that recorded position n: a step inserted, removed or moved, other arguments,
or concurrent branches of one context interleaving differently. Answering such a call
from the record would hand it another call's result, or run a finished step again under
a shifted number; so each child promise records *which* call made it, and a replay that
meets a record made by a different call stops with ``NonDeterminismError`` (the worker
halts the task for an operator).

A call is identified by its kind, the function's name (``run``, ``rpc``, ``detached``)
and a digest of its arguments (``run``, ``rpc``, ``detached``, and ``promise``'s data).
Sleep durations are not compared: a changed duration cannot produce a wrong value, and
the recorded timer stands.

The digest is of a canonical JSON form of the arguments, independent of the codec (an
encryptor's nonces would make the encoded value differ on every run) and of ordering
that Python does not fix between processes (sets, dict keys). A value with no JSON form
(a connection handed to a local step) counts by its type's name only.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, NamedTuple

import msgspec

from troth.protocol.conventions import ARGS_TAG, STEP_TAG


class Call(NamedTuple):
    """One durable call as the code makes it now."""

    kind: str
    name: str | None = None
    digest: str | None = None

    @property
    def step(self) -> str:
        return f"{self.kind}:{self.name}" if self.name is not None else self.kind

    def tags(self) -> dict[str, str]:
        tags = {STEP_TAG: self.step}
        if self.digest is not None:
            tags[ARGS_TAG] = self.digest
        return tags

    def mismatch(self, tags: dict[str, str]) -> str | None:
        """Why a record with ``tags`` was not made by this call, or None if it was.

        A record without the step tag (made by another SDK, or created outside any
        execution and awaited by id) is not judged.
        """
        found = tags.get(STEP_TAG)
        if found is None:
            return None
        if found != self.step:
            return f"the code now calls {self.step!r} but the recorded step ran {found!r}"
        recorded = tags.get(ARGS_TAG)
        if recorded is not None and recorded != self.digest:
            return (
                f"the code now calls {self.step!r} with other arguments than the recorded "
                f"call (digest {self.digest} ≠ recorded {recorded})"
            )
        return None


def _canonical(obj: Any) -> Any:
    if isinstance(obj, BaseException):
        return {"error": type(obj).__qualname__, "args": [repr(a) for a in obj.args]}
    dump = getattr(obj, "model_dump", None)  # pydantic v2 models
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    kind = type(obj)
    return f"<{kind.__module__}.{kind.__qualname__}>"


_encoder = msgspec.json.Encoder(enc_hook=_canonical, order="deterministic")


def digest(*values: Any) -> str:
    """A short, stable digest of ``values`` (16 hex digits of SHA-256)."""
    try:
        data = _encoder.encode(values)
    except (TypeError, ValueError, OverflowError):
        # Unencodable even canonically (a dict with non-string keys of mixed types, a
        # huge int): the types alone, which still tell a changed call from the same one.
        data = repr([type(v).__qualname__ for v in values]).encode()
    return hashlib.sha256(data).hexdigest()[:16]
