"""The trainer's house rules, checked from the source: it uses the harness only through public
names, the harness never imports it, and no module grows past 400 lines (as in the harness)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from demo_training.tests.support import PACKAGE

MAX_LINES = 400
MODULES = sorted(PACKAGE.glob("*.py"))
HARNESS = PACKAGE.parent / "harness"


def harness_names(path: Path) -> list[str]:
    """Every name ``path`` takes from the harness: ``harness.x.y`` for ``from harness.x import y``,
    and each attribute read through a harness module imported whole (``import harness.x as h``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "harness":
            names += [f"{node.module}.{a.name}" for a in node.names]
            aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "harness":
                    names.append(a.name)
                    aliases[a.asname or a.name.split(".")[0]] = a.asname and a.name or "harness"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            names.append(f"{aliases[node.value.id]}.{node.attr}")
    return names


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_the_trainer_uses_only_public_names_of_the_harness(module):
    private = [n for n in harness_names(module) if any(part.startswith("_") for part in n.split("."))]
    assert not private, f"{module.name} uses private names of the harness: {private}"


def test_the_check_sees_private_names(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from harness.model.loading import _local_files_sha256\nimport harness.io as hio\n"
                     "def f():\n    return hio._private()\n")
    assert harness_names(probe) == ["harness.model.loading._local_files_sha256", "harness.io",
                                    "harness.io._private"]


def imports(path: Path) -> set[str]:
    """The top-level packages ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add((node.module or "").split(".")[0])
    return found


def test_the_harness_never_imports_the_trainer():
    users = [str(p.relative_to(HARNESS)) for p in HARNESS.rglob("*.py") if "demo_training" in imports(p)]
    assert not users, f"harness modules that import the trainer: {users}"


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_module_size(module):
    lines = module.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module.name} has {lines} lines (at most {MAX_LINES}): split it by concept"
