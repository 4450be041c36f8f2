"""Optional dependencies, imported where a feature first needs one: a missing one is an
``ImportError`` whose one-line message names the extra that installs it, not a bare
``ModuleNotFoundError`` from deep inside the feature."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtra(ImportError):
    """A feature's optional dependency is not installed; the message says how to add it."""


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``, or raise ``MissingExtra`` naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise MissingExtra(
            f"{feature} needs the {extra} extra: pip install 'troth[{extra}]' "
            f"(no module {e.name!r})"
        ) from None
