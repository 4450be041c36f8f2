"""troth: Distributed Async Await for Python."""

from typing import Any

__version__ = "0.1.0"

__all__ = ["Context", "Troth"]


def __getattr__(name: str) -> Any:
    # The SDK's public names, imported on first use so that the server (which imports
    # ``troth.protocol`` and friends) does not load the SDK.
    if name in __all__:
        from troth import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module 'troth' has no attribute {name!r}")
