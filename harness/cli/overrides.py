"""What the Hydra applications check of their command line before Hydra composes anything, beside
the overrides themselves (:func:`harness.config.composing.check_overrides`, which :func:`compose`
shares): a ``--config-dir`` that is a directory of readable YAML, an option's value, and a path
quoted for Hydra's override grammar. Hydra's own answers are longer and leave a run directory behind."""

from __future__ import annotations

import re
from pathlib import Path

from harness.errors import HarnessError


def option(args: list[str], *names: str) -> str | None:
    """The value of the last ``--name VALUE`` / ``--name=VALUE`` among ``args``."""
    value = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1:]
    return value


def check_hydra_flags(args: list[str], command: str) -> None:
    """Refuse an option Hydra's parser would misread: an abbreviated or unknown one, one that only
    means something beside ``--cfg`` (``--resolve``, ``--package``: ignored, or Hydra's ValueError
    reported as a bug), and ``--experimental-rerun``, which loads a pickle."""
    import difflib

    from harness.config.composing import HYDRA_FLAGS

    flags = [a.split("=", 1)[0] for a in args if a.startswith("-") and a != "-"]
    for flag in flags:
        if flag == "--experimental-rerun":
            raise HarnessError("--experimental-rerun loads a pickled config, and the harness never unpickles a file: "
                               "`harness resume RUN` reruns a run from its own command")
        if flag in ("--config-name", "-cn", "--config-path", "-cp"):
            raise HarnessError(f"{flag}: the harness's config is its own (harness/conf/config.yaml); add configs of "
                               f"yours with --config-dir DIR (e.g. DIR/model/mine.yaml, then model=mine)")
        if flag in ("--shell-completion", "-sc"):
            raise HarnessError(f"{flag}: {command} does not install shell completion; leave it out")
        if flag not in HYDRA_FLAGS:
            near = [f for f in sorted(HYDRA_FLAGS) if f.startswith(flag)] or \
                difflib.get_close_matches(flag, sorted(HYDRA_FLAGS), n=1, cutoff=0.6)
            hint = f"; did you mean {' or '.join(near[:2])}?" if near else ""
            raise HarnessError(f"{flag} is not an option of {command}{hint} (options are spelled in full; --help lists "
                               f"them)")
    modes = sorted({f for f in flags if f in ("--run", "-r", "--multirun", "-m", "--cfg", "-c", "--info", "-i")},
                   key=flags.index)
    if len({m.lstrip("-")[0] for m in modes}) > 1:  # -r, -m, -c, -i: one of them
        raise HarnessError(f"{' and '.join(modes)}: give one of --run, --multirun (-m), --cfg and --info (each is "
                           f"another way to run {command})")
    if not {"--cfg", "-c"} & set(flags):
        alone = next((f for f in flags if f in ("--resolve", "--package", "-p")), None)
        if alone:
            raise HarnessError(f"{alone} only applies with --cfg (it changes how the config is printed): give "
                               f"--cfg job {alone} ..., or leave it out")


def check_config_dir(config_dir: str) -> None:
    """Every YAML file of a user's config directory parses and holds only encodable text: Hydra
    would answer a broken one with a long traceback, and a lone surrogate fails only when the run's
    config is written."""
    import yaml

    from harness.paths import PACKAGE_DIR

    root = Path(config_dir)
    if not root.is_dir():
        raise HarnessError(f"--config-dir {config_dir} is not a directory")
    groups = {p.name for p in (PACKAGE_DIR / "conf").iterdir() if p.is_dir() and not p.name.startswith("_")}
    if root.name in groups and any(root.glob("*.yaml")) and not any((root / g).is_dir() for g in groups):
        raise HarnessError(f"--config-dir {config_dir} holds {root.name} configs themselves: give the folder above it "
                           f"(--config-dir {root.parent}), whose {root.name}/ Hydra reads as the group")
    for path in sorted(root.rglob("*.yaml")):
        try:
            text = path.read_text(encoding="utf-8")
            data = yaml.safe_load(text)
            yaml.safe_dump(data, allow_unicode=True).encode("utf-8")
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise HarnessError(f"{path}{where}: not valid YAML ({problem}); fix the file") from None
        except UnicodeError:
            raise HarnessError(f"{path}: not UTF-8 text, or a string in it holds a lone surrogate (an escape like "
                               f"\\udc80); write the text as UTF-8 characters") from None
        except OSError as exc:
            raise HarnessError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        if path.parent == root / "experiment" and data and not _has_package_header(text):
            raise HarnessError(f"{path}: an experiment config sets keys of the whole config, so its first line is "
                               "`# @package _global_` (as in the shipped ones, harness/conf/experiment/; Hydra reads "
                               "it only above any other line, a comment included); add it")


def _has_package_header(text: str) -> bool:
    """Whether a YAML file's header names a ``@package``: Hydra reads ``# @key value`` lines from the
    top, past blank lines, and stops at the first other line (a plain comment included)."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not re.match(r"#\s*@", stripped):
            return False
        if stripped.lstrip("#").strip().startswith("@package"):
            return True
    return False


def hydra_quoted(value: str) -> str:
    """``value`` as a quoted Hydra override value: commas, spaces, brackets and non-ASCII letters
    in a path would otherwise be read as override syntax (a comma even as a sweep)."""
    return "'" + value.replace("'", "\\'") + "'"
