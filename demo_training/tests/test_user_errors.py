"""Mistakes a user of ``harness-train-demo`` can make are one ``error:`` line and exit status 2."""

from __future__ import annotations

import re

import pytest

from demo_training.tests.support import PACKAGE, shipped_copy
from demo_training.train_demo import main

CORPUS = PACKAGE.parent.parent / "shared" / "data" / "stories" / "tinystories_subset.txt"


def one_line_error(capsys, argv) -> str:
    """The one ``error:`` line of a refused command (transformers' progress bars may precede it)."""
    capsys.readouterr()
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


@pytest.mark.parametrize("content", [None, "{not json"])
def test_recard_on_a_directory_without_a_readable_training_json_is_one_line(tmp_path, capsys, content):
    if content is not None:
        (tmp_path / "training.json").write_text(content)
    assert "training.json" in one_line_error(capsys, ["--recard", str(tmp_path)])


@pytest.mark.parametrize("damage", ["training.json", "weights"])
def test_re_evaluating_a_damaged_model_directory_is_one_line(tmp_path, capsys, damage):
    model = shipped_copy("demo-model", tmp_path / "model")
    if damage == "training.json":
        (model / "training.json").write_text("{ not json")
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("Once upon a time.\n")
        expected = "training.json is damaged"
    else:
        if not CORPUS.is_file():
            pytest.skip(f"needs the corpus the demo model was trained on ({CORPUS})")
        weights = model / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:5000])
        corpus, expected = CORPUS, "cannot be loaded .* weights are damaged"
    err = one_line_error(capsys, ["--re-evaluate", str(model), "--corpus", str(corpus)])
    assert re.search(expected, err), err


@pytest.mark.parametrize("options, expected", [
    (["--steps", "-5"], "--steps must be at least 1, got -5"),
    (["--seq-len", "0"], "--seq-len must be at least 1, got 0"),
    (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
    (["--out-is-a-file"], "is a file; give a directory"),
    (["--one-story"], "holds 1 stories: none is left to train on"),
])
def test_training_options_that_would_train_nothing_or_crash_are_one_line(tmp_path, capsys, options, expected):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Once upon a time there was a cat.\n<|endoftext|>\n" * (1 if options == ["--one-story"] else 50))
    out = tmp_path / "model"
    if options == ["--out-is-a-file"]:
        out.write_text("a file")
    argv = ["--corpus", str(corpus), "--out", str(out), "--threads", "1"]
    argv += [] if options[0].startswith(("--out-is", "--one-story")) else options
    assert expected in one_line_error(capsys, argv)
    assert not (out / "README.md").exists()  # no model, no card
