"""Imported by Python at the startup of a test's child process (its PYTHONPATH holds this
folder): records the process's spans when the test asks for them (tests/tracing/spans.py)."""

import os

if os.environ.get("TROTH_TEST_SPANS"):
    try:
        from tests.tracing.spans import install
    except ImportError:  # an official SDK's own Python, without OpenTelemetry: untraced
        pass
    else:
        install()
