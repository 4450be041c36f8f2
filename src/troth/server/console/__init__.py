"""The web console at ``/console``: executions, their call trees, halted tasks and
schedules, and the operator's actions, served by ``troth serve`` itself (docs/console.md).

| route                                  | answer                                            |
|----------------------------------------|---------------------------------------------------|
| ``GET /console``                       | executions, searched by state, function, tag, time |
| ``GET /console/execution?id=``         | one execution: its summary and call tree          |
| ``GET /console/execution/live?id=``    | its changing part, which the page's script refreshes |
| ``GET /console/halted``                | halted tasks, their reasons, *continue*           |
| ``GET /console/schedules``             | schedules and their next run                      |
| ``GET|POST /console/login``, ``POST /console/logout`` | the token cookie (auth on) |
| ``POST /console/actions/{verb}``       | continue, cancel, resolve, reject: confirm, then act |
| ``GET /console/static/{file}``         | the stylesheet and the script                     |

Server-rendered HTML, no build step: pages are small, work without JavaScript, and are
accessible as plain documents. Reads come from the ``Views`` of storage (index-backed) and
from protocol requests; every action is a protocol request sent through ``POST /``'s own
handler with the visitor's token (``calls``). ``--console-read-only`` hides the actions and
refuses their posts.
"""

from __future__ import annotations

from troth.server.console.app import Console

__all__ = ["Console"]
