"""Every reference resolves inside the repository: a comment or a page that cites a fact names
a section of docs/references.md (or another page) that exists, and nothing cites the
material troth was written from by a path outside the repository.

Links between pages are checked too: a relative link names a file that exists and, with a
``#fragment``, a heading of that page (GitHub's anchors: lower case, punctuation dropped,
spaces as hyphens).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ._support import REPO

SOURCES = [
    path
    for top in ("src", "tests", "docs", "bench", "examples", "interop", "scripts")
    for path in sorted((REPO / top).rglob("*"))
    if path.suffix in {".py", ".md", ".sh", ".mjs"}
    and not {"node_modules", ".venv", "__pycache__"} & set(path.parts)
] + [REPO / "README.md"]
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted(p for p in REPO.glob("*/README.md") if not p.parent.name.startswith(".")),
]

# Paths of the material troth was written from, which is not in the repository.
OUTSIDE = re.compile(r"wire-protocol\.md|spec-properties\.md|daa-docs|shared/reference")
CITATION = re.compile(r"docs/references\.md#([a-z0-9-]+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    found = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.*)", line)):
            text = re.sub(r"[`*_]|\[([^]]*)\]\([^)]*\)", r"\1", heading.group(1)).lower()
            found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def name(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_nothing_cites_a_path_outside_the_repository() -> None:
    this = Path(__file__)
    cited = [
        f"{name(path)}:{n}"
        for path in SOURCES
        if path != this
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not cited


def test_every_citation_of_the_references_names_one_of_its_sections() -> None:
    sections = anchors(REPO / "docs" / "references.md")
    missing = {
        f"{name(path)}: #{anchor}"
        for path in SOURCES
        for anchor in CITATION.findall(path.read_text())
        if anchor not in sections
    }
    assert not missing


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_link_between_pages_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        unheaded = bool(fragment) and linked.suffix == ".md"
        if not linked.exists() or (unheaded and fragment not in anchors(linked)):
            broken.append(target)
    assert not broken
