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
