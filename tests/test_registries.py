"""Placements, isolation modes and model sources are registries: the config's choices are read
from them, a name none of them knows is an error wherever it enters, and a new entry is one
definition that the rest of the harness picks up."""

from __future__ import annotations

import pytest

from harness.config import IsolationMode, Placement, compose, validate
from harness.errors import HarnessError
from harness.inputs import chat
from harness.inputs.chat import CHAT_PLACEMENTS, PLACEMENTS, ChatConfig, chat_layout
from harness.inputs.conditions import build_conditions
from harness.inputs.isolation import CONFIGURABLE, MODES, Isolation, isolations
from harness.inputs.texts import Prefix, Prompt
from harness.model.builtin import byte_level_tokenizer
from harness.model.sources import SOURCES, source_for
from tests.inputs.test_chat import chat_tokenizer
from tests.support import contributing_example


def test_the_configs_choices_are_the_registries():
    assert [p.value for p in Placement] == ["auto", *PLACEMENTS]
    assert [m.value for m in IsolationMode] == list(CONFIGURABLE)
    assert set(CONFIGURABLE) < set(MODES)  # per-head modes are set by causal-heads, not the config


@pytest.mark.parametrize("override, says", [
    ("prefix.placement=footnote", "prefix.placement"),
    ("isolation=[none,masked]", "isolation"),
    ("model.name_or_path='no such model?'", "is none of: builtin"),
    ("model.name_or_path=builtin:tiny-nosuchfamily", "is none of: builtin"),
])
def test_an_unknown_name_is_refused_before_any_model_loads(override, says):
    with pytest.raises(Exception, match=says):  # Hydra's error at composition for a choice, ours for a model
        validate(compose(["experiment=quick", override]))


def test_an_unknown_placement_or_mode_is_an_error_in_the_code_too():
    tok = byte_level_tokenizer(add_bos=True)
    with pytest.raises(HarnessError, match="not one of"):
        build_conditions(tok, [Prompt("p", "Hi.")], [], groups=["A"], lengths=[], separator="\n",
                         bos_policy="auto", placement="footnote")
    with pytest.raises(HarnessError, match="not a chat placement"):
        chat_layout(tok, "raw")  # raw is a placement, but not one inside a chat template
    with pytest.raises(HarnessError, match="isolation mode 'masked' is not one of"):
        Isolation("masked")


def test_a_mode_companion_and_beta_expansion_come_from_the_registry():
    settings = isolations(["decay", "delimit"], [1.0, 4.0])
    assert [s.label for s in settings] == ["decay(1)", "decay(4)", "delimit", "delimit_control"]
    assert Isolation("mask_heads", heads=((0, 1),), head_set="top1").label == "mask_heads(top1)"
    assert Isolation("only_heads").per_head == "visible" and Isolation("mask").per_head is None
    assert Isolation("mask_reset").resets_positions and not Isolation("mask").resets_positions


def test_a_new_placement_is_one_definition(monkeypatch):
    """A placement registered with one call is laid out and assembled like the shipped ones."""
    monkeypatch.setitem(PLACEMENTS, "quoted", chat.Placement(
        "quoted", "the prefix quoted in the task's user message", lambda cfg, system, base, task: [
            *base, {"role": "user", "content": "> " + chat.PREFIX_SLOT + "\n\n" + chat.TASK_SLOT}],
        lambda template, cfg: None))
    monkeypatch.setattr(chat, "CHAT_PLACEMENTS", (*CHAT_PLACEMENTS, "quoted"))
    tok = chat_tokenizer("qwen3")
    conditions = build_conditions(tok, [Prompt("p", "Write a line.")], [Prefix("n", "neutral", "A quiet harbour.")],
                                  groups=["A", "B"], lengths=[3], separator="\n\n", bos_policy="auto",
                                  placement="quoted", chat=ChatConfig())
    a, x = (c.assembled for c in conditions)
    assert x.input_ids[:x.block_start] + x.input_ids[x.block_end:] == a.input_ids  # one block inserted
    assert tok.decode(x.input_ids[x.block_start:x.block_end]).startswith("> ")


def test_contributings_new_placement_example_works():
    """The worked example in CONTRIBUTING.md ("A placement"), run as written: the registered
    placement is a chat placement that conditions are built with."""
    code = contributing_example("**A placement**")
    try:
        exec(code, {"register_placement": chat.register_placement, "PREFIX_SLOT": chat.PREFIX_SLOT,
                    "TASK_SLOT": chat.TASK_SLOT})
        assert "quoted" in chat.CHAT_PLACEMENTS
        tok = chat_tokenizer("qwen3")
        conditions = build_conditions(tok, [Prompt("p", "Write a line.")], [Prefix("n", "neutral", "A quiet harbour.")],
                                      groups=["A", "B"], lengths=[3], separator="\n\n", bos_policy="auto",
                                      placement="quoted", chat=ChatConfig())
        a, x = (c.assembled for c in conditions)
        assert x.input_ids[:x.block_start] + x.input_ids[x.block_end:] == a.input_ids
        assert tok.decode(x.input_ids[x.block_start:x.block_end]).startswith("> ")
    finally:
        PLACEMENTS.pop("quoted", None)
        chat.CHAT_PLACEMENTS = tuple(n for n, p in PLACEMENTS.items() if p.messages is not None)


@pytest.mark.parametrize("name, gguf, source", [
    ("builtin:tiny-llama", None, "builtin"),
    ("demo", None, "shipped"),
    ("./models/mine", None, "local"),
    ("/abs/path/model", None, "local"),
    ("HuggingFaceTB/SmolLM2-135M-Instruct", None, "hub"),
    ("gpt2", None, "hub"),
    ("SmolLM2", object(), "gguf"),
])
def test_each_model_source_claims_its_names(name, gguf, source):
    assert source_for(name, gguf).name == source
    assert source in SOURCES


def test_a_new_isolation_mode_is_one_definition(monkeypatch):
    """A mode registered with one call is built into conditions and applied by the engine: decay
    with positions restarting, which at a huge beta must compute what mask_reset computes."""
    from harness.inputs import isolation
    from harness.model.builtin import build_tiny
    from harness.model.masks import KeyBias
    from tests.support import engine_rig

    monkeypatch.setitem(MODES, "decay_reset", isolation.Mode("decay_reset", "decay, positions restarting",
                                                             bias="beta", resets_positions=True))
    settings = isolations(["decay_reset", "mask_reset"], [1e4])
    assert [s.label for s in settings] == ["decay_reset(10000)", "mask_reset"]
    assert KeyBias.of(settings[0], 1, 5).value == -1e4 and settings[0].resets_positions
    model, tok = build_tiny("llama", seed=1)
    prompts, prefixes = [Prompt("p", "The robot opened the door.")], [Prefix("n", "neutral", "A quiet harbour town.")]
    results, _, _ = engine_rig(model, tok, prompts, prefixes, lengths=[6], max_new=4, isolations=settings,
                               groups=("A", "B"))
    by_mode = {r.condition.isolation.mode: r for r in results if r.condition.group == "B"}
    new, known = by_mode["decay_reset"], by_mode["mask_reset"]
    assert new.continuation.ids == known.continuation.ids
    assert abs(new.output_kl - known.output_kl) < 1e-5


def test_a_new_model_source_is_one_definition(monkeypatch, tmp_path):
    from pathlib import Path

    from harness.model import sources
    from harness.model.builtin import build_tiny
    from harness.model.loading import load_model

    model, tok = build_tiny("llama", seed=0)
    model.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    monkeypatch.setattr(sources, "SOURCES", {"zoo": sources.ModelSource(
        "zoo", "zoo:<name>, a model saved in a folder of models", lambda name, gguf: name.startswith("zoo:"),
        lambda name, gguf: sources._directory(Path(tmp_path) / name.removeprefix("zoo:"))), **SOURCES})
    loaded = load_model("zoo:tiny", device="cpu")
    assert loaded.resolved_revision == sources.local_files_sha256(tmp_path / "tiny")
    assert source_for("zoo:tiny").name == "zoo"
