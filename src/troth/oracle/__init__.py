"""troth.oracle: the Lean abstract machine at 83d64c3 as an executable reference model.

A plain, in-memory transliteration (``state``, ``resume``, ``promises``, ``tasks``,
``schedules``, ``timeouts``), the reference server's extensions kept apart
(``extensions``: search and preload), and ``Oracle``, which speaks request and response
envelopes. It shares no code with ``troth.engine``: tests hold the engine to it.

Where Lean repeats itself, so does the oracle: the settlement (scrub, unblocks, resumes) is
written out in ``promise.settle``, ``task.fulfill`` and the promise timeout as it is in
their three Lean files, so each handler reads line by line against its own file. The
engine, by contrast, writes it once (``troth.engine.settlement``).
"""

from troth.oracle.machine import Oracle

__all__ = ["Oracle"]
