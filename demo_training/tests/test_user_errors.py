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
