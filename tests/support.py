"""What the tests share besides fixtures: the small sweep settings, running a sweep or the CLI,
and the tiny-model engine rig (a model with the attention probe, conditions, an engine, and every
condition driven through it)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.config import compose
from harness.inputs.conditions import build_conditions
from harness.measure.driver import drive
from harness.measure.engine import Engine
from harness.model.probe import install_probe
from harness.runs.runner import run

ROOT = Path(__file__).resolve().parent.parent  # the repository
TEST_DATA = ROOT / "tests" / "data"
SMALL_PREFIXES = TEST_DATA / "prefixes_small.jsonl"  # 5 neutral + 5 instruction-like, ids fixed

# A small but complete sweep on the tiny model: 2 prompts x (A + 10 prefixes x 2 lengths). Without
# figures: drawing them takes longer than the sweep (tiny_run and the figure tests draw them).
FAST = ["model=tiny", "prefix.lengths=[8,24]", "decode.max_new_tokens=6", "prompts.limit=2",
        f"prefixes.path={SMALL_PREFIXES}", "draw_figures=false"]


def sweep(run_dir: Path, *overrides: str) -> Path:
    """``harness sweep OVERRIDES hydra.run.dir=RUN_DIR``, in this process."""
    return run(compose(list(overrides)), run_dir, overrides=list(overrides), progress=False)


def contributing_example(section: str, language: str = "python") -> str:
    """The first ``language`` code block after ``section`` (e.g. "**A backend**") in CONTRIBUTING.md:
    the worked examples there are run by tests as written."""
    import re

    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = text.index(section) if section else 0
    return re.search(rf"```{language}\n(.*?)```", text[start:], re.S).group(1)


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def run_harness(*args: str, cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m harness ARGS`` in a fresh process, offline."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def run_all(engine, conditions, batch_size: int = 1):
    """Every condition through :func:`harness.measure.driver.drive`: (results in the order computed, the
    reference of each prompt)."""
    results, references, alone = [], {}, []

    def keep(result, ref, computed_alone):
        results.append(result)
        references[ref.condition.prompt_id] = ref
        alone.append(computed_alone)

    outcome = drive(engine, conditions, batch_size=batch_size, on_result=keep, progress=False)
    assert not outcome.failures, outcome.failures
    assert not any(alone), "a batch failed and was retried one condition at a time"  # a bug, not a test
    return results, references


def chat_template(name: str) -> str:
    """A chat template copied from a real model's tokenizer_config (tests/data/chat_templates)."""
    return (TEST_DATA / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")


def engine_rig(model, tok, prompts, prefixes, *, lengths, max_new: int, batch_size: int = 1,
               prefix_cache_bytes: int = 0, groups=("A", "B", "C"), **build):
    """The tiny-model engine rig: install the probe on ``model``, build the conditions of
    ``prompts`` x ``prefixes`` at ``lengths`` (raw placement, "\n\n" separator, BOS as the
    tokenizer adds it, unless ``build`` says otherwise), and drive them all through an
    :class:`Engine` with attention analysis. Returns (results, reference per prompt, engine)."""
    install_probe(model)
    build = {"separator": "\n\n", "bos_policy": "auto", **build}
    conds = build_conditions(tok, prompts, prefixes, groups=list(groups), lengths=list(lengths), **build)
    engine = Engine(model, tok.eos_token_id, max_new, attention=True, prefix_cache_bytes=prefix_cache_bytes)
    results, references = run_all(engine, conds, batch_size)
    return results, references, engine


def fake_command_stderr(body: str) -> str:
    """The stderr of ``harness warn`` in a fresh process, ``warn`` being a command whose body is
    ``body`` (Python, indented four spaces, ending in ``return 0``): how the command line shows
    what a command does, without a command that does it."""
    import subprocess
    import sys

    script = ("import warnings, harness.cli as cli, types, sys\n"
              "m = types.ModuleType('warner'); sys.modules['warner'] = m\n"
              f"def entry(_args):\n{body}"
              "m.entry = entry; cli.COMMANDS['warn'] = 'warner:entry'\n"
              "raise SystemExit(cli.main(['warn']))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stderr


def one_line_error(capsys, argv) -> str:
    """The one ``error:`` line of a harness command refused with exit status 2 (no traceback)."""
    from harness.cli import main

    capsys.readouterr()
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def stand_in_vllm_python() -> str:
    """A Python that has a (empty) ``vllm`` package to find: it stands for the vLLM environment in
    tests whose engine never starts (refusals, or a stand-in engine), since backend=vllm refuses a
    Python without vllm before anything loads. Made once per session in a temporary directory."""
    import atexit
    import shutil
    import stat
    import tempfile

    global _STAND_IN
    if _STAND_IN is None:
        root = Path(tempfile.mkdtemp(prefix="stand-in-vllm-"))
        atexit.register(shutil.rmtree, root, True)
        (root / "site" / "vllm").mkdir(parents=True)
        (root / "site" / "vllm" / "__init__.py").write_text("")
        script = root / "python"
        script.write_text(f'#!/bin/sh\nPYTHONPATH="{root / "site"}${{PYTHONPATH:+:$PYTHONPATH}}" exec {sys.executable} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        _STAND_IN = str(script)
    return _STAND_IN


_STAND_IN: str | None = None


def exit_code(args: list[str]) -> int:
    """``harness ARGS``'s exit status, whether the command returns it or argparse exits with it."""
    from harness.cli import main

    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code)
