"""``troth worker module:app``: run a worker process for a ``Troth`` app."""

from __future__ import annotations

import argparse

from troth.cli.target import Commands


def register(commands: Commands) -> None:
    worker_help = "run a worker process for a troth app"
    worker = commands.add_parser("worker", help=worker_help, description=worker_help)
    worker.add_argument("app", metavar="MODULE:APP", help="the Troth app, e.g. shop:app")
    worker.add_argument(
        "--url", help="the server(s) to work for, comma-separated (env TROTH_URL; else embedded)"
    )
    worker.add_argument("--group", help="the worker group to serve (env TROTH_GROUP)")
    worker.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from troth.sdk import worker_main

    return worker_main(args.app, url=args.url, group=args.group)
