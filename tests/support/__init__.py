"""Reusable test machinery: the harnesses that start real servers and workers, snapshot
building and decoding, the seeded random workload.

Test modules import it as ``tests.support``: ``tests/`` is a package, so pytest puts the
repository root on ``sys.path`` and no test package is importable at the top level.
"""
