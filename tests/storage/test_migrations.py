"""Released migrations never change: a database migrated by an older troth must end up
with exactly the schema a fresh one gets. The first migration of each backend is built
from the shared table definitions (``troth.storage.sql.schema``) and a dialect, so an edit
there would silently change what a new database gets; these digests catch it. A schema
change is a new migration appended to each backend's list, with its digest added here."""

from __future__ import annotations

import hashlib

import pytest

from troth.storage.postgres.schema import MIGRATIONS as POSTGRES
from troth.storage.sqlite.schema import MIGRATIONS as SQLITE

RELEASED = {
    "sqlite": (
        "b683cd80758d52b9fd4bc20cc9a6900ddf72368cf1492bc7a03f9b7da40330c2",
        "908f63a86a2b7e691ea1bf06b423d09c25bf29796e56524281e2322af2fd6e24",
        "e1098100f232ae4bb2201fc054e89f4f19db329dbb6fdcecc8089cf33bcb9955",
        "49d8e3f837c7cfef39dac0e8f5c5dcabb30562fa96f137c36a1a081de4b738c7",
    ),
    "pg": (
        "b44aa72b88c823daa58255b86097dfa2575ee6bafedac396b090c102af52116e",
        "86013867e7f0ec2b7a6b7d7dbff5d6f2630b66bfd9662d9bad1b57c1be5a7896",
        "79128835c7b2275e8c8765cd57fce82c26a9638a3f1530e68c93ade7a83055b8",
        "131bb502728b307e3a5a155e5fe288b6088175495e3801bcc94b8602dbc52e4d",
    ),
}


@pytest.mark.parametrize(("backend", "migrations"), [("sqlite", SQLITE), ("pg", POSTGRES)])
def test_released_migrations_are_unchanged(backend: str, migrations: tuple[str, ...]) -> None:
    digests = tuple(hashlib.sha256(m.encode()).hexdigest() for m in migrations)
    assert digests[: len(RELEASED[backend])] == RELEASED[backend]
