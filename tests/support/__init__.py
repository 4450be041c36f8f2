"""Reusable test machinery, one module per job:

- ``servers``: ``TrothServer``, the one ``troth serve`` harness, and ``serve`` on either
  backend (``BACKENDS``); ``processes``: worker processes, a new user's environment, RSS;
- ``ports``: a free port, a loopback host name; ``waiting``: ``eventually``;
- ``sse``: an SSE client that sees the bytes on the wire; ``push``: an HTTP push target;
- ``tokens``: key pairs and JWTs; ``postgres``: fresh databases and schemas on the cluster of
  ``TROTH_TEST_PG_URL``; ``storage``: the storage backends the storage suite runs over;
- ``wire``: requests built by hand; ``fuzzing``: hypothesis strategies; ``workload``: the
  seeded random workload; ``snapshots``: snapshots decoded or built; ``crash``: what a killed
  writer must leave;
- ``fixtures``: the fixtures every test package may use (``tests/conftest.py`` loads them).

Test modules import it as ``tests.support``: ``tests/`` is a package, so pytest puts the
repository root on ``sys.path`` and no test package is importable at the top level.
"""
