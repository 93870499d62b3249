"""The README stays a README (issue 29, item 13): short, with the sections its readers need, and every link in the
docs lands on a file and a heading that exist (the long sections moved to docs/, one page per reader)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from medic.core.models import Outcome

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_WORDS = 2_500
# The pages whose links are checked: the README, every docs page, the components' contracts.
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md")),
         *(ROOT / name / "README.md" for name in ("agent", "probe", "cli", "sim", "functions/medic/ledger"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(page: Path) -> str:
    """The page without its code (fenced blocks and inline spans), where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL))


def _anchors(page: Path) -> set[str]:
    return {_slug(match) for match in re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)}


def test_the_readme_stays_under_its_word_budget():
    # Given the README, counted as `wc -w` counts words
    words = len(README.read_text().split())
    # Then it stays a first screen and a checklist: longer material belongs in docs/
    assert words < MAX_README_WORDS, f"README.md has {words} words; move the longer material to a docs/ page"


def test_the_readme_has_the_sections_its_readers_need():
    headings = re.findall(r"^## (.+)$", README.read_text(), re.MULTILINE)
    for needed in ("Two commands", "What Medic does", "What it costs", "What Medic does not do", "Deploy checklist",
                   "Remediation log"):
        assert needed in headings, needed
    # The first screen: what it does and what it costs come before the checklist
    assert headings.index("What it costs") < headings.index("Deploy checklist")


def test_the_readme_names_every_outcome_and_the_log_page_documents_each():
    readme = README.read_text()
    log_page = (ROOT / "docs" / "remediation-log.md").read_text()
    for outcome in Outcome:
        assert f"`{outcome.value}`" in readme, outcome
        assert f"`{outcome.value}`" in log_page, outcome


def test_the_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        if page.name != "README.md":
            assert f"]({page.relative_to(ROOT / 'docs').as_posix()})" in index, page


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_lands_on_a_file_and_a_heading(page):
    broken = []
    for target in LINK.findall(_prose(page)):
        if re.match(r"(https?:|mailto:)", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no such heading in {file.relative_to(ROOT)}")
    assert not broken, broken
