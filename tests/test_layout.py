"""The package's house rules, checked from the source: stages import only from the stages below
them, no module imports back into a cycle, no module imports another's private names, every stage
package's ``__init__`` says what is public there, and no module grows past 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "harness"

# Bottom to top. A module may import from its own stage and from any stage below it, never above.
STAGES = ["base", "inputs", "model", "config", "measure", "analysis", "reporting", "runs", "entry"]
BASE = {"errors", "io", "paths", "exports", "conf", "plugins", "numbers"}  # the modules every stage may use
ENTRY = {"cli", "__init__", "__main__"}  # the command line and the public API: may use anything
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:  # the package itself (harness/__init__.py)
        return "entry"
    head = parts[1]
    if head in BASE:
        return "base"
    if head in ENTRY:
        return "entry"
    return head


def imports_of(path: Path, module: str) -> set[str]:
    """Every harness module ``path`` imports, at the top or inside a function."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "harness"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "harness":
                continue
            for alias in node.names:  # `from harness.x import y`: y may be a module of its own
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return {m for m in found if m != module}


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {m: imports_of(p, m) for m, p in MODULES.items()}


def test_every_module_belongs_to_a_stage():
    unknown = sorted(m for m in MODULES if stage_of(m) not in STAGES)
    assert not unknown, f"modules outside the stage folders {STAGES}: {unknown}"


def test_no_import_from_a_stage_above():
    upward = [f"{m} ({stage_of(m)}) imports {d} ({stage_of(d)})" for m, deps in GRAPH.items() for d in deps
              if d in MODULES and STAGES.index(stage_of(d)) > STAGES.index(stage_of(m))]
    assert not upward, "imports back up the stages:\n" + "\n".join(sorted(upward))


def test_no_import_cycle():
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(GRAPH.get(m, ())):
            if d not in MODULES:
                continue
            if state.get(d) == 1:
                cycles.append(path[path.index(d):] + [d] if d in path else [m, d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def private_imports(path: Path, module: str) -> list[str]:
    """Private names (``_x``, not dunders) that ``path`` takes from another harness module, by
    ``from harness.x import _y`` or as ``x._y`` of a harness module it imported."""
    found, aliases = [], {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness") and not node.level:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif alias.name.startswith("_") and not alias.name.startswith("__") and node.module != module:
                    found.append(f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("harness") and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{aliases[node.value.id]}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names():
    found = [f"{m}: {what}" for m, p in MODULES.items() for what in private_imports(p, m)]
    assert not found, "private names used across modules (make them public, with a docstring):\n" + "\n".join(found)


STAGE_PACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py") if p.parent.name in STAGES)


@pytest.mark.parametrize("stage", STAGE_PACKAGES)
def test_every_stage_says_what_is_public(stage):
    import importlib

    package = importlib.import_module(f"harness.{stage}")
    assert (package.__doc__ or "").strip(), f"harness/{stage}/__init__.py needs a docstring saying what the stage is for"
    public = getattr(package, "__all__", None)
    assert public, f"harness/{stage}/__init__.py needs __all__: the names public in this stage"
    for name in public:
        assert getattr(package, name) is not None
        assert f"``{name}``" in package.__doc__, f"harness/{stage}: {name} is in __all__ but not in the docstring"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{MODULES[module]} has {lines} lines (at most {MAX_LINES}): split it by concept"


def test_the_checks_can_fail():
    """The graph builder sees function-level and relative imports (an import hidden in a function
    closed each of the old cycles), and private names taken either way are found."""
    src = ("def f():\n    from harness.runs import runner\n    from ..reporting.report import write_outputs\n"
           "    from harness.analysis.crossed import _private\n    return runner._hidden\n")
    tmp = PACKAGE / "measure" / "_probe_for_test.py"
    try:
        tmp.write_text(src)
        found = imports_of(tmp, "harness.measure._probe_for_test")
        private = private_imports(tmp, "harness.measure._probe_for_test")
    finally:
        tmp.unlink()
    assert found == {"harness.runs.runner", "harness.reporting.report", "harness.analysis.crossed"}
    assert private == ["from harness.analysis.crossed import _private", "harness.runs.runner._hidden"]
