"""The fixtures every test package may use, from ``tests.support.fixtures``.

Package conftests hold only what their own package needs; none imports another's.
"""

pytest_plugins = ["tests.support.fixtures"]
