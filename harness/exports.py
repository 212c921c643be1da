"""Lazy public names for the packages' ``__init__`` files: a package says what is public (a name and
the module that defines it) and each name is imported on first use, so importing a package stays
cheap (``harness --help`` does not load torch)."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, api: dict[str, str], namespace: dict) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package`` whose public names are ``api`` (name -> module);
    ``namespace`` is the package's ``globals()``, where a name is kept once imported."""

    def __getattr__(name: str):
        if name not in api:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(api[name]), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *api])

    return __getattr__, __dir__
