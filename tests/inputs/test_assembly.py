"""Token-level assembly: exact prefix lengths, identical task tokens, BOS policy, spans."""

import pytest

from harness.errors import HarnessError
from harness.inputs.assembly import assemble, bos_ids, cut_prefix, encode
from harness.inputs.conditions import build_conditions, check_context
from harness.inputs.texts import Prompt
from harness.model.builtin import byte_level_tokenizer

LENGTHS = [8, 32, 64, 128, 256]


def test_prefix_exactly_l_and_task_tokens_identical(any_tokenizer, prompts, prefixes):
    conds = build_conditions(any_tokenizer, prompts[:6], prefixes, groups=["A", "B", "C"], lengths=LENGTHS,
                             separator="\n\n", bos_policy="auto")
    a_of = {c.prompt_id: c.assembled for c in conds if c.group == "A"}
    sep = encode(any_tokenizer, "\n\n")
    assert len(conds) == 6 * (1 + len(prefixes) * len(LENGTHS))
    for c in conds:
        x, a = c.assembled, a_of[c.prompt_id]
        assert x.prefix_len == c.prefix_len
        assert x.input_ids[x.task_start:x.task_end] == a.input_ids[a.task_start:a.task_end]
        assert x.task_end == len(x.input_ids)
        # BOS (when present) is position 0 in every group, and the same token
        assert x.input_ids[:x.n_bos] == a.input_ids[:a.n_bos]
        if c.group != "A":
            prefix = list(x.input_ids[x.prefix_start:x.prefix_end])
            assert prefix[-len(sep):] == sep
            text = next(p.text for p in prefixes if p.id == c.prefix_id)
            assert prefix[:-len(sep)] == encode(any_tokenizer, text)[: c.prefix_len - len(sep)]


def test_bos_policy_follows_tokenizer():
    adds, plain = byte_level_tokenizer(add_bos=True), byte_level_tokenizer(add_bos=False)
    assert bos_ids(adds, "auto") == [adds.bos_token_id]
    assert bos_ids(plain, "auto") == []
    assert bos_ids(plain, "always") == [plain.bos_token_id]
    assert bos_ids(adds, "never") == []


def test_separate_tokenization_differs_from_joined_string(bpe_tokenizer, prompts, prefixes):
    """Guard that the BPE fixture really can merge across the boundary for some pair, so the
    identical-task-token test above is meaningful for it."""
    differs = 0
    for prompt in prompts:
        for prefix in prefixes:
            head = prefix.text[:200]  # cut mid-word: the joined string merges across the cut
            joined = encode(bpe_tokenizer, head + prompt.text)
            separate = encode(bpe_tokenizer, head) + encode(bpe_tokenizer, prompt.text)
            differs += joined != separate
    assert differs > 0


def test_spans_of_a_and_x():
    a = assemble([0], [], [5, 6, 7])
    assert (a.prefix_start, a.prefix_end, a.task_start, a.task_end) == (1, 1, 1, 4)
    x = assemble([0], [9, 9], [5, 6, 7])
    assert x.input_ids == (0, 9, 9, 5, 6, 7)
    assert (x.prefix_start, x.prefix_end, x.task_start, x.task_end) == (1, 3, 3, 6)


def test_cut_prefix_errors_and_repeat():
    with pytest.raises(HarnessError, match="'short'.*too short for length 10"):
        cut_prefix([1, 2, 3], [4], 10, name="short")
    assert cut_prefix([1, 2, 3], [4], 8, name="short", repeat=True) == [1, 2, 3, 1, 2, 3, 1, 4]
    with pytest.raises(HarnessError, match="positive"):
        cut_prefix([1, 2, 3], [4], 0, name="p")
    with pytest.raises(HarnessError, match="separator"):
        cut_prefix([1, 2, 3], [4, 4], 1, name="p")


def test_a_group_without_prefixes_is_refused(prompts, prefixes):
    tok = byte_level_tokenizer(add_bos=True)
    only_b = [p for p in prefixes if p.kind == "neutral"]
    with pytest.raises(HarnessError, match="no 'instruction' prefixes"):
        build_conditions(tok, prompts, only_b, groups=["A", "C"], lengths=[8], separator="\n\n", bos_policy="auto")


def test_special_token_strings_in_data_stay_text():
    tok = byte_level_tokenizer(add_bos=True)
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    text = "The end <|endoftext|> of the story"
    assert eot not in encode(tok, text)  # data stays data: no real end-of-text in the middle of a prompt
    assert tok.decode(encode(tok, text)) == text
    assert eot in encode(tok, text, parse_special=True)  # the documented switch (special_tokens=control)
    conds = build_conditions(tok, [Prompt("p", text)], [], groups=["A"], lengths=[8], separator="\n\n",
                             bos_policy="auto")
    assert list(conds[0].assembled.input_ids).count(eot) == 1  # only the real BOS


def test_context_window_check(prefixes):
    tok = byte_level_tokenizer(add_bos=True)
    conds = build_conditions(tok, [Prompt("p", "Hello there")], prefixes, groups=["A", "B"], lengths=[64],
                             separator="\n\n", bos_policy="auto")
    longest = max(len(c.assembled.input_ids) for c in conds)
    check_context(conds, 10, longest + 10)  # fits exactly
    with pytest.raises(HarnessError, match="context window of"):
        check_context(conds, 11, longest + 10)
