"""Concurrent histories and a linearizability check against the oracle.

``history`` records clients racing on a few promises and tasks against a ``targets`` backend;
``checker`` searches for a sequential run of the oracle that explains the history.
"""
