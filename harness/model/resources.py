"""How much memory the harness may use, and how it gets it: the automatic batch size, the
prefix-cache budget, and the CPU allocator's settings.

The first two read the free memory of the device once, when an experiment is built: the GPU's on
CUDA, the machine's (``/proc/meminfo``) otherwise.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import torch

from harness.errors import HarnessError
from harness.model.kv_size import kv_cache_bytes, shape_of

CPU_BATCH = 16  # enough for every prefix of one length at the default lengths
# A CPU batch's KV buffers at most CPU_BATCH_KV_BYTES, or its rows at most CPU_BATCH_TOKENS tokens,
# whichever allows more rows (one row at least): once rows are long, a batch buys no time on a CPU
# (its products are already large) and costs memory. GPT-2-small-sized at a 2,048-token prefix: batch 4
# took 35.9 s and peaked at 2,679 MB, batch 1 34.4 s and 1,607 MB (benchmarks/sweep_cost.py --long).
# While they are short, the weights' pass is most of a decoding step, and every row more in a batch
# shares it: at the default design's longest rows (~380 tokens, 26.7 MiB of KV each) the bytes alone
# allowed 9 of a length's 10 prefixes, and the 10th decoded alone; as one batch of 10 the 164-condition
# sweep's decoding took 35 s instead of 55 s (its conditions 75 s instead of 100 s, AMD EPYC, 2 threads).
CPU_BATCH_KV_BYTES = 256 * 2**20
CPU_BATCH_TOKENS = 4096


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
    :data:`CPU_BATCH`, or fewer where the rows would pass both :data:`CPU_BATCH_KV_BYTES` of KV and
    :data:`CPU_BATCH_TOKENS` tokens."""
    config = model.config
    if not device.startswith("cuda"):
        try:
            per_row = kv_cache_bytes(seq_len=longest, batch=1, dtype=dtype, **shape_of(config))
        except (AttributeError, TypeError, HarnessError):  # a config that names its shape otherwise
            return CPU_BATCH
        rows = max(CPU_BATCH_KV_BYTES // max(per_row, 1), CPU_BATCH_TOKENS // max(longest, 1))
        return int(max(1, min(CPU_BATCH, rows)))
    per_row = 2 * kv_cache_bytes(seq_len=longest, batch=1, dtype=dtype, **shape_of(config))
    per_row += 4 * longest * (getattr(config, "vocab_size", 0) + 4 * getattr(config, "hidden_size", 1024))
    return int(max(1, min(cap, (free_bytes(device) // 2) // per_row)))


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4


def keep_freed_memory() -> dict | None:
    """Have glibc's allocator keep freed memory for reuse instead of handing it back to the system.

    By default glibc serves every allocation above a threshold (at most 32 MiB) with a fresh
    ``mmap`` and unmaps it when freed, so each of a forward pass's large temporaries (a batch's
    logits, its attention rows, a layer's activations) is page-faulted in anew, zero-filled by the
    kernel: on a 2-core CPU that was a fifth of a SmolLM2 sweep's time (``benchmarks/real_models.py``).
    Served from the heap and kept, the same buffers are reused. The arithmetic is unchanged (the
    numbers are identical bit for bit); the process keeps its peak memory until it exits. Linux
    with glibc only; returns the settings made (for the manifest), or None where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    settings = {"M_MMAP_MAX": (_M_MMAP_MAX, 0), "M_TRIM_THRESHOLD": (_M_TRIM_THRESHOLD, 2**31 - 1),
                "M_TOP_PAD": (_M_TOP_PAD, 256 * 2**20)}
    made = {name: value for name, (param, value) in settings.items() if mallopt(param, value) == 1}
    return made or None
