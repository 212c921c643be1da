"""The noise floor: the drift numerics alone cause, measured on the run's own prompts.

For each of the first ``n_prompts`` prompts, A is rerun the way B/C conditions run (a batch of
identical rows, BOS from the prefix cache) and decoded and analysed without the KV cache (see
:meth:`harness.engine.Engine.noise_floor`); each is compared with A's reference like any
condition. Drift at or below these values cannot be told apart from numerical noise.
"""

from __future__ import annotations

import pandas as pd
from tqdm.auto import tqdm

from .assembly import Condition
from .engine import Engine
from .records import noise_record


def measure_noise_floor(engine: Engine, references: list[Condition], n_prompts: int, model_label: str,
                        progress: bool = True) -> pd.DataFrame:
    """One row per prompt and numerical probe (``batch``, ``no_cache``)."""
    rows = []
    for a in tqdm(references[:n_prompts], desc="noise floor", unit="prompt", disable=not progress):
        ref, _ = engine.reference(a)
        for probe, result in engine.noise_floor(ref).items():
            rows.append(noise_record(model_label, probe, result, ref.continuation))
    df = pd.DataFrame(rows)
    for col in ("model", "prompt_id", "probe"):
        df[col] = df[col].astype("category")
    return df
