"""``troth serve`` and ``troth dev``: the server, from flags and the environment.

- ``troth serve``: serve on port 8001, storing to ``./troth-server.db`` (the embedded SDK
  uses ``./troth.db``, so the two never open each other's data); on ``127.0.0.1`` unless
  auth is on (then ``0.0.0.0``) or ``--host``/``TROTH_HOST`` names an address.
- ``troth dev``: the same with debug mode on, a throwaway database in a temporary
  directory (deleted on exit) unless ``--db`` names one, and on ``127.0.0.1`` unless told.
Every setting of ``ServerConfig`` is a flag (``--tasks-retry-timeout 5000``) and an
environment variable (``TROTH_TASKS_RETRY_TIMEOUT=5000``); a flag beats the environment,
which beats the default. ``troth dev`` ignores ``TROTH_DB``, so it never touches a real
database by accident.

The server's modules are imported when a server command runs (the base install is the SDK),
and without the ``server`` extra that command says which extra to install instead of
failing with a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import sys
import tempfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from troth.cli.target import Commands
    from troth.server.config import ServerConfig

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
# What ``pip install 'troth[server]'`` adds; a server command missing one says so.
_SERVER_EXTRA = ("uvicorn", "jwt")
_NEEDS_EXTRA = "needs the server extra: pip install 'troth[server]'"
_LOG_LEVELS = ("debug", "info", "warning", "error")
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# Defaults that depend on other settings, as the help shows them (see ``ServerConfig.bind``).
_SERVE_DEFAULTS = {"host": "127.0.0.1, or 0.0.0.0 with auth on"}
# What ``troth dev`` does differently, as its help shows it (see ``config_from``, ``main``).
_DEV_DEFAULTS = {
    "db": "a temporary file, deleted on exit",
    "debug": True,
    "host": "127.0.0.1",
    "push_allow": "public,loopback",
}
# Environment variables ``troth dev`` does not read (see ``config_from``).
_DEV_IGNORES_ENV = {"db"}


def _settings() -> list[dataclasses.Field[Any]]:
    from troth.server.config import ServerConfig  # light: a dataclass, no server packages

    return list(dataclasses.fields(ServerConfig))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _env(name: str) -> str:
    return "TROTH_" + name.upper()


def _kind(setting: dataclasses.Field[Any]) -> str:
    """``bool``, ``int`` or ``str``: the field annotations are strings (future annotations)."""
    annotation = str(setting.type)
    return "bool" if annotation == "bool" else "int" if annotation == "int" else "str"


def register(commands: Commands) -> None:
    serve_help = "run the server"
    dev_help = "run the server in debug mode on a throwaway database"
    extra = " (installed by pip install 'troth[server]')"
    serve = commands.add_parser("serve", help=serve_help, description=serve_help + extra)
    dev = commands.add_parser("dev", help=dev_help, description=dev_help + extra)
    for command, defaults in ((serve, _SERVE_DEFAULTS), (dev, _DEV_DEFAULTS)):
        command.set_defaults(run=functools.partial(_run, command))
        for setting in _settings():
            help = setting.metadata["help"]
            if not (command is dev and setting.name in _DEV_IGNORES_ENV):
                help += f" (env {_env(setting.name)})"
            default = defaults.get(setting.name, setting.default)
            if _kind(setting) == "bool":
                help += f" [default: {'on' if default else 'off'}]"
                command.add_argument(
                    _flag(setting.name), action=argparse.BooleanOptionalAction, help=help
                )
            else:
                is_int = _kind(setting) == "int"
                in_ms = "ms" in setting.metadata["help"].split()
                if default is not None:
                    help += f" [default: {default}]"
                command.add_argument(
                    _flag(setting.name),
                    type=int if is_int else str,
                    metavar=("MS" if in_ms else "N") if is_int else _metavar(setting.name),
                    help=help,
                )


def _metavar(name: str) -> str:
    """``--db PATH|URL``, ``--server-url URL``, ``--log-level LEVEL``."""
    if name == "auth_publickey":
        return "PATH|none"
    if name == "push_allow":
        return "LIST"
    return "PATH|URL" if name == "db" else name.rsplit("_", 1)[-1].upper()


def _from_env(setting: dataclasses.Field[Any], raw: str) -> Any:
    kind = _kind(setting)
    if kind == "bool":
        if raw.strip().lower() in _TRUE:
            return True
        if raw.strip().lower() in _FALSE:
            return False
        raise ValueError(f"{_env(setting.name)}={raw!r} is not a boolean")
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{_env(setting.name)}={raw!r} is not an integer") from None
    return raw


def config_from(args: argparse.Namespace, environ: dict[str, str]) -> ServerConfig:
    """Flags over environment over defaults; ``dev`` forces debug and ignores TROTH_DB."""
    from troth.server.config import ServerConfig

    values: dict[str, Any] = {}
    dev = args.command == "dev"
    for setting in _settings():
        flag = getattr(args, setting.name)
        if flag is not None:
            values[setting.name] = flag
        elif _env(setting.name) in environ and not (dev and setting.name in _DEV_IGNORES_ENV):
            values[setting.name] = _from_env(setting, environ[_env(setting.name)])
    if dev and args.debug is None:
        values["debug"] = True
    if dev and "host" not in values:
        values["host"] = "127.0.0.1"  # debug.reset must not be one request away, auth or not
    if dev and "push_allow" not in values:
        values["push_allow"] = _DEV_DEFAULTS["push_allow"]  # a receiver on this machine works
    config = ServerConfig(**values)
    for name in ("auth_token", "push_auth_token", "metrics_token"):
        token = getattr(config, name)
        # A bearer token is a b64token (RFC 6750): no spaces or line breaks to split a header.
        if token is not None and not _TOKEN.fullmatch(token):
            raise ValueError(
                f"{_flag(name)} ({_env(name)}) must be a non-empty token of letters, digits"
                " and -._~+/ (then = padding)"
            )
    if config.log_level.lower() not in _LOG_LEVELS:
        raise ValueError(f"log level {config.log_level!r} is not one of {', '.join(_LOG_LEVELS)}")
    return config


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        config = config_from(args, dict(os.environ))
    except ValueError as e:
        parser.error(str(e))
    try:
        from troth.server.serve import run
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] not in _SERVER_EXTRA:
            raise
        print(f"troth {args.command} {_NEEDS_EXTRA} (no module {e.name!r})", file=sys.stderr)
        return 2

    if args.command == "dev" and args.db is None:
        with tempfile.TemporaryDirectory(prefix="troth-dev-") as scratch:
            return run(dataclasses.replace(config, db=os.path.join(scratch, "troth-dev.db")))
    return run(config)
