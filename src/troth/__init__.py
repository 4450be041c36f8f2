"""troth: Distributed Async Await for Python."""

__version__ = "0.1.0"
