"""Which runs one table may hold: the one rule of every command that reads several runs together
(``collect``, ``claims``, ``figures``, ``causal-heads``, :func:`harness.runs.reading.load_runs`).

Runs of different result schemas are refused outright (their tables mean different things). Runs
that differ in a setting that changes every number (``max_new_tokens``, the decode path,
special-token handling, the metric set; for one model also its weights, tokenizer, dtype, the
precision of its linear products, its device, or the engine that continued it: vLLM's version,
dtype and settings) are refused unless the command was given ``--allow-mixed-settings``: one table would mix
them without a column saying which is which. A collected directory carries the settings of each
run it was made from, so reading it, alone or beside other runs, is judged on those.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.errors import HarnessError

# compared between every two runs, and within one model (other models may need other dtypes)
SHARED_SETTINGS = ("max_new_tokens", "decode_path", "special_tokens", "metrics")
PER_MODEL_SETTINGS = ("resolved_revision", "tokenizer", "dtype", "linear_dtype", "device", "backend")
# what a result fingerprint without the setting meant: runs from before decode paths decoded step by
# step; runs without a linear_dtype multiplied at their weights' own precision (None), runs
# without a backend ran on the harness's own engine (None)
DEFAULTS = {"decode_path": "stepwise"}


class Settings(NamedTuple):
    source: str  # the run (for a collected directory: the run it was collected from)
    values: dict  # the compared settings, the model and the result schema


def settings_of(fingerprint: dict) -> dict:
    """What the rule compares, from a run's result fingerprint (``manifest["result_fingerprint"]``)."""
    return {"schema": fingerprint.get("schema"), "model": fingerprint.get("model"),
            **{k: fingerprint.get(k, DEFAULTS.get(k)) for k in SHARED_SETTINGS + PER_MODEL_SETTINGS}}


def run_settings(label: str, manifest: dict) -> list[Settings]:
    """The settings a run's tables were computed under: a sweep's own, or for a collected directory
    those of each run it holds; empty for runs of early versions, which recorded none."""
    if "collected" in manifest:
        return [Settings(str(entry.get("source")), entry["values"]) for source in manifest.get("sources") or []
                if isinstance(source, dict) for entry in source.get("settings") or []
                if isinstance(entry, dict) and isinstance(entry.get("values"), dict)]
    fingerprint = manifest.get("result_fingerprint")
    return [Settings(label, settings_of(fingerprint))] if isinstance(fingerprint, dict) else []


def mixed_settings(settings: list[Settings], ignore: tuple[str, ...] = ()) -> list[str]:
    """Each setting (but those in ``ignore``) in which two runs differ, as ``setting (a in RUN vs b in RUN)``."""
    found, first = [], {}
    for source, values in settings:
        for setting in (s for s in SHARED_SETTINGS + PER_MODEL_SETTINGS if s not in ignore):
            scope = (setting,) if setting in SHARED_SETTINGS else (setting, values.get("model"))
            if scope not in first:
                first[scope] = (values.get(setting), source)
            elif first[scope][0] != values.get(setting):
                value, other = first[scope]
                where = "" if setting in SHARED_SETTINGS else f" for model {values.get('model')}"
                found.append(f"{setting}{where} ({str(value)[:24]} in {other} vs {str(values.get(setting))[:24]} "
                             f"in {source})")
    return found


def refuse_other_schemas(settings: list[Settings], unrecorded: list[str] = ()) -> None:
    """Refuse runs of different result schemas (``unrecorded``: runs that recorded none, of early versions)."""
    schemas = {str(v.get("schema")) for _, v in settings} | ({"None"} if unrecorded else set())
    if len(schemas) > 1:
        raise HarnessError(f"the runs hold results of different result schemas ({sorted(schemas)}); rerun the older "
                           f"runs with `harness resume RUN on_existing=resume` (it recomputes them) and read them "
                           f"again")


def check_compatible(settings: list[Settings], unrecorded: list[str] = (), *, allow_mixed_settings: bool = False,
                     ignore: tuple[str, ...] = (), option: str | None = "--allow-mixed-settings") -> list[str]:
    """Apply the rule to the settings of the runs read together; returns the mixed settings that
    ``allow_mixed_settings`` let through (to be recorded), or raises :class:`HarnessError`.
    ``ignore``: settings the reader's numbers do not depend on (``harness detect`` makes its own
    forward pass over each input: how the sweep continued it does not enter); ``option``: how the
    reader allows mixed settings, as the refusal offers it (None: it has no such option)."""
    refuse_other_schemas(settings, unrecorded)
    mixed = mixed_settings(settings, ignore)
    if mixed and not allow_mixed_settings:
        models = [v.get("model") for _, v in settings]
        why = ("the models' numbers on one page would not be comparable (each was measured under another setting)"
               if len(set(models)) == len(models) > 1 else
               "one table would mix them without a column saying which is which")
        offer = f", or pass {option}" if option else ""
        raise HarnessError(f"the runs differ in {'; '.join(mixed[:3])}{' ...' if len(mixed) > 3 else ''}: {why}; "
                           f"read runs of one setting together{offer}")
    return mixed
