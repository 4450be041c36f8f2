"""The two modes an SDK test runs in, as fixture parameters.

Remote mode runs the same SDK code over HTTP to a ``troth serve`` process: the full suite
runs it; the fast suite covers the SDK in embedded mode (``-m "not slow"``).
"""

import pytest

MODES = ["embedded", pytest.param("remote", marks=pytest.mark.slow)]
