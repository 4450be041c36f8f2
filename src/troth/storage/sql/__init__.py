"""troth.storage.sql: what the SQL backends share, written once.

``dialect`` holds the few things SQLite and PostgreSQL spell differently; ``schema`` the
tables (each backend's first migration); ``queries`` every statement the stores run;
``store`` the engine's effects over them, which ``troth.storage.sqlite`` and
``troth.storage.postgres`` subclass; ``outbox`` the delivery side's read; ``connection``
what all of it needs of a driver's connection.
"""
