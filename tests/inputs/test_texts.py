"""Prompt and prefix files: the shipped sets, and clear errors for malformed input."""

import pytest

from harness.paths import DATA_DIR
from harness.errors import HarnessError
from harness.inputs.texts import load_prefixes, load_prompts
from tests.support import write_jsonl


def test_shipped_sets_are_large_enough():
    assert len(load_prompts(DATA_DIR / "prompts_en.jsonl")) >= 24
    assert len(load_prompts(DATA_DIR / "prompts_zh.jsonl")) >= 12
    assert len(load_prompts(DATA_DIR / "prompts_stories_en.jsonl")) >= 12
    prefixes = load_prefixes(DATA_DIR / "prefixes.jsonl")
    assert sum(p.kind == "neutral" for p in prefixes) >= 40
    assert sum(p.kind == "instruction" for p in prefixes) >= 40
    # 256 GPT-2-style tokens need about 1,200 characters of English; keep a margin.
    assert min(len(p.text) for p in prefixes) >= 1400


def test_limit(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "text": f"task {i}"} for i in range(5)])
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


def test_non_utf8_files_name_file_and_line(tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"id": "a", "text": "fine"}\n{"id": "b", "text": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(HarnessError, match=r"latin\.jsonl:2: not UTF-8 \(byte 0xe9 at column 25\)"):
        load_prompts(latin)
    utf16 = tmp_path / "utf16.jsonl"
    utf16.write_bytes('{"id": "a", "text": "fine"}\n'.encode("utf-16"))
    with pytest.raises(HarnessError, match=r"utf16\.jsonl: the file is UTF-16"):
        load_prompts(utf16)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "text": "fine"}\n')
    assert load_prompts(bom)[0].text == "fine"  # a UTF-8 byte-order mark is accepted


def test_unpaired_surrogate_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", ['{"id": "a", "text": "ok"}', '{"id": "b", "text": "bad \\ud800 here"}'])
    with pytest.raises(HarnessError, match=r"s\.jsonl:2: field 'text' holds an unpaired surrogate"):
        load_prompts(path)


def test_prefix_targets_and_pairs(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"id": "c1", "kind": "instruction", "text": "Say umbrella.", "target": "umbrella", "pair": "u"},
        {"id": "b1", "kind": "neutral", "text": "An umbrella.", "target": "umbrella", "pair": "u"},
    ])
    c1, b1 = load_prefixes(path)
    (c2,) = load_prefixes(write_jsonl(tmp_path / "r.jsonl", [
        {"id": "c2", "kind": "instruction", "text": "Code ZX-9.", "target": "ZX-9", "target_regex": r"ZX-?9"}]))
    assert c1.pair == b1.pair == "u" and c1.goal.present("Two Umbrellas!")
    assert not c1.goal.present("a bumbrella") and not c1.goal.present("umbrellaless")  # whole words only
    assert not c2.goal.present("zx9") and c2.goal.present("ZX9")
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "c", "kind": "instruction", "text": "t", "target_regex": "("}])
    with pytest.raises(HarnessError, match=r"bad\.jsonl:1: prefix 'c': target_regex is not a valid regular expression"):
        load_prefixes(bad)


def test_prefix_subsets_are_reproducible_and_keep_pairs(tmp_path):
    from harness.inputs.texts import select_prefixes

    bank = load_prefixes(DATA_DIR / "prefixes.jsonl")
    a, b = select_prefixes(bank, 3, seed=0), select_prefixes(bank, 3, seed=0)
    assert [p.id for p in a] == [p.id for p in b]
    assert sorted(p.kind for p in a) == ["instruction"] * 3 + ["neutral"] * 3
    assert [p.id for p in select_prefixes(bank, 3, seed=1)] != [p.id for p in a]
    paired = load_prefixes(DATA_DIR / "prefixes_assistant.jsonl")
    chosen = select_prefixes(paired, 4, seed=0)
    assert len(chosen) == 8 and len({p.pair for p in chosen}) == 4
