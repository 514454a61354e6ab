"""Every relative link of the README, CHANGELOG, docs/*.md and benchmarks/RESULTS.md names a
file of the checkout (the reference moved from the README into docs/; a moved page must not
leave a link behind)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    ROOT / "benchmarks" / "RESULTS.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```$", re.S | re.M)


def _relative_links(document: Path) -> list[str]:
    prose = _FENCE.sub("", document.read_text())
    links = [link.split("#", 1)[0] for link in _LINK.findall(prose)]
    return [link for link in links if link and "://" not in link]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: str(d.relative_to(ROOT)))
def test_relative_links_name_files_of_the_checkout(document: Path) -> None:
    missing = [link for link in _relative_links(document) if not (document.parent / link).exists()]
    assert missing == []


def test_the_docs_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert {page for page in pages if f"]({page})" not in index} == set()
