"""How much memory the harness may use: the automatic batch size and the prefix-cache budget.

Both read the free memory of the device once, when an experiment is built: the GPU's on CUDA,
the machine's (``/proc/meminfo``) otherwise.
"""

from __future__ import annotations

import torch

from harness.model.kv_size import kv_cache_bytes, shape_of

CPU_BATCH = 16  # enough for every prefix of one length; on a CPU memory is rarely the limit


def free_bytes(device: str) -> int:
    """Memory free now on ``device`` (a modest 4 GiB guess where it cannot be read)."""
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return free
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 4 * 2**30


def prefix_cache_bytes(megabytes: int | None, device: str) -> int:
    """The prefix cache's budget: ``megabytes`` MiB, or for None a quarter of the free memory."""
    return megabytes * 2**20 if megabytes is not None else free_bytes(device) // 4


def auto_batch_size(model: torch.nn.Module, dtype: str, device: str, longest: int, cap: int = 64) -> int:
    """A batch size that fits: on a GPU, what half of the free memory holds at ``longest`` tokens
    per row (the KV cache twice, for headroom, plus float32 logits and scores of a row); on a CPU,
    :data:`CPU_BATCH`."""
    if not device.startswith("cuda"):
        return CPU_BATCH
    config = model.config
    per_row = 2 * kv_cache_bytes(seq_len=longest, batch=1, dtype=dtype, **shape_of(config))
    per_row += 4 * longest * (getattr(config, "vocab_size", 0) + 4 * getattr(config, "hidden_size", 1024))
    return int(max(1, min(cap, (free_bytes(device) // 2) // per_row)))
