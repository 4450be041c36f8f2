"""A deterministic simulation of SDK workers against the machine.

Seeded workers (real ``Troth`` apps) and the oracle run in one asyncio loop on virtual
time; a seeded scheduler carries every request, reply and message between them and drops,
duplicates and delays them, and crashes workers. See ``simulator.py`` for the shape and
``test_simulation.py`` for what is asserted.
"""
