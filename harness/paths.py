"""Where the package's own files are: the shipped prompt and prefix sets, the demo models' weights,
and the Hydra config tree (every stage may use these)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).parent
DATA_DIR = PACKAGE_DIR / "data"  # the shipped prompt and prefix sets
ASSETS_DIR = PACKAGE_DIR / "assets"  # the shipped demo models
CONFIG_MODULE = "harness.conf"  # the config tree ships inside the package (Hydra's pkg:// search path)
