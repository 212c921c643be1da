"""Adversarial pass 40's causes (issue 67; 203 cases on cd11ecd: 0 lost, 1 silent, 0 tracebacks,
9 misleading): a hand-written prefix whose target its text never names, a prompts file saved
again with other line endings or spacing called "other prompts", and two runs refused for a Δ
of a measure the command does not read."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from tests.support import FAST, ROOT, one_line_error, sweep, write_jsonl

ONE = [o for o in FAST if not o.startswith(("prefix.lengths", "decode.max_new_tokens", "prompts.limit"))] + [
    "prefix.lengths=[8]", "decode.max_new_tokens=2", "analysis.noise_floor=false"]


def test_a_prefix_whose_text_does_not_name_its_target_is_refused(tmp_path, capsys):
    """Case 161 (silent): an 'ignore the above' prefix given target 'banana' was swept, and the
    report's "asked for (C)" rate was a rate of a word no prefix asked for."""
    rows = [json.loads(line) for line in (ROOT / "tests" / "data" / "prefixes_small.jsonl").read_text().splitlines()
            if line.strip()]
    c = next(i for i, r in enumerate(rows) if r["kind"] == "instruction")
    rows[c] = {**rows[c], "target": "banana"}
    assert "banana" not in rows[c]["text"].lower()
    path = write_jsonl(tmp_path / "bank.jsonl", rows)
    line = one_line_error(capsys, ["sweep", *[o for o in ONE if not o.startswith("prefixes.path")],
                                   "prompts.limit=1", f"prefixes.path={path}", f"hydra.run.dir={tmp_path / 'run'}"])
    assert f"bank.jsonl:{c + 1}: prefix {rows[c]['id']!r}: its text does not contain its target 'banana'" in line, line
    assert not (tmp_path / "run").exists()


def _save(path, rows, **dumps):
    path.write_text("".join(json.dumps(r, **dumps) + "\n" for r in rows))


@pytest.fixture(scope="module")
def prompts_run(tmp_path_factory):
    """A run of the first 2 of 3 prompts in a file of its own, and the file's rows."""
    home = tmp_path_factory.mktemp("pass40")
    rows = [{"id": f"p{i}", "text": f"Task number {i}: write one sentence about the {w}."}
            for i, w in enumerate(("sea", "hills", "town"))]
    _save(home / "p.jsonl", rows)
    run = sweep(home / "run", *ONE, f"prompts.path={home / 'p.jsonl'}", "prompts.limit=2")
    return run, home / "p.jsonl", rows


@pytest.mark.parametrize("save", [
    lambda path, rows: path.write_bytes("".join(json.dumps(r) + "\r\n" for r in rows).encode()),  # a Windows editor
    lambda path, rows: _save(path, rows, separators=(",", ":")),  # JSON spacing
    lambda path, rows: _save(path, [{"text": r["text"], "id": r["id"]} for r in rows]),  # key order
])
def test_a_prompts_file_saved_again_is_what_the_run_read(save, prompts_run, capsys):
    """Cases 165, 166, 168 (misleading): the same prompts with other line endings or JSON spacing were
    "other input files", and resume offered on_existing=fresh, which deletes valid results."""
    run, path, rows = prompts_run
    save(path, rows)
    assert main(["check-determinism", str(run), "--sample", "1"]) == 0
    assert main(["resume", str(run)]) == 0
    _save(path, rows)


def test_a_prompts_file_reordered_is_said_as_such(prompts_run, capsys):
    """Cases 169, 170 (misleading): lines swapped were called other prompts; the order does change the
    run (the noise floor's sample, what prompts.limit keeps), so it is refused, and said."""
    run, path, rows = prompts_run
    _save(path, [rows[1], rows[0], rows[2]])
    try:
        line = one_line_error(capsys, ["check-determinism", str(run), "--sample", "1"])
    finally:
        _save(path, rows)
    assert "holds the entries the run read in another order" in line, line


def test_a_delta_the_command_does_not_read_may_differ_between_runs(tmp_path, capsys):
    """Cases 189-192 (misleading): claims and plan --measure refused two runs that differ in output_kl's
    Δ, which neither reads, and refused --delta output_kl= as changing nothing: a dead end."""
    common = [*ONE, "prompts.limit=3", "prefixes.per_group=3"]
    a = sweep(tmp_path / "a", *common)
    b = sweep(tmp_path / "b", *common, "seed=1", "+claims.delta.output_kl=0.001")
    assert main(["claims", str(a), str(b), "--out", str(tmp_path / "claims")]) == 0
    assert main(["plan", str(a), str(b), "--measure", "norm_edit_distance", "--out", str(tmp_path / "p1")]) == 0
    assert "smallest effects of interest" not in capsys.readouterr().err
    line = one_line_error(capsys, ["plan", str(a), str(b), "--measure", "output_kl"])  # it reads this one
    assert "different smallest effects of interest for output_kl: 0.05 (the default) and 0.001" in line, line
    capsys.readouterr()
    assert main(["plan", str(a), str(b), "--measure", "output_kl", "--delta", "output_kl=0.01", "--out",
                 str(tmp_path / "p2")]) == 0
    err = capsys.readouterr().err
    assert "smallest effects of interest" not in err
    assert "replaces the Δs the runs were made with, which differ between them" in err, err
