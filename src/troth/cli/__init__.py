"""The ``troth`` command: one module per subject, each adding its subcommands to the parser
with ``register(commands)``, and each subcommand naming the function that runs it
(``set_defaults(run=...)``).

- ``serve``, ``dev`` (``troth.cli.server``) and ``worker`` (``troth.cli.worker``) run
  processes;
- the operator commands (``promises``, ``tasks``, ``schedules``, ``queues``, ``invoke``)
  reach a server or a database file through ``troth.cli.target`` and print through
  ``troth.cli.output``;
- ``tree`` and ``executions`` read the views (``troth.cli.views``: the server's JSON API,
  or the file's storage) and act through ``troth.views.actions``.

A command fails with a ``CliError``: one line on stderr and the exit code of
``troth.cli.errors.Exit`` (docs/cli.md), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from troth.cli import (
    executions,
    invoke,
    promises,
    queues,
    schedules,
    server,
    tasks,
    tree,
    worker,
)
from troth.cli.errors import CliError, Exit

SUBJECTS = (server, worker, promises, tasks, schedules, queues, invoke, tree, executions)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line too (``--help`` has the rest); argparse gives the
    subcommands' parsers the class of their parent."""

    def error(self, message: str) -> NoReturn:
        self.exit(Exit.USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="troth",
        description="Durable promises and executions over the Resonate protocol.",
        epilog="exit codes: 0 done, 1 the execution failed, 2 usage, 3 unreachable, 4 refused "
        "(auth), 5 not found, 6 conflict, 7 server error (docs/cli.md)",
    )
    parser.add_argument(
        "--version", action="version", version=f"troth {importlib.metadata.version('troth')}"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for subject in SUBJECTS:
        subject.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except CliError as e:
        print(f"troth: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # The reader stopped reading (``troth ... | head``): what it read was printed. Point
        # stdout at nothing so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK
    return code


__all__ = ["CliError", "Exit", "main"]


if __name__ == "__main__":
    sys.exit(main())
