"""Reusable test machinery: snapshot building and decoding, and the seeded random workload.

Test modules import it as ``support`` (pytest puts ``tests/`` on ``sys.path``, because
``tests/`` itself is not a package).
"""
