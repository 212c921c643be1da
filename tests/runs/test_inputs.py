"""A run knows the files it was made from by content (issue 67): a relative ``prompts.path`` read
from another working directory, where another file with the same ids sits, is refused by a sweep
into the run (``harness resume``), by ``check-determinism`` and by ``collect``, instead of filling
the run's tables with other prompts' results."""

from __future__ import annotations

import hashlib
import json

import pytest

from harness.cli import main
from harness.io import open_json_seal
from harness.runs.inputs import changed_inputs
from tests.support import FAST, SMALL_PREFIXES, one_line_error, sweep, write_jsonl

PROMPTS = [{"id": "p1", "text": "Name three colours of the rainbow."}, {"id": "p2", "text": "Count from one to five."}]
OTHERS = [{"id": "p1", "text": "Translate 'cat' into French."}, {"id": "p2", "text": "Spell the word house."}]
OVERRIDES = [o for o in FAST if not o.startswith("prompts.")] + ["prompts.path=prompts.jsonl"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A run made in ``first/`` from the relative ``prompts.jsonl``; ``second/`` holds another file
    of that name with the same ids."""
    root = tmp_path_factory.mktemp("inputs")
    first, second = root / "first", root / "second"
    first.mkdir(), second.mkdir()
    write_jsonl(first / "prompts.jsonl", PROMPTS)
    write_jsonl(second / "prompts.jsonl", OTHERS)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(first)
        run = sweep(root / "run", *OVERRIDES)
        other = sweep(root / "other-run", *[o.replace("prompts.jsonl", str(second / "prompts.jsonl"))
                                            for o in OVERRIDES])
    return {"root": root, "first": first, "second": second, "run": run, "other": other}


def test_the_manifest_records_each_input_by_absolute_path_and_sha256(made):
    manifest, _ = open_json_seal(json.loads((made["run"] / "manifest.json").read_text()))

    def read(path, in_order=True):  # what the run read: every entry (no limit), each as sorted-key JSON
        entries = [json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False)
                   for line in path.read_text().splitlines() if line.strip()]
        return hashlib.sha256("\n".join(entries if in_order else sorted(entries)).encode()).hexdigest()

    expected = {role: {"path": str(path.resolve()), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                       "read_lines": None, "read_sha256": read(path), "read_set_sha256": read(path, False)}
                for role, path in (("prompts", made["first"] / "prompts.jsonl"), ("prefixes", SMALL_PREFIXES))}
    assert manifest["inputs"] == expected
    fingerprint, _ = open_json_seal(json.loads((made["run"] / "run_fingerprint.json").read_text()))
    assert fingerprint["inputs"] == expected


def test_resuming_from_another_directory_is_refused_and_changes_nothing(made, capsys, monkeypatch):
    before = {p.name: p.read_bytes() for p in made["run"].iterdir() if p.is_file() and p.name != ".lock"}
    monkeypatch.chdir(made["second"])
    line = one_line_error(capsys, ["resume", str(made["run"])])
    assert "was made from other input files" in line and "prompts file" in line
    assert str((made["first"] / "prompts.jsonl").resolve()) in line  # where the run's own file is
    assert "on_existing=fresh" in line
    after = {p.name: p.read_bytes() for p in made["run"].iterdir() if p.is_file() and p.name != ".lock"}
    assert after == before
    # the same relative path from the run's own directory resumes: everything reused
    monkeypatch.chdir(made["first"])
    capsys.readouterr()
    assert main(["resume", str(made["run"])]) == 0


def test_check_determinism_from_another_directory_is_refused(made, capsys, monkeypatch):
    monkeypatch.chdir(made["second"])
    line = one_line_error(capsys, ["check-determinism", str(made["run"]), "--sample", "1"])
    assert "was made from other input files" in line and "recheck" in line


def test_collect_refuses_one_id_from_two_files(made, capsys, tmp_path):
    line = one_line_error(capsys, ["collect", str(made["run"]), str(made["other"]), "--out", str(tmp_path / "c")])
    assert "give the prompt id 'p1' different texts" in line
    assert not (tmp_path / "c").exists()
    # every reader of several runs refuses them too (figures and claims pooled them: pass 7, #081 and #082)
    for command in (["figures", "--out", str(tmp_path / "f")], ["claims", "--out", str(tmp_path / "k")]):
        line = one_line_error(capsys, [command[0], str(made["run"]), str(made["other"]), *command[1:]])
        assert "give the prompt id 'p1' different texts" in line, line


def test_changed_inputs_is_silent_only_for_runs_that_recorded_none():
    now = {"prompts": {"path": "/a", "sha256": "1" * 64}}
    assert changed_inputs(None, now) == []  # an earlier version's run: nothing to compare
    assert changed_inputs(now, now) == []
    assert changed_inputs({}, now) == ["its prompts file was none, the config now reads /a (sha256 111111111111...)"]
    assert len(changed_inputs({"prompts": {"path": "/a", "sha256": "2" * 64}}, now)) == 1


def test_a_file_edited_in_place_is_told_to_be_restored_not_to_run_elsewhere(tmp_path, capsys):
    """Pass 14, #205 and #206: a prefix file edited at the same absolute path was refused (rightly)
    with 'run it from the directory the run was made in', which cannot help there."""
    import shutil

    from tests.support import FAST, sweep

    bank = tmp_path / "bank.jsonl"
    shutil.copy(SMALL_PREFIXES, bank)
    run = sweep(tmp_path / "run", *[o for o in FAST if not o.startswith("prefixes.path")], f"prefixes.path={bank}")
    bank.write_text(bank.read_text().replace("kettle", "teapot"))
    for argv in (["check-determinism", str(run), "--sample", "1"], ["resume", str(run)]):
        line = one_line_error(capsys, argv)
        assert "restore the files (the manifest records their sha256: they were edited in place)" in line
        assert "directory the run was made in" not in line


def test_resuming_from_a_directory_without_the_relative_file_names_where_to_resume_from(made, capsys, monkeypatch):
    """Pass 16, #144: from a directory without prompts.jsonl the resume said only 'prompts.jsonl:
    file not found', though the run records where the file was."""
    elsewhere = made["root"] / "empty"
    elsewhere.mkdir(exist_ok=True)
    monkeypatch.chdir(elsewhere)
    line = one_line_error(capsys, ["resume", str(made["run"])])
    mine = (made["first"] / "prompts.jsonl").resolve()
    assert f"names its prompts file by the relative path prompts.jsonl, which {elsewhere} does not hold" in line
    assert f"resume from {made['first'].resolve()} (cd there first), or add prompts.path={mine}" in line
