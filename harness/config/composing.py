"""A config composed from overrides, and what overrides must be before Hydra reads them.

:func:`check_overrides` refuses, in one line and before Hydra creates anything, what Hydra would
answer with a block of its own (a key the config lacks, a group given something that is not one of
its configs, a stray word, a list written bare, a sweep without ``-m``); :func:`compose` runs it and
then Hydra's composition, for a command line (the CLI's Hydra applications compose once here before
Hydra runs) and for a notebook or test alike.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from omegaconf import DictConfig

from harness.config.schema import GROUPS, config_keys, register_configs
from harness.errors import HarnessError
from harness.paths import CONFIG_MODULE, shell_path, unexpanded_variable

# every option of a Hydra application's command line (`harness sweep --hydra-help`), spelled in full:
# Hydra's parser takes an abbreviation (`--res` for `--resolve`) and then blames the next argument
HYDRA_FLAGS = frozenset({"--help", "-h", "--hydra-help", "--version", "--cfg", "-c", "--resolve", "--package", "-p",
                         "--run", "-r", "--multirun", "-m", "--shell-completion", "-sc", "--config-path", "-cp",
                         "--config-name", "-cn", "--config-dir", "-cd", "--info", "-i"})
# those that take a value (`--cfg job`, `-cd DIR`): the one word after them is not an override
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


def check_overrides(args: list[str], config_dir: str | None, command: str | None = "harness sweep") -> None:
    """Refuse, in one line and before Hydra creates anything, an override whose key the config
    does not have (with the closest key it does have) and a config group given something that is
    not one of its configs (a model path or hub id goes in ``model.name_or_path``). Hydra's own
    answers are longer, suggest adding the key with ``+``, and leave a run directory behind.
    ``command``: the command line's (its options are Hydra's), or None for :func:`compose`, which
    composes one run's config from overrides alone."""
    if command is None:
        flag = next((a for a in args if a.startswith("-")), None)
        if flag is not None:
            raise HarnessError(f"{flag}: compose takes KEY=VALUE overrides only (it composes one run's config; "
                               f"-m and the other options are harness sweep's)")
    keys, lists, dicts = config_keys(), set(config_keys(lists=True)), config_keys(dicts=True)
    deleting = [a for a in args if a.startswith("~")]
    if deleting:  # every key has a value a run reads: a deleted group or key leaves its default in force, or fails
        raise HarnessError(f"{deleting[0]} deletes part of the config, which every run reads in full: set the value "
                           f"instead ({deleting[0][1:].split('=')[0]}=VALUE), or leave it out for the default")
    stray = bare_word(args)
    if stray is not None:
        group, _, choice = stray.partition("/")
        if group in GROUPS and choice and not Path(stray).exists():  # model/tiny: a config file's path, not its choice
            raise HarnessError(f"{stray} is not an override (KEY=VALUE): a config group's choice is written "
                               f"{group}={choice}" + (f" ({group}'s choices: "
                                                      f"{', '.join(sorted(group_options(group, config_dir)))})"
                                                      if choice not in group_options(group, config_dir) else ""))
        where = "; a run's directory is set with hydra.run.dir=DIR (`harness resume DIR` finishes one)" \
            if Path(stray).exists() or "/" in stray else ""
        raise HarnessError(f"{stray} is not an override (KEY=VALUE){where}" +
                           ("; --help lists the options" if command else ""))
    experiments = [a for a in args if a.split("=", 1)[0].lstrip("+") == "experiment" and "=" in a]
    if len(experiments) > 1 and "-m" not in args and "--multirun" not in args:
        raise HarnessError(f"experiment= is given twice ({' and '.join(experiments)}): the last would replace the "
                           f"first without a word; give one, and the keys you want changed on top of it")
    for arg in args:  # a quoted $VAR reaches Hydra unexpanded: $X makes a directory named so, ${X} fails to resolve
        key, _, value = arg.partition("=")  # (${now:...}, ${hydra.job.name}, ${seed}: Hydra's own, resolved)
        variable = unexpanded_variable(value, resolved_by_hydra=frozenset(keys))
        if key.lstrip("+") == "hydra.job.chdir" and unquoted(value).strip().lower() in ("true", "yes", "on", "1"):
            raise HarnessError(f"{arg}: the harness reads its input files (prompts.path, prefixes.path, ...) relative "
                               f"to where the command starts and keeps hydra.job.chdir false; give the paths relative "
                               f"to here, or absolute, and leave hydra.job.chdir out")
        if key.lstrip("+") in ("hydra.run.dir", "hydra.sweep.dir") and variable:
            raise HarnessError(f"{arg}: {variable.group()} was not expanded by the shell (it was quoted): give the "
                               f"path without single quotes, or in full (${{oc.env:{variable.group(2)}}} has Hydra "
                               f"read it)")
    unreadable = _unreadable_override(args)
    if unreadable:
        key, value = unreadable.split("=", 1)
        if key != key.strip() or any(c.isspace() for c in key) or value.startswith("="):  # 'seed =1', 'seed==1'
            plain, value = "".join(key.split()).lstrip("+~"), value.lstrip("=").strip()
            near = (f"did you mean {plain}={value}?" if plain in keys
                    else _near_key(plain, value, keys, lists).lstrip("; "))
            raise HarnessError(f"{unreadable}: an override is KEY=VALUE with no space in the key and one =; {near}")
        if not key.lstrip("+~").isascii():  # the value is fine: the key is no config key (séed=1)
            import unicodedata

            plain = "".join(c for c in unicodedata.normalize("NFKD", key.lstrip("+~")) if c.isascii())
            hint = (f"; did you mean {plain}={value}?" if plain in keys else _near_key(plain, value, keys, lists))
            raise HarnessError(f"{key} is not a config key (a key is plain ASCII: letters, digits, _ and .){hint}")
        bare = value.strip().strip("()").strip()
        if value.count("[") != value.count("]") or value.count("{") != value.count("}"):
            raise HarnessError(f"{unreadable}: a bracket is not closed: write the whole list, as {key}=[8,16]")
        if re.fullmatch(r"[-+]?[0-9.eE+-]+|\[.*\]", bare):  # a number or a list dressed in parentheses
            raise HarnessError(f"{unreadable}: the override grammar cannot read this value: write it as {key}={bare}")
        raise HarnessError(f"{unreadable}: the override grammar cannot read this value unquoted (a character such as "
                           f"a non-ASCII letter, a parenthesis or # in it): quote the value, as "
                           + shell_path(f'{key}="{value}"'))  # as the shell must pass it, an apostrophe too
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
        if key in GROUPS and not unquoted(value).strip():
            raise HarnessError(f"{key}= needs one of its configs (the configs: "
                               f"{', '.join(sorted(group_options(key, config_dir)))})")
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
                if command is None:
                    raise HarnessError(f"{key}={value} sweeps over values, and compose composes one run's config: "
                                       f"compose each value (harness sweep -m {key}={value} runs them all)")
                raise HarnessError(f"{key}={value} sweeps over values: add -m ({command} -m {key}={value}), one "
                                   f"run directory per value")
            if key in lists and bare and not bare.startswith(("[", "${", "null")) and "-m" not in args \
                    and "--multirun" not in args:
                raise HarnessError(f"{key} is a list: write {key}=[{bare}] (several values: {key}=[{bare},...])")
            continue
        raise HarnessError(f"{key} is not a config key{_near_key(key, value, keys, lists)}")


def _near_key(key: str, value: str, keys: list[str], lists: set[str]) -> str:
    """What to write instead of the unknown ``key``: for a bare name, the key of that name in a group
    (``limit``: ``prompts.limit``); for a dotted one, a close spelling among its siblings, else a run-wide
    key it may have been put under a group by mistake (``prefixes.seed``: the run's ``seed``). Only keys
    that hold a value (never a config group, whose value is a whole config), a list value only for a list
    key, and never the same name in another group (``locate.lengths`` is not ``prefix.lengths``) unless
    the group's own name is misspelt (``prompt.limit``). None close: the keys of the group it names."""
    import difflib

    every = [k for k in keys if not any(other.startswith(k + ".") for other in keys)]
    leaves = [k for k in every if k in lists] if unquoted(value).strip().startswith("[") else every
    parent, _, name = key.rpartition(".")
    group = difflib.get_close_matches(name, sorted(GROUPS), n=1, cutoff=0.75) if not parent else []
    if group:  # experimnt=quick: a config group, whose value is one of its configs
        return f"; did you mean {group[0]}={value}?"
    siblings = [k for k in leaves if k.rpartition(".")[0] == parent]
    pool = leaves if not parent else [k for k in leaves if "." not in k]  # where a misplaced name may belong

    def named(names: list[str], among: list[str]) -> list[str]:
        return [k for n in names for k in among if k.rpartition(".")[2] == n]

    nodes = sorted({k.rpartition(".")[0] for k in keys if "." in k})
    respelt = [f"{p}.{name}" for p in difflib.get_close_matches(parent, nodes, n=1, cutoff=0.75)
               if parent not in nodes and f"{p}.{name}" in leaves]  # prompt.limit: prompts.limit
    found = (named([name], pool) or respelt
             or [f"{parent}.{n}" if parent else n for n in difflib.get_close_matches(
                 name, [k.rpartition(".")[2] for k in siblings], n=1, cutoff=0.75)]
             or named(difflib.get_close_matches(name, [k.rpartition(".")[2] for k in pool], n=1, cutoff=0.75), pool))
    if found:
        listed = found[0] in lists and not unquoted(value).strip().startswith(("[", "${", "null"))
        return f"; did you mean {found[0]}={f'[{value}]' if listed else value}?"
    listing = sorted(k.rpartition(".")[2] for k in every if k.rpartition(".")[0] == parent)
    if parent and listing:
        return f" ({parent}'s keys: {', '.join(listing)})"
    return "; `harness sweep --cfg job` prints every key"


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


def override_list(overrides) -> list[str]:
    """``overrides`` as a list of KEY=VALUE strings, refused in one line (:class:`HarnessError`) where it
    is not one: a string (read letter by letter, it would be recorded as the run's command one
    character per override), another type, or an item that is not a non-empty string."""
    if isinstance(overrides, str):  # would be read letter by letter
        raise HarnessError(f"overrides must be a list of strings, e.g. [{overrides!r}], got the string {overrides!r}")
    if not isinstance(overrides, (list, tuple)):
        raise HarnessError(f"overrides must be a list of KEY=VALUE strings, e.g. ['model=tiny'], got {overrides!r}")
    overrides = list(overrides)
    odd = next((a for a in overrides if not isinstance(a, str) or not a.strip()), None)
    if odd is not None or None in overrides:
        what = "an empty string (an unset variable?)" if isinstance(odd, str) else f"{odd!r}, not a string"
        raise HarnessError(f"overrides must be KEY=VALUE strings; item {overrides.index(odd) + 1} is {what}")
    return overrides


def compose(overrides: list[str] = (), config_dir: str | Path | None = None) -> DictConfig:
    """The run config that ``harness sweep OVERRIDES`` would run, composed in-process (tests,
    notebooks). ``config_dir`` adds a user config directory, like ``--config-dir``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    overrides = override_list(overrides)
    check_overrides(overrides, str(config_dir) if config_dir is not None else None, command=None)
    register_configs()
    said: dict[str, list[str]] = {}
    for arg in (a for a in overrides if isinstance(a, str) and "=" in a and not a.startswith("-")):
        said.setdefault(override_key(arg), []).append(arg)
    for key, given in said.items():  # a script's base overrides and a change on top: Hydra applies the last
        if len(set(given)) > 1 and key != "experiment" and not key.startswith("hydra"):
            warnings.warn(f"{key} is given {len(given)} times ({' and '.join(given)}): the last, {given[-1]}, applies",
                          stacklevel=2)
    if config_dir is not None:
        if not Path(config_dir).is_dir():  # Hydra would only warn, and compose without it
            raise HarnessError(f"config_dir {config_dir} is not a directory (it should hold your config groups, "
                               f"e.g. model/NAME.yaml)")
        overrides = [f"hydra.searchpath=[file://{Path(config_dir).resolve()}]", *overrides]
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        try:
            return hydra_compose("config", overrides=list(overrides))
        except Exception as exc:  # Hydra's advice for an unknown key (+KEY=) is refused by the schema later
            said = str(exc)
            key = said.split("Could not override '", 1)[1].split("'", 1)[0] if "Could not override '" in said else ""
            mappings = config_keys(dicts=True)
            if key in mappings:  # claims.delta={...}: a mapping's entries are set one by one
                raise HarnessError(f"{key} is a mapping of its own entries: set each with +{key}.NAME=VALUE (e.g. "
                                   f"+claims.delta.norm_edit_distance=0.1)") from None
            if key and not any(key.startswith(d + ".") for d in mappings):
                raise HarnessError(f"{key} is not a config key (`harness sweep --cfg job` prints every key)") from None
            within = next((d for d in mappings if key.startswith(d + ".")), None)
            if within and "To append to your config use +" in said:  # a new entry of a mapping
                raise HarnessError(f"{key} is a new entry of {within}, which holds entries of your own: add it with "
                                   f"+{key}=VALUE") from None
            from hydra.errors import HydraException

            if isinstance(exc, HydraException):  # a group's unknown option (with the known ones), a free key without +
                raise HarnessError(override_problem(said, exc.__cause__)) from None
            raise


def override_key(override: str) -> str:
    """The config key an override sets (``+claims.delta.kl=0.1`` sets ``claims.delta.kl``)."""
    return override.split("=", 1)[0].lstrip("+~")


def override_problem(said: str, cause: BaseException | None) -> str:
    """One line for an override Hydra could not merge: which override, and OmegaConf's reason
    without its full_key / reference_type / object_type block ("prompts.limit=2.0: Value '2.0' of
    type 'float' could not be converted to Integer")."""
    first = said.strip().splitlines()[0] if said.strip() else said
    if first.startswith("Error merging override ") and cause is not None:
        reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        if "is not Optional" in reason:
            reason += " (it needs a value: leave the override out for the default)"
        if "is not a ListConfig" in reason:
            reason += " (a quoted list is text: write KEY=[a,b] without quotes)"
        typed = re.match(r"Value '(.*)' of type '\w+' could not be converted to (\w+)", reason)
        if typed:  # OmegaConf's wording names Python types: say what the key takes
            kind = {"Integer": "a whole number", "Float": "a number", "Boolean": "true or false"}.get(
                typed.group(2), typed.group(2).lower())
            reason = f"expected {kind}, got {typed.group(1)}"
        enum = re.match(r"Value .* \((\w+)\) is not a valid input for <enum '(\w+)'>", reason)
        if enum:  # a list or mapping given to a one-choice key: OmegaConf names the enum, not its choices
            from harness.config import schema

            choices = [m.value for m in getattr(schema, enum.group(2), [])]
            reason = (f"takes one of {', '.join(map(str, choices))}, not a {enum.group(1)}" if choices else reason)
        return f"{first.removeprefix('Error merging override ')}: {reason}"
    return " ".join(said.split())


