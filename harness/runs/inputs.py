"""The files a run was made from, known by content: the prompts file, the prefix file and the
adapter, each as its resolved absolute path and sha256 (a public benchmark's files are recorded
by :mod:`harness.inputs.prefix_source` in the manifest's ``prefix_source``).

The config keeps the paths as they were written, and a relative one means another file from
another working directory. So a run records its inputs (``run_fingerprint.json`` and
``manifest.json``), and a sweep into the directory (``harness resume``), ``check-determinism``
and ``collect`` compare them with what the paths hold now and refuse in one line where the
content differs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.errors import HarnessError
from harness.io import sha256_file
from harness.paths import adapter_dir

# what each recorded role is called in a message
ROLES = {"prompts": "prompts file", "prefixes": "prefix file", "adapter": "adapter"}
# what a reordered input file changes in a run, though each condition stays what it was
ORDER_DECIDES = {"prompts": "the noise floor's sample and which prompts prompts.limit keeps",
                 "prefixes": "which prefixes prefixes.per_group draws and the noise floor's sample"}


def read_sha256(path: str | Path, n: int | None = None, in_order: bool = True) -> str | None:
    """sha256 of what a run reads of a JSONL file: its first ``n`` entries (all where None), each
    as its JSON object with sorted keys, so that line endings, a byte-order mark or the spacing of
    the JSON change nothing; None where the file holds fewer or cannot be read. ``in_order=False``:
    of the entries as a set (a file's lines reordered, which changes the prefixes drawn and the
    noise floor's sample, not what each condition is)."""
    entries = _entries(path)
    return None if entries is None else _digest(entries, n, in_order)


def _entries(path: str | Path) -> list[str] | None:
    """Each entry (non-blank line) of a JSONL file as its JSON object with sorted keys (as written
    where it is no JSON: refused where it is read); None where the file cannot be read."""
    try:
        data = Path(path).read_bytes().removeprefix(b"\xef\xbb\xbf")
    except OSError:
        return None
    entries = []
    for line in (line for line in data.decode("utf-8", "replace").split("\n") if line.strip()):
        try:
            entries.append(json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False))
        except json.JSONDecodeError:
            entries.append(line.strip())
    return entries


def _digest(entries: list[str], n: int | None, in_order: bool = True) -> str | None:
    """:func:`read_sha256` of a file's :func:`_entries`."""
    if n is not None and len(entries) < n:
        return None
    read = entries[:n] if in_order else sorted(entries[:n])
    return hashlib.sha256("\n".join(read).encode("utf-8", "surrogatepass")).hexdigest()


def input_files(prompts_path: str | None, prefixes_path: str | None, adapter: str | None,
                prompts_limit: int | None = None) -> dict[str, dict]:
    """``{role: {"path": absolute path, "sha256": ...}}`` of the input files the config names that
    exist (a missing one is refused later, where it is read, with its own message). The prompts'
    and prefixes' entries also record ``read_lines`` and ``read_sha256`` (:func:`read_sha256`): the
    entries the run read, the first ``prompts_limit`` where the file holds that many (prompts
    appended after them change nothing the run used), else all (prefixes are drawn from the whole
    file)."""
    found = {}
    for role, path in (("prompts", prompts_path), ("prefixes", prefixes_path)):
        if path and Path(path).expanduser().is_file():  # ~ as the readers expand it
            where = Path(path).expanduser()
            found[role] = {"path": str(where.resolve()), "sha256": sha256_file(where)}
            entries = _entries(where)
            if entries is not None:
                n = prompts_limit if role == "prompts" and _positive(prompts_limit) else None
                n = n if n is not None and n <= len(entries) else None  # a limit above the file's size: all is read
                found[role].update(read_lines=n, read_sha256=_digest(entries, n),
                                   read_set_sha256=_digest(entries, n, in_order=False))
    if adapter:
        from harness.model.adapters import adapter_sha256  # torch comes with it: readers of tables need neither

        where = adapter_dir(adapter)
        try:
            found["adapter"] = {"path": str(where.resolve()), "sha256": adapter_sha256(where)}
        except OSError:  # not an adapter directory: the model's loading says so
            pass
    return found


def of_config(cfg) -> dict[str, dict]:
    """:func:`input_files` of a run config (validated, or as a manifest recorded it: a mapping,
    which may lack keys an earlier version did not have)."""
    def get(group: str, key: str):
        return (cfg.get(group) or {}).get(key)

    return input_files(get("prompts", "path"), get("prefixes", "path"), get("model", "adapter"),
                       get("prompts", "limit"))


def _positive(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0


def contents(inputs) -> dict:
    """role -> sha256 of a recorded ``inputs`` mapping (:func:`input_files`): what must not change
    between two records of one run (a path may move; the content may not)."""
    if not isinstance(inputs, dict):
        return {}
    return {role: (entry or {}).get("sha256") for role, entry in inputs.items() if isinstance(entry, dict)}


def manifest_disagrees(marker: dict | None, manifest: dict | None) -> bool:
    """Whether a run's ``manifest.json`` records another configuration or other input files than its
    ``run_fingerprint.json`` (``marker``): a manifest, and the tables with it, copied in from
    another run (False where either record is missing)."""
    if not isinstance(marker, dict) or not isinstance(manifest, dict):
        return False
    if isinstance(marker.get("inputs"), dict) and isinstance(manifest.get("inputs"), dict) \
            and contents(marker["inputs"]) != contents(manifest["inputs"]):
        return True
    config = manifest.get("config")
    if not isinstance(config, dict) or not isinstance(marker.get("config"), str):
        return False
    from harness.config import NOT_RESULT_KEYS
    from harness.runs.store import fingerprint

    return fingerprint({k: v for k, v in config.items() if k not in NOT_RESULT_KEYS}) != marker["config"]


def _changed(recorded: dict | None, now: dict[str, dict]) -> list[tuple[str, dict, dict]]:
    """``(role, as recorded, as named now)`` per input whose content differs (a role recorded but no
    longer named, or named anew, counts); none where ``recorded`` is None (runs of earlier versions
    recorded none)."""
    if not isinstance(recorded, dict):
        return []
    pairs = ((role, recorded.get(role) or {}, now.get(role) or {}) for role in sorted(set(recorded) | set(now)))
    return [(role, was, is_) for role, was, is_ in pairs
            if was.get("sha256") != is_.get("sha256") and not _still_read(was, is_)]


def _still_read(was: dict, is_: dict) -> bool:
    """Whether what a run read of a file it recorded with ``read_sha256`` (:func:`input_files`) is
    what the file named now gives: lines added after them, or the file saved with other line
    endings or JSON spacing, change nothing it used."""
    n, path = was.get("read_lines"), is_.get("path")
    return (n is None or _positive(n)) and bool(path) and bool(was.get("read_sha256")) \
        and read_sha256(path, n) == was["read_sha256"]


def changed_inputs(recorded: dict | None, now: dict[str, dict], config: dict | None = None) -> list[str]:
    """One phrase per recorded input whose content differs from what the config names now
    (:func:`_changed`); with the run's ``config``, a path it names that holds no file from this
    working directory is said as such (a relative path read elsewhere), not as "none"."""
    out = []
    for role, was, is_ in _changed(recorded, now):
        then = f"{was.get('path')} (sha256 {str(was.get('sha256'))[:12]}...)" if was else "none"
        here = f"{is_.get('path')} (sha256 {str(is_.get('sha256'))[:12]}...)" if is_ else "none"
        named = ((config or {}).get(role) or {}).get("path") if role in ("prompts", "prefixes") else None
        if not is_ and named:
            out.append(f"its {ROLES.get(role, role)} was {then}, and the config's {role}.path {named} names no file "
                       f"from {Path.cwd()}")
        elif was.get("read_set_sha256") and is_.get("path") \
                and read_sha256(is_["path"], was.get("read_lines"), False) == was["read_set_sha256"]:
            out.append(f"its {ROLES.get(role, role)} {is_['path']} holds the entries the run read in another order "
                       f"(the order decides {ORDER_DECIDES.get(role, 'what is read')})")
        else:
            out.append(f"its {ROLES.get(role, role)} was {then}, the config now reads {here}")
    return out


def refuse_changed(run: str, recorded: dict | None, now: dict[str, dict], what: str, otherwise: str = "",
                   config: dict | None = None) -> None:
    """Raise a one-line :class:`HarnessError` where :func:`changed_inputs` finds any: ``what`` the
    command would do with them, and what to do instead: run from the directory the run was made in
    (a relative path read elsewhere) or restore the files, only the latter where each changed file is
    the one recorded, edited in place; ``otherwise``: the command's own further way out; ``config``:
    the run's, to name a path it gives that holds nothing here (:func:`changed_inputs`)."""
    gone = [f"the {ROLES.get(role, role)} {entry['path']}" for role, entry in (recorded or {}).items()
            if isinstance(entry, dict) and entry.get("path") and not Path(entry["path"]).exists()]
    if gone:  # moved or deleted: what to restore, not which directory to run from
        raise HarnessError(f"{run} was made from {', '.join(gone)}, which no longer exists: {what}; restore it (the "
                           f"manifest records its sha256) or give its new path")
    changed = changed_inputs(recorded, now, config)
    if changed:
        in_place = all(_same_file(was.get("path"), is_.get("path")) for _, was, is_ in _changed(recorded, now))
        remedy = ("restore the files (the manifest records their sha256: they were edited in place)" if in_place else
                  "run it from the directory the run was made in (the paths above say where), or restore the files")
        raise HarnessError(f"{run} was made from other input files than its config names here: {'; '.join(changed)}. "
                           f"{what}; {remedy}" + (f", {otherwise}" if otherwise else ""))


def _same_file(a, b) -> bool:
    return bool(a and b) and Path(a).resolve() == Path(b).resolve()


def relative_elsewhere(run: str, config: dict | None, recorded: dict | None, given: list[str]) -> str | None:
    """Why a resume from this working directory cannot find an input the run named by a relative
    path (None where it can, or where ``given`` overrides name that input anew): the path it was read
    as when the run was made, and the directory to resume from. Without this the sweep says only
    "file not found" for a file that is where the run was made."""
    for role in ("prompts", "prefixes"):
        path = ((config or {}).get(role) or {}).get("path")
        entry = (recorded or {}).get(role) if isinstance(recorded, dict) else None
        if not path or not isinstance(entry, dict) or any(g.startswith(f"{role}.path=") for g in given):
            continue
        rel, then = Path(path).expanduser(), Path(str(entry.get("path", "")))
        if rel.is_absolute() or rel.exists() or not entry.get("path"):
            continue
        if not then.is_file():  # moved or deleted: where it was, not which directory to resume from
            return (f"{run} names its {ROLES[role]} by the relative path {path}, which is neither here nor where it "
                    f"was when the run was made ({then}): restore it there (the manifest records its sha256), or "
                    f"add {role}.path=NEW_PATH")
        base = Path(*then.parts[:len(then.parts) - len(rel.parts)]) if then.parts[-len(rel.parts):] == rel.parts \
            else then.parent
        return (f"{run} names its {ROLES[role]} by the relative path {path}, which {Path.cwd()} does not hold: "
                f"when the run was made it was {then}; resume from {base} (cd there first), or add {role}.path={then}")
    return None
