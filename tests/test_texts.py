"""Prompt and prefix files: the shipped sets, and clear errors for malformed input."""

import pytest

from harness.config import DATA_DIR
from harness.errors import HarnessError
from harness.texts import load_prefixes, load_prompts

from .conftest import write_jsonl


def test_shipped_sets_are_large_enough():
    assert len(load_prompts(DATA_DIR / "prompts_en.jsonl")) >= 24
    assert len(load_prompts(DATA_DIR / "prompts_zh.jsonl")) >= 12
    assert len(load_prompts(DATA_DIR / "prompts_stories_en.jsonl")) >= 12
    prefixes = load_prefixes(DATA_DIR / "prefixes.jsonl")
    assert sum(p.kind == "neutral" for p in prefixes) >= 5
    assert sum(p.kind == "instruction" for p in prefixes) >= 5
    # 256 GPT-2-style tokens need about 1,200 characters of English; keep a margin.
    assert min(len(p.text) for p in prefixes) >= 1400


def test_limit(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "text": "x"} for i in range(5)])
    assert [p.id for p in load_prompts(path, limit=2)] == ["p0", "p1"]
    with pytest.raises(HarnessError, match="positive"):
        load_prompts(path, limit=0)


@pytest.mark.parametrize(
    "lines, message",
    [
        ([], "no entries"),
        (['{"id": "a", "text": "ok"}', '{"id": "b", "text": '], r"p\.jsonl:2: not valid JSON"),
        (['["a list"]'], r"p\.jsonl:1: expected a JSON object"),
        (['{"id": "a", "text": ""}'], r"p\.jsonl:1: missing or empty string field 'text'"),
        (['{"id": "a", "text": "x"}', "", '{"id": "a", "text": "y"}'], r"p\.jsonl:3: duplicate id 'a'"),
    ],
)
def test_malformed_prompt_files_name_file_and_line(tmp_path, lines, message):
    path = write_jsonl(tmp_path / "p.jsonl", lines)
    with pytest.raises(HarnessError, match=message):
        load_prompts(path)


def test_missing_file_and_bad_kind(tmp_path):
    with pytest.raises(HarnessError, match="file not found"):
        load_prompts(tmp_path / "nope.jsonl")
    path = write_jsonl(tmp_path / "x.jsonl", [{"id": "a", "kind": "friendly", "text": "t"}])
    with pytest.raises(HarnessError, match="kind 'friendly'"):
        load_prefixes(path)
