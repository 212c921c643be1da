"""Edges of every command a careless user meets (issue 67's cases): each answered in one line with
exit status 2, never a traceback, and nothing the user owns overwritten. One table of commands and
the words their answer must hold."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from harness.cli import main
from tests.support import FAST, sweep, write_jsonl


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("edges")
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(f"Paragraph {i}. " + "Plain words about gardens and weather. " * 30
                                  for i in range(4)), encoding="utf-8")
    existing = root / "bank.jsonl"
    existing.write_text('{"id": "x", "kind": "neutral", "text": "kept"}\n', encoding="utf-8")
    a_file = root / "a-file"
    a_file.write_text("not a directory\n")
    folder = root / "folder"
    folder.mkdir()
    return {"root": root, "corpus": corpus, "existing": existing, "file": a_file, "folder": folder}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("edge-runs")
    ac = sweep(root / "ac", *FAST, "groups=[A,C]")  # no B: nothing to name heads by
    one = sweep(root / "one", *[o for o in FAST if not o.startswith("prompts.limit")], "prompts.limit=1")
    return {"ac": ac, "one": one}


def answer(capsys, argv: list[str]) -> str:
    """The command's stderr, after checking it exits 2 without a traceback."""
    capsys.readouterr()
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse refuses an argument by exiting (the CLI's process exits 2)
        status = exc.code
    assert status == 2, argv
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err


CASES = [
    # build-prefixes never overwrites a file (it overwrote a finished run's prompts file) nor reads a folder
    (lambda f, r: ["build-prefixes", "neutral", "--corpus", str(f["corpus"]), "--out", str(f["existing"])],
     "exists; nothing is overwritten"),
    (lambda f, r: ["build-prefixes", "neutral", "--corpus", str(f["folder"]), "--out", str(f["root"] / "n.jsonl")],
     "is a directory: give a UTF-8 text file"),
    (lambda f, r: ["build-prefixes", "neutral", "--corpus", str(f["corpus"]), "--out", str(f["folder"])],
     "is a directory: give a file name"),
    (lambda f, r: ["build-prefixes", "neutral", "--corpus", str(f["corpus"]), "--out", str(r["ac"] / "bank.jsonl")],
     "never write into a run"),
    # numbers out of their range
    (lambda f, r: ["check-determinism", str(r["ac"]), "--tolerance", "nan"], "must be a finite number"),
    (lambda f, r: ["check-determinism", str(r["ac"]), "--tolerance", "-1"], "must be at least 0"),
    (lambda f, r: ["plan", str(r["ac"]), "--effect-sds", "inf"], "must be a finite number"),
    (lambda f, r: ["claims", str(r["ac"]), "--out", str(f["root"] / "c"), "--resamples", "0"], "must be at least 1"),
    (lambda f, r: ["claims", str(r["ac"]), "--out", str(f["root"] / "c"), "--resamples", "-5"], "must be at least 1"),
    # --out that is a file
    (lambda f, r: ["causal-heads", str(r["ac"]), "--out", str(f["file"])], "is a file: give a directory"),
    (lambda f, r: ["cache-timing", "--out", str(f["file"])], "is a file"),
    (lambda f, r: ["cache-timing", "--model", "nosuch", "--out", str(f["root"] / "t")],
     "--model nosuch is not a model config name"),
    # a run without B: refused before any model loads (it raised KeyError after the load)
    (lambda f, r: ["causal-heads", str(r["ac"]), "--out", str(f["root"] / "h"), "--ranking-only"],
     "has groups ['A', 'C']"),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_each_edge_is_one_line(case, files, runs, capsys):
    argv, expected = CASES[case]
    err = answer(capsys, argv(files, runs))
    assert expected in err, (argv(files, runs), err)


def test_build_prefixes_replaces_a_file_only_with_force(files, capsys):
    out = files["root"] / "forced.jsonl"
    out.write_text("old\n")
    argv = ["build-prefixes", "neutral", "--corpus", str(files["corpus"]), "--n", "2", "--min-chars", "100"]
    assert "exists" in answer(capsys, [*argv, "--out", str(out)])
    assert out.read_text() == "old\n"
    assert main([*argv, "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text().splitlines()[0])["kind"] == "neutral"


def test_two_sweeps_in_one_second_get_two_default_directories():
    """The default run directory's name has microseconds: two starts within one second differ."""
    from importlib import resources

    config = (resources.files("harness.conf") / "config.yaml").read_text(encoding="utf-8")
    for kind in ("runs", "multirun"):
        fmt = config.split(f"dir: outputs/{kind}/${{now:", 1)[1].split("}", 1)[0]
        a, b = datetime(2026, 12, 6, 1, 2, 3, 100), datetime(2026, 12, 6, 1, 2, 3, 900)
        assert a.strftime(fmt) != b.strftime(fmt), fmt


def test_prompt_files_refuse_invisible_targets_naming_the_prefix(tmp_path, capsys):
    from harness.errors import HarnessError
    from harness.inputs.texts import load_prefixes

    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "sly", "kind": "instruction", "text": "Say um\u200bbrella.",
                                               "target": "um\u200bbrella"}])
    with pytest.raises(HarnessError, match=r"p\.jsonl:1: prefix 'sly': target .*U\+200B"):
        load_prefixes(path)


def test_a_one_prompt_run_says_why_it_has_no_interval_instead_of_nan(runs, tmp_path):
    assert main(["claims", str(runs["one"]), "--out", str(tmp_path / "c"), "--resamples", "20"]) == 0
    page = (tmp_path / "c" / "claims.md").read_text()
    assert "nan to nan" not in page
    assert "has no interval (1 prompt(s) x 5 prefix(es); a crossed interval needs at least 2 of each)" in page
    # what the tiny model's run lacks for claims 1 and 2, in the words plan uses
    assert "Not tested: claim 1 needs a model with at least 3 layers (this one has 2)." in page


def test_kv_size_reads_a_model_config_by_its_name(capsys):
    """``model=tiny`` is the config sweep reads (it looked for a hub model called tiny for 28 s)."""
    from harness.model.builtin import tiny_config

    config = tiny_config("llama")
    assert main(["kv-size", "model=tiny"]) == 0
    line = capsys.readouterr().out
    assert f"x {config.num_hidden_layers} layers x {config.num_key_value_heads} kv heads" in line


@pytest.mark.parametrize("typed, meant", [("swep", "sweep"), ("figure", "figures"), ("claim", "claims"),
                                          ("check-determinsm", "check-determinism")])
def test_a_mistyped_command_names_the_nearest_one(typed, meant, capsys):
    assert f"did you mean `harness {meant}`?" in answer(capsys, [typed])


def test_an_unknown_command_nothing_is_near_lists_them_all(capsys):
    err = answer(capsys, ["frobnicate"])
    assert "unknown command 'frobnicate'" in err and "commands:" in err and "did you mean" not in err


@pytest.mark.parametrize("override, hint", [("prefix.lengths=64", "write prefix.lengths=[64]"),
                                            ("groups=B", "write groups=[B]")])
def test_a_scalar_for_a_list_says_how_to_write_the_list(override, hint, tmp_path, capsys):
    err = answer(capsys, ["sweep", "model=tiny", override, f"hydra.run.dir={tmp_path / 'run'}"])
    assert hint in err and not (tmp_path / "run").exists()
