"""``troth tree ID [--watch]``: an execution's call tree in the terminal.

Every promise of the execution under its parent (steps, rpc children, sleeps, awaited
promises, detached children, failed attempts, halts, its cancel promise), each with its
state, start and settle time, duration, attempts and last error, drawn with ``rich.tree``.
``--watch`` redraws it every ``--interval`` seconds until the execution settles (or
Ctrl-C). ``--json`` prints the tree as the API answers it (``troth.views.tree.to_json``).
"""

from __future__ import annotations

import argparse
import asyncio

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.segment import Segment
from rich.style import Style
from rich.tree import Tree

from troth.cli import output
from troth.cli.errors import CliError, Exit
from troth.cli.target import Commands, Target, connected, options
from troth.cli.views import Reader, reader
from troth.protocol.kinds import Kind
from troth.protocol.records import PromiseState, TaskState
from troth.views.tree import Node, queue_question, to_json, with_queue

_STATES = {
    PromiseState.PENDING: Style(color="yellow"),
    PromiseState.RESOLVED: Style(color="green"),
    PromiseState.REJECTED: Style(color="red"),
    PromiseState.REJECTED_CANCELED: Style(color="magenta"),
    PromiseState.REJECTED_TIMEDOUT: Style(color="red"),
}
_BOLD, _FUNCTION, _DIM = Style(bold=True), Style(color="cyan"), Style(dim=True)
_NEWLINE = Segment.line()


def register(commands: Commands) -> None:
    tree = commands.add_parser(
        "tree",
        parents=[options()],
        help="an execution's call tree",
        description="An execution's call tree: every child with its state, times, attempts"
        " and last error.",
    )
    tree.add_argument("id", help="the execution's id")
    tree.add_argument("--watch", action="store_true", help="follow it live until it settles")
    tree.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="--watch's refresh"
    )
    tree.set_defaults(run=connected(_tree))


async def _tree(target: Target, args: argparse.Namespace) -> int:
    if args.watch and args.json:
        raise CliError("--watch draws for a terminal: leave out --json", Exit.USAGE)
    if args.interval <= 0:
        raise CliError(f"--interval must be positive, got {args.interval}", Exit.USAGE)
    views = reader(target)
    try:
        root = await _read(views, target, args.id)
        if not args.watch:
            output.emit(args, to_json(root) if args.json else None, lambda: draw(root))
            return Exit.OK
        with Live(draw(root), console=Console(), auto_refresh=False) as live:
            while root.state == PromiseState.PENDING:
                await asyncio.sleep(args.interval)
                root = await _read(views, target, args.id)
                live.update(draw(root), refresh=True)
        return Exit.OK
    finally:
        await views.close()


async def _read(views: Reader, target: Target, id: str) -> Node:
    """The tree, and where its execution waits if it is queued (``queue.get``)."""
    root = await views.tree(id)
    question = queue_question(root)
    if question is None:
        return root
    return with_queue(root, await target.send(Kind.QUEUE_GET, question))


def draw(root: Node) -> Tree:
    """The tree for the terminal: a node's kind, function, id and state on its first line,
    its times and attempts on the second, then a stall of the event loop and its last
    error."""
    tree = Tree(_label(root), guide_style="dim")
    _grow(tree, root)
    return tree


def _grow(branch: Tree, node: Node) -> None:
    for child in node.children:
        _grow(branch.add(_label(child)), child)


class _Label:
    """A node's lines as ready segments. rich would measure and wrap a ``Text`` label for
    every node, most of the cost of drawing a large tree; these lines are cut at the
    terminal's edge instead."""

    def __init__(self, segments: list[Segment]) -> None:
        self.segments = segments

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        return self.segments


def _label(node: Node) -> _Label:
    halted = node.task == TaskState.HALTED
    line = [Segment(node.kind, _BOLD)]
    if node.function:
        line.append(Segment(f" {node.function}", _FUNCTION))
    line.append(Segment(f"  {node.id}  "))
    if halted:
        line.append(Segment("halted", _STATES[PromiseState.REJECTED]))
    elif node.queued is not None:
        line.append(Segment(node.queued.text(), _STATES[PromiseState.PENDING]))
    else:
        line.append(Segment(node.state.value, _STATES[node.state]))
    times = f"started {output.instant(node.created_on)}"
    if node.settled_on is not None:
        times += f", took {node.duration_ms} ms"
    line += [_NEWLINE, Segment(times, _DIM)]
    if node.attempts is not None and node.attempts > 1:
        line.append(Segment(f", attempt {node.attempts}", _STATES[PromiseState.PENDING]))
    if node.stalled_ms is not None:
        blocked = f"warning: blocked the event loop for {node.stalled_ms / 1000:.1f} s"
        line += [_NEWLINE, Segment(blocked, _STATES[PromiseState.PENDING])]
    if node.last_error:
        line += [_NEWLINE, Segment(f"error: {node.last_error}", _STATES[PromiseState.REJECTED])]
    return _Label(line)
