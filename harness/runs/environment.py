"""What a run records about its environment: versions, determinism settings, timestamps."""

from __future__ import annotations

import os
import platform
import random
import subprocess
from datetime import datetime, timezone
from importlib import metadata

import numpy as np

from harness.paths import PACKAGE_DIR

PACKAGES = ["torch", "transformers", "tokenizers", "safetensors", "hydra-core", "omegaconf", "pandas",
            "pyarrow", "numpy", "scipy", "matplotlib", "rapidfuzz"]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ["prefix-harness", *PACKAGES]:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def harness_git_commit() -> str | None:
    """The harness checkout's commit (with ``-dirty`` for local changes), if it is a git checkout."""
    root = PACKAGE_DIR.resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("-dirty" if dirty else "")


def set_determinism(seed: int, device: str) -> dict:
    """Seed every generator and ask torch for deterministic kernels; returns what is in force."""
    import torch  # here: reading a run directory (figures, collect) needs no torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        # cuBLAS needs this workspace setting for deterministic matmuls; it must be set before first use.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    return {
        "seed": seed,
        "torch_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "cpu_threads": torch.get_num_threads(),
        "decoding": "greedy (argmax, first index on ties)",
    }
