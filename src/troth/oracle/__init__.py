"""troth.oracle: the Lean abstract machine at 83d64c3 as an executable reference model.

A plain, in-memory transliteration (``state``, ``resume``, ``promises``, ``tasks``,
``schedules``, ``timeouts``), the reference server's extensions kept apart
(``extensions``: search and preload), and ``Oracle``, which speaks request and response
envelopes. It shares no code with ``troth.engine``: tests hold the engine to it.
"""

from troth.oracle.machine import Oracle

__all__ = ["Oracle"]
