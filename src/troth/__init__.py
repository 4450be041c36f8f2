"""troth: Distributed Async Await for Python.

The public API is what this package exports: the app (``Troth``), the context of a
durable function (``Context``), handles and futures, ``Options``, the retry policies,
``Saga`` and the error types. Everything under ``troth.sdk``, ``troth.server``, ``troth.engine`` and
``troth.storage`` is internal and may change; ``troth.testing`` (virtual time) and
``troth.protocol`` (the wire records) are public too.
"""

from troth import sdk as _sdk
from troth.sdk import *  # noqa: F403 (the SDK's curated public names, listed in its __all__)

__version__ = "0.1.0"

__all__ = ["__version__"]
__all__ += _sdk.__all__
