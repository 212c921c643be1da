"""What the Hydra applications check of their command line before Hydra composes anything: a
``--config-dir`` that is a directory of readable YAML, override keys the config has (with the
closest one it does have), config groups given one of their configs, lists written as lists.
Hydra's own answers are longer, suggest adding a key with ``+``, and leave a run directory behind."""

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


# Hydra's options that take a value (`--cfg job`, `-cd DIR`): the one word after them is not an override
HYDRA_VALUED = frozenset({"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
                          "--config-dir", "-cd", "--info", "-i", "--experimental-rerun"})


def bare_word(args: list[str]) -> str | None:
    """The first argument that is neither an option, an option's value nor a KEY=VALUE override (a
    second run directory, a stray word): Hydra's parser answers it with four lines of its own."""
    previous = None
    for arg in args:
        if "=" not in arg and not arg.startswith("-") and previous not in HYDRA_VALUED:
            return arg
        previous = arg
    return None


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


def unquoted(value: str) -> str:
    """A Hydra override value without its quotes (``'a,b'`` -> ``a,b``)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1].replace("\\" + value[0], value[0])
    return value


def group_options(group: str, config_dir: str | None) -> set[str]:
    """The names ``group=NAME`` can take: the shipped configs and those of ``--config-dir``."""
    from harness.paths import PACKAGE_DIR

    dirs = [PACKAGE_DIR / "conf" / group] + ([Path(config_dir) / group] if config_dir else [])
    return {p.stem for d in dirs if d.is_dir() for p in d.glob("*.yaml")}


def _unreadable_override(args: list[str]) -> str | None:
    """The first override Hydra's parser cannot read (its own answer is a lexer exception's block)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in (a for a in args if "=" in a and not a.startswith("-")):
        try:
            parser.parse_overrides([arg])
        except OverrideParseException:
            return arg
    return None


def check_overrides(args: list[str], config_dir: str | None) -> None:
    """Refuse, in one line and before Hydra creates anything, an override whose key the config
    does not have (with the closest key it does have) and a config group given something that is
    not one of its configs (a model path or hub id goes in ``model.name_or_path``). Hydra's own
    answers are longer, suggest adding the key with ``+``, and leave a run directory behind."""
    import difflib

    from harness.config import GROUPS, config_keys

    keys, lists, dicts = config_keys(), set(config_keys(lists=True)), config_keys(dicts=True)
    deleting = [a for a in args if a.startswith("~")]
    if deleting:  # every key has a value a run reads: a deleted group or key leaves its default in force, or fails
        raise HarnessError(f"{deleting[0]} deletes part of the config, which every run reads in full: set the value "
                           f"instead ({deleting[0][1:].split('=')[0]}=VALUE), or leave it out for the default")
    stray = bare_word(args)
    if stray is not None:
        where = "; a run's directory is set with hydra.run.dir=DIR (`harness resume DIR` finishes one)" \
            if Path(stray).exists() or "/" in stray else ""
        raise HarnessError(f"{stray} is not an override (KEY=VALUE){where}; --help lists the options")
    experiments = [a for a in args if a.split("=", 1)[0].lstrip("+") == "experiment" and "=" in a]
    if len(experiments) > 1 and "-m" not in args and "--multirun" not in args:
        raise HarnessError(f"experiment= is given twice ({' and '.join(experiments)}): the last would replace the "
                           f"first without a word; give one, and the keys you want changed on top of it")
    unreadable = _unreadable_override(args)
    if unreadable:
        key, value = unreadable.split("=", 1)
        bare = value.strip().strip("()").strip()
        if re.fullmatch(r"[-+]?[0-9.eE+-]+|\[.*\]", bare):  # a number or a list dressed in parentheses
            raise HarnessError(f"{unreadable}: the override grammar cannot read this value: write it as {key}={bare}")
        raise HarnessError(f"{unreadable}: the override grammar cannot read this value unquoted (a character such as "
                           f"a non-ASCII letter, a parenthesis or # in it): quote the value, as '{key}=\"{value}\"'")
    multirun = "-m" in args or "--multirun" in args
    dir_keys = {a.split("=", 1)[0].lstrip("+") for a in args if "=" in a}
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        added, key = arg.startswith("+"), key.lstrip("+~")
        right = "hydra.sweep.dir" if multirun else "hydra.run.dir"
        if key in ("hydra.run.dir", "hydra.sweep.dir") and key != right and right not in dir_keys:
            # Hydra reads only the other one, and writes where its default says without a word
            mode, whose = ("with -m", "a multirun's directory (its jobs go in numbered folders inside)") if multirun \
                else ("without -m", "the run's directory")
            raise HarnessError(f"{key}= is not read {mode}: {whose} is {right}=, so write {right}={value}")
        if key.startswith("hydra") or "/" in key:  # Hydra's own settings and group paths (hydra/launcher=...)
            continue
        if any(key.startswith(d + ".") for d in dicts):  # a free key (chat.template_kwargs.KEY): Hydra's to judge
            continue
        if key in GROUPS and added:  # Hydra's answer is config-file syntax ("override experiment: quick")
            raise HarnessError(f"{key} is a config group the config already has: write {key}={value} (no +)")
        if key in GROUPS and unquoted(value).strip().startswith("["):
            raise HarnessError(f"{key}= takes one config name, not a list; one run per config: "
                               f"harness sweep -m {key}={unquoted(value).strip()[1:-1]}")
        if key in GROUPS:
            options = group_options(key, config_dir)
            for choice in (v.strip() for v in unquoted(value).split(",")):
                if choice and choice not in options and not choice.startswith(("${", "glob(", "choice(", "range(")):
                    raise HarnessError(_not_an_option(key, choice, options))
            continue
        if key in keys:
            bare = unquoted(value).strip()
            if key not in lists and "," in bare and bare == value.strip() and not bare.startswith(("[", "{", "${")) \
                    and "-m" not in args and "--multirun" not in args:
                raise HarnessError(f"{key}={value} sweeps over values: add -m (harness sweep -m {key}={value}), one "
                                   f"run directory per value")
            if key in lists and bare and not bare.startswith(("[", "${", "null")) and "-m" not in args \
                    and "--multirun" not in args:
                raise HarnessError(f"{key} is a list: write {key}=[{bare}] (several values: {key}=[{bare},...])")
            continue
        near = [k for k in keys if k.endswith("." + key)] or difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}={value}?" if near else "; `harness sweep --cfg job` prints every key"
        raise HarnessError(f"{key} is not a config key{hint}")


def _not_an_option(group: str, choice: str, options: set[str]) -> str:
    """Why ``group=choice`` names no config, and what to write instead."""
    import difflib

    instead = {"model": "model.name_or_path", "prompts": "prompts.path", "prefixes": "prefixes.path"}.get(group)
    looks_like_path = "/" in choice or choice.endswith((".jsonl", ".gguf")) or Path(choice).exists()
    if instead and looks_like_path:
        what = "a hub id or a local directory" if group == "model" else "a JSONL file"
        return (f"{group}={choice} is not one of the shipped {group} configs; for {what} write "
                f"{instead}={choice}")
    near = difflib.get_close_matches(choice, sorted(options), n=1, cutoff=0.6)
    return (f"{group}={choice}: no such {group} config" + (f"; did you mean {group}={near[0]}?" if near else "")
            + f" (the configs: {', '.join(sorted(options))})")


def hydra_quoted(value: str) -> str:
    """``value`` as a quoted Hydra override value: commas, spaces, brackets and non-ASCII letters
    in a path would otherwise be read as override syntax (a comma even as a sweep)."""
    return "'" + value.replace("'", "\\'") + "'"
