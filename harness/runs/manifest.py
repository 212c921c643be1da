"""What a run says about itself: the contents of its ``manifest.json`` (docs/run-directory.md and docs/concepts.md).

The values come from the experiment as built (:class:`harness.runs.experiment.Experiment`) and
the environment (:mod:`harness.runs.environment`); the runner writes the file once the tables are
written, so the table checksums it records are those of the files on disk.
"""

from __future__ import annotations

from harness.measure.driver import DriveOutcome
from harness.runs.environment import harness_git_commit, now_iso, package_versions
from harness.runs.experiment import Experiment, skipped_summary
from harness.runs.rundir import RunDir


def build_manifest(exp: Experiment, config: dict, started: str, outcome: DriveOutcome, failed: list[str],
                   tables: dict, rundir: RunDir, condition_seconds: dict[str, float], inputs: dict) -> dict:
    """``manifest.json`` of a finished sweep: the resolved config, the model as loaded (revision,
    dtype, device, attention implementation), versions, determinism settings, counts, timing (the
    B/C conditions' seconds by phase: ``condition_seconds``), the prefix cache's use, and the sha256
    of every table written."""
    loaded, cache = exp.loaded, exp.engine.prefix_cache
    versions = package_versions()
    return {
        "harness_version": versions["prefix-harness"],
        "harness_commit": harness_git_commit(),
        "config": config,
        "model": {
            "name_or_path": exp.model_label,
            "revision_requested": loaded.revision,
            "resolved_revision": loaded.resolved_revision,
            "dtype": loaded.dtype,
            # the linear layers' products in another precision (null: the weights' own)
            "linear_dtype": exp.engine.linear_dtype,
            "linear_layers_lowered": exp.lowered_linears,
            "device": loaded.device,
            "class": type(loaded.model).__name__,
            "attn_implementation": exp.attn_base,
            "probe": loaded.model.config._attn_implementation if exp.attn_base != loaded.model.config._attn_implementation
            else None,
            "device_map": getattr(loaded.model, "hf_device_map", None),  # where accelerate put each module
            "max_positions": loaded.max_positions,
            "gguf": loaded.source,  # sha256, quantization types and dequantized dtype of a GGUF source
            "adapter": loaded.adapter,  # a merged low-rank adapter: path, sha256, rank, base
        },
        "seed": exp.cfg.seed,
        "determinism": exp.determinism,
        "allocator": exp.allocator,
        "special_tokens_in_data": exp.cfg.special_tokens.value,
        # the prompts file, prefix file and adapter read, by absolute path and sha256
        "inputs": inputs,
        # a public benchmark's package, version, licence and the sha256 of every file read (null: a prefix file)
        "prefix_source": None if exp.source is None or exp.source.facts is None else {
            **exp.source.facts, "counts": exp.source.counts},
        "skipped": skipped_summary(exp.skipped or []),
        "versions": versions,
        "counts": {"prompts": len(exp.prompts), "prefixes": len(exp.prefixes), "conditions": len(exp.conditions),
                   "completed": len(tables.get(RunDir.CONDITIONS, ()))},
        "started": started,
        "finished": now_iso(),
        "batch_size": exp.batch_size,
        "prefix_cache": None if cache is None else {"budget_bytes": cache.budget_bytes, "kept_bytes": cache.kept_bytes,
                                                    "heads_computed": cache.misses, "heads_reused": cache.hits},
        # what continued the conditions: the harness's engine, or vLLM (its version, dtype, start seconds)
        "backend": exp.backend,
        "attention_analysis": exp.engine.attention,
        "decode_path": exp.engine.decode_path,
        # where this run's B/C conditions spent their seconds (what `harness plan` costs a design by)
        "condition_seconds": condition_seconds,
        "result_fingerprint": exp.result_fingerprint,
        "computed_this_run": outcome.computed,
        "reused": outcome.skipped,
        "failures": failed,
        "tables": {name: rundir.table_hashes()[name] for name in tables},
    }
