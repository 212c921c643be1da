"""Reading training checkpoints without unpickling: ``torch.load`` with ``weights_only=False``
runs whatever code a crafted file carries, so checkpoints are read as data only."""

from __future__ import annotations

from pathlib import Path

import torch

from harness.errors import HarnessError


def load_checkpoint(path: Path) -> dict:
    """A checkpoint read as data only (tensors, numbers, text, lists, dicts): unpickling anything
    else could run code, so it is refused."""
    import pickle

    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        why = "could run code" if isinstance(exc, pickle.UnpicklingError) else "cannot be read"
        raise HarnessError(f"{path} was not loaded: it {why} ({str(exc).strip()[:160] or type(exc).__name__}); "
                           "delete it, or start again without --resume") from None
