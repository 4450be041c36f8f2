"""troth.views: what an operator sees of the store, as pure data.

An execution's promises read as a call tree (``tree``), a page of executions
(``executions``), values decoded for display (``values``), and the operator's actions as
standard protocol requests (``actions``). No I/O and nothing but ``troth.protocol``: the
storage backends answer the queries (``troth.storage.views``), the server's JSON API, the
CLI and the console show the results.
"""
