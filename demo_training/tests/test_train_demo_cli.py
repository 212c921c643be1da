"""``harness-train-demo``'s command line, generated from the settings dataclasses
(``demo_training.settings``), against the hand-written parser it replaced: the same options with the
same defaults and kinds, and the shipped models' recorded commands still give their recorded settings."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from demo_training.settings import CardEvaluation, MixSettings, TrainSettings, build_parser, parse_command, read_options
from demo_training.tests.support import RECORDS
from demo_training.train_demo import main
from harness.paths import DATA_DIR

# The specification: every option of the hand-written parser (train_demo.py before the options were
# generated, commit 4b86348) as (option, action, type, default). "ints": the old parser kept the text
# ("6,16") and main split it into a tuple of ints; the generated parser converts it while parsing.
OLD_OPTIONS = [
    ("--corpus", "store", "Path", None),
    ("--out", "store", "Path", None),
    ("--recard", "store", "Path", None),
    ("--re-evaluate", "store", "Path", None),
    ("--work-dir", "store", "Path", None),
    ("--steps", "store", "int", 1500),
    ("--batch-size", "store", "int", 16),
    ("--seq-len", "store", "int", 512),
    ("--layers", "store", "int", 8),
    ("--seed", "store", "int", 0),
    ("--lr", "store", "float", 0.003),
    ("--min-lr-ratio", "store", "float", 0.1),
    ("--warmup-steps", "store", "int", 60),
    ("--ema-decay", "store", "float", 0.0),
    ("--eval-every", "store", "int", 100),
    ("--device", "store", None, "cuda" if torch.cuda.is_available() else "cpu"),
    ("--threads", "store", "int", None),
    ("--resume", "store_true", None, False),
    ("--leg-only", "store_true", None, False),  # train a leg, measure nothing
    ("--init-from", "store", "Path", None),
    ("--directives", "store_true", None, False),
    ("--synth-fraction", "store", "float", 0.75),
    ("--directive-share", "store", "float", 0.65),
    ("--mention-share", "store", "float", 0.25),
    ("--paragraph-fraction", "store", "float", 0.5),
    ("--answer-weight", "store", "float", 2.0),
    ("--copy-fraction", "store", "float", 0.17),
    ("--copy-pretrain-steps", "store", "int", 0),
    ("--copy-warmup", "store", "float", 0.08),
    ("--copy-warmup-fraction", "store", "float", 0.75),
    ("--copy-repeats", "store", "int", 3),
    ("--copy-words", "store", "ints", "6,16"),
    ("--copy-list-share", "store", "float", 0.6),
    ("--target-weight", "store", "float", 20.0),
    ("--curriculum", "store", "float", 0.35),
    ("--curriculum-context", "store", "int", 64),
    ("--nonce-prob", "store", "float", 0.6),
    ("--no-nonce-stems", "store_false", None, True),
    ("--vocab-target-share", "store", "float", 0.0),
    ("--unquoted-targets", "store_false", None, True),
    ("--random-copy-rows", "store", "int", 0),
    ("--prohibition-share", "store", "float", 0.0),  # added with prohibitions
    ("--unlikelihood-weight", "store", "float", 0.0),
    ("--paired-prohibitions", "store_true", None, False),  # matched ask / prohibition pairs
    ("--unlikelihood-window", "store", "int", 0),
    ("--made-up-verbs", "store", "float", 0.0),
    ("--clause-pairs", "store", "float", 0.0),
    ("--label-pairs", "store", "float", 0.0),
    ("--negation-pairs", "store", "float", 0.0),
    ("--counterfactual-rows", "store_true", None, False),
    ("--phrasing-grammar", "store", "float", 0.0),
    ("--continuation-chars", "store", "int", 100),
    ("--valid-text", "store", "Path", None),
    ("--eval-prompts", "store", "Path", DATA_DIR / "prompts_stories_en.jsonl"),
    ("--eval-prefixes", "store", "Path", DATA_DIR / "prefixes_stories_directives.jsonl"),
    ("--eval-lengths", "store", "ints", "32,64,128,256"),
    ("--synthetic-eval-pairs", "store", "int", 44),
    ("--baseline", "store", "Path", None),
    ("--eval-prompt-limit", "store", "int", None),
    ("--valid-paragraphs", "store", "int", None),
    ("--probe-pairs", "store", "int", 20),
    ("--keep-best", "store_true", None, False),
    ("--lora-rank", "store", "int", 0),  # an adapter on a pretrained model
    ("--lora-alpha", "store", "float", 16.0),
    ("--lora-targets", "store", None, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"),
    ("--max-context-tokens", "store", "int", 300),
    ("--plain-len", "store", "int", 256),
]
ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false"}


def options(command: str):
    """The dataclasses of a recorded command line (``harness-train-demo ...``, or ``harness
    train-demo ...`` as the command was called while it was part of the harness)."""
    return read_options(parse_command(command))


def test_the_generated_parser_has_every_old_option_with_its_default_and_kind():
    parser = build_parser()
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings != ["-h", "--help"]}
    assert sorted(actions) == sorted(o for o, *_ in OLD_OPTIONS)
    for flag, action, kind, default in OLD_OPTIONS:
        a = actions[flag]
        assert ACTIONS[type(a).__name__] == action, flag
        assert a.default == default and type(a.default) is type(default), flag
        assert (a.type.__name__ if a.type else None) == kind, flag


def test_parsed_defaults_are_the_settings_defaults():
    opts = read_options(build_parser().parse_args([]))
    assert opts.train == TrainSettings() and opts.mix == MixSettings() and opts.card == CardEvaluation()
    assert opts.mix.copy_words == (6, 16) and opts.card.lengths == (32, 64, 128, 256)
    assert opts.shape.num_hidden_layers == 8 and opts.fine_tuning.probe_pairs == 20


def test_switches_lists_and_renamed_options_reach_their_fields():
    opts = read_options(build_parser().parse_args(
        ["--no-nonce-stems", "--unquoted-targets", "--copy-words", "3,9", "--eval-lengths", "32,64", "--layers", "4",
         "--curriculum-context", "48", "--synthetic-eval-pairs", "7", "--eval-prompts", "p.jsonl", "--keep-best",
         "--re-evaluate", "DIR", "--threads", "2", "--lr", "2e-4"]))
    assert opts.mix.nonce_stems is False and opts.mix.quoted_targets is False and opts.mix.evaluation_quotes == ("",)
    assert opts.mix.copy_words == (3, 9) and opts.card.lengths == (32, 64)
    assert opts.shape.num_hidden_layers == 4 and opts.mix.curriculum_context_tokens == 48
    assert opts.card.synthetic_pairs == 7 and opts.card.prompts == Path("p.jsonl")
    assert opts.fine_tuning.keep_best and opts.command.re_evaluate == Path("DIR") and opts.command.threads == 2
    assert opts.train.lr == 2e-4


def test_the_shipped_commands_give_their_recorded_settings():
    """The obedient model's training.json recorded its command and the settings the old parser made of
    it; the plain model's records the --re-evaluate command of its card; the lineage's stages 6-9
    are train-demo commands too."""
    stats = json.loads((RECORDS / "demo-obedient" / "training.json").read_text())
    opts = options(stats["command"])
    assert asdict(opts.train) == stats["settings"]
    # options added since (prohibition_share) take their defaults, which reproduce the old recipe
    assert {k: v for k, v in json.loads(json.dumps(asdict(opts.mix))).items() if k in stats["mix"]} == stats["mix"]
    assert set(asdict(opts.mix)) - set(stats["mix"]) <= {"prohibition_share", "unlikelihood_weight",
                                                         "paired_prohibitions", "unlikelihood_window",
                                                         "counterfactual_rows", "made_up_verbs", "clause_pairs",
                                                         "label_pairs", "negation_pairs"}
    assert opts.card.lengths == (32, 64, 128) and opts.card.synthetic_pairs == 100
    assert str(opts.card.prefixes) == stats["eval_prefixes"]
    assert opts.fine_tuning.keep_best and opts.fine_tuning.directives and opts.fine_tuning.probe_pairs == 20

    plain = json.loads((RECORDS / "demo-model" / "training.json").read_text())
    opts = options(plain["evaluated_by"])
    assert opts.command.re_evaluate == Path("harness/assets/demo-model") and opts.card.synthetic_pairs == 100
    assert opts.mix.evaluation_quotes == ("",)

    lineage = json.loads((RECORDS / "demo-obedient" / "lineage.json").read_text())
    stages = [s for s in lineage["stages"] if s["how"].startswith("harness train-demo --corpus")]
    assert [s["stage"] for s in stages] == [6, 7, 8, 9]
    for stage in stages:
        command = stage["how"].split(" on main")[0].split(" at commit")[0]
        assert options(command).train.steps == stage["steps"], command


def test_the_shipped_adapter_records_the_command_that_made_it():
    """The SmolLM2 adapter's training.json: its command parses back to the settings, mix and
    adapter it records (its card, rebuilt from these numbers alone: test_model_cards)."""
    stats = json.loads((RECORDS / "demo-obedient-smollm2" / "training.json").read_text())
    opts = options(stats["command"])
    assert asdict(opts.train) == stats["settings"]
    mix = json.loads(json.dumps(asdict(opts.mix)))
    assert {k: v for k, v in mix.items() if k in stats["mix"]} == stats["mix"]
    assert all(mix[k] == 0.0 for k in set(mix) - set(stats["mix"]))  # options added since: off
    ft = opts.fine_tuning
    assert str(ft.init_from) == "model:" + stats["adapter"]["base"]["model_config"] == str(opts.card.baseline)
    recorded = stats["adapter"]
    assert (ft.lora_rank, ft.lora_alpha, ft.lora_targets) == (recorded["rank"], recorded["alpha"], recorded["targets"])


def test_help_lists_every_option(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: harness-train-demo") and "fine-tuning and the obedient model:" in text
    assert all(flag in text for flag, *_ in OLD_OPTIONS)
