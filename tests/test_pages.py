"""Every picture and local link of a tracked Markdown page points at a file that is there (issue 70:
the shipped demo reports linked 13 figures of a folder that was never copied beside them). Code
spans and fenced blocks are left out: they show commands and paths, not links."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def tracked_pages() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist): the pages on disk
        return sorted(p for p in ROOT.rglob("*.md") if ".venv" not in p.parts and "outputs" not in p.parts)
    return [ROOT / name for name in listed.stdout.split()]


def local_targets(text: str) -> list[str]:
    """The local targets of the page's links and pictures (not URLs, not anchors within the page)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t.split("#")[0] for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", t)]


def test_the_link_reader_finds_pictures_and_links_and_skips_code():
    page = "![a](figures/x.png) [b](../docs/y.md#z) [c](https://e.org) `![d](no.png)`\n```\n[e](no.md)\n```\n"
    assert local_targets(page) == ["figures/x.png", "../docs/y.md"]


@pytest.mark.parametrize("page", tracked_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_local_link_of_a_tracked_page_exists(page):
    missing = [t for t in local_targets(page.read_text(encoding="utf-8")) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links {len(missing)} missing file(s): {missing[:5]}"


def test_every_page_the_harness_writes_names_the_glossary_under_its_title():
    """Issue 70: a glossary page every report links. A page starts with ``heading`` (title, the
    glossary's place, the reader's notes); a page title written any other way would skip it."""
    from harness.reporting.markdown import GLOSSARY, heading

    assert heading("T", ["n"]) == ["# T", "", GLOSSARY, "", "> **Note:** n"]
    assert "docs/glossary.md" in GLOSSARY and (ROOT / "docs" / "glossary.md").is_file()
    writers = [*sorted((ROOT / "harness" / "reporting").glob("*.py")), ROOT / "harness" / "runs" / "plan.py"]
    titled = [p.name for p in writers if p.name != "markdown.py" and re.search(r"""\[f?["']# """, p.read_text())]
    assert not titled, f"pages titled without heading(): {titled}"
    assert sum("heading(" in p.read_text() for p in writers) >= 7  # report, claims, plan, corpora, detect, heads, leak


@pytest.mark.parametrize("term", ["A, B, C", "placement", "triple", "the three contamination claims", "drift",
                                  "edit distance", "output KL", "capture", "redistribution", "sink", "survival",
                                  "noise floor", "near tie", "ceiling", "prompts x prefixes", "prefix-level SD",
                                  "power", "not estimable", "Wilson", "MOVER", "effective units", "verdict", "C - B",
                                  "pilot", "run directory"])
def test_the_glossary_defines_the_words_the_reports_use(term):
    text = (ROOT / "docs" / "glossary.md").read_text()
    assert f"**{term}" in text, f"docs/glossary.md does not define {term!r}"


def test_the_docs_index_names_every_command_and_the_readme_every_results_page():
    from harness.cli import COMMANDS

    index = (ROOT / "docs" / "index.md").read_text()
    assert not [c for c in COMMANDS if f"`{c}`" not in index and f"`harness {c}`" not in index]
    readme = (ROOT / "README.md").read_text()
    pages = [p.parent.name for p in (ROOT / "results").glob("*/README.md")]
    assert pages and not [p for p in pages if f"results/{p}/" not in readme], "the README omits a results page"
