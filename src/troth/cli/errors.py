"""What goes wrong in a ``troth`` command, as one line on stderr and an exit code.

The exit codes are a contract with scripts (docs/cli.md lists them):

==  ============================================================================
0   done
1   the execution (or promise) failed: ``invoke --wait`` on a rejected, canceled,
    timed-out or halted execution
2   usage: a bad flag or argument, bad JSON, a request the server refused as invalid (400)
3   unreachable: no answer from the server (or 429, 502, 503, 504 after the retries), or
    the database file cannot be opened
4   refused: the server wants a token (401) or refuses this one (403)
5   not found: no promise, task or schedule of that id (404)
6   conflict: the object is not in a state that allows it (409, 422: a task that is not
    halted, a promise that exists with other data, ...)
7   the server failed (500)
130 interrupted (Ctrl-C), as a shell reports it
==  ============================================================================

argparse itself exits 2 for a bad flag, so a usage error is 2 whichever side finds it.
"""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    UNREACHABLE = 3
    REFUSED = 4
    NOT_FOUND = 5
    CONFLICT = 6
    SERVER = 7
    INTERRUPTED = 130


_BY_STATUS = {
    400: Exit.USAGE,
    401: Exit.REFUSED,
    403: Exit.REFUSED,
    404: Exit.NOT_FOUND,
    409: Exit.CONFLICT,
    413: Exit.USAGE,  # a value over the server's request limit
    422: Exit.CONFLICT,
    # Still over the rate limit, or no backend behind a proxy, after the client's retries.
    429: Exit.UNREACHABLE,
    502: Exit.UNREACHABLE,
    503: Exit.UNREACHABLE,
    504: Exit.UNREACHABLE,
}


class CliError(Exception):
    """A command's failure: ``message`` is the line printed, ``code`` the exit status."""

    def __init__(self, message: str, code: Exit) -> None:
        super().__init__(message)
        self.code = code


def refused(what: str, status: int, message: str) -> CliError:
    """The error for a server's answer ``status`` to a request about ``what``."""
    code = _BY_STATUS.get(status, Exit.SERVER if status >= 500 else Exit.USAGE)
    if code is Exit.NOT_FOUND:
        return CliError(f"{what}: not found", code)
    return CliError(f"{what}: {message} (HTTP {status})", code)
