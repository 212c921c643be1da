"""Registrations from outside the package: each registry (backends, placements, isolation modes,
model sources, prefix sources) calls :func:`load_plugins` once it has defined its own entries, and
every entry point of the ``prefix_harness.<registry>`` group is loaded and called (a function of no
arguments that registers, e.g. with :func:`harness.model.backends.register_backend`). A distribution
declares one in its pyproject.toml:

    [project.entry-points."prefix_harness.backends"]
    mine = "my_package.backend:register"
"""

from __future__ import annotations

from functools import lru_cache

from harness.errors import HarnessError


@lru_cache(maxsize=1)
def _harness_entry_points() -> tuple:
    """Every ``prefix_harness.*`` entry point installed, read once per process: a scan of every
    installed distribution takes about 13 ms, and five registries ask (``cache_clear`` after
    installing one into a running process)."""
    from importlib.metadata import entry_points

    found = entry_points()  # one scan; .groups and .select work alike on Python 3.10 to 3.13
    return tuple(p for group in sorted(found.groups) if group.startswith("prefix_harness.")
                 for p in found.select(group=group))


def load_plugins(registry: str) -> list[str]:
    """Load and call every entry point of ``prefix_harness.<registry>``; their names. A plug-in
    that fails is one line naming it (the harness cannot know what it would have registered)."""
    loaded = []
    for point in (p for p in _harness_entry_points() if p.group == f"prefix_harness.{registry}"):
        try:
            point.load()()
        except HarnessError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's own bug, named in one line
            raise HarnessError(f"the {registry} plug-in {point.name!r} ({point.value}) failed to register: "
                               f"{type(exc).__name__}: {exc}; fix or uninstall its distribution") from None
        loaded.append(point.name)
    return loaded
