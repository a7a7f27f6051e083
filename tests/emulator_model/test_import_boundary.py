"""The emulator is a witness: it imports nothing of the product but the shared error types.

``hyperpod_scheduler.errors`` (UsageError for bad configuration) is allowed everywhere, and the Slurm
edge in ``slurm_bridge.py`` only. Anything else (cluster rules, request building, describe conversion,
the product's model validation) would let the emulator agree with the scheduler by construction.
"""

from __future__ import annotations

import ast
from pathlib import Path

import hyperpod_scheduler.emulator as emulator_package

ROOT = Path(emulator_package.__file__).parent
ALLOWED = {"hyperpod_scheduler.errors"}
ALLOWED_IN = {"slurm_bridge.py": {"hyperpod_scheduler.slurm"}}


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append((node.lineno, "." * node.level + (node.module or "")))
    return found


def _allowed(module: str, name: str) -> bool:
    if module.startswith("."):
        return module.startswith("..") is False  # a relative import stays inside emulator/
    if not module.startswith("hyperpod_scheduler"):
        return True
    if module.startswith("hyperpod_scheduler.emulator"):
        return True
    allowed = ALLOWED | ALLOWED_IN.get(name, set())
    return any(module == a or module.startswith(a + ".") for a in allowed)


def test_the_emulator_imports_nothing_of_the_product() -> None:
    modules = sorted(ROOT.rglob("*.py"))
    assert len(modules) > 20, "the walk found too few modules to mean anything"
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in modules
        for line, module in _imports(ast.parse(path.read_text(encoding="utf-8")))
        if not _allowed(module, path.name)
    ]
    assert bad == []


def test_the_check_itself_sees_a_forbidden_import() -> None:
    tree = ast.parse(
        "from hyperpod_scheduler.cluster.rules import check_semantics\n"
        "import hyperpod_scheduler.aws.model\n"
        "from hyperpod_scheduler.slurm.commands import SubprocessSlurm\n"
        "from hyperpod_scheduler.errors import UsageError\n"
        "def f():\n    from hyperpod_scheduler.engine import tick\n"
    )
    verdicts = {module: _allowed(module, "model_nodes.py") for _, module in _imports(tree)}
    assert verdicts == {
        "hyperpod_scheduler.cluster.rules.check_semantics": False,
        "hyperpod_scheduler.aws.model": False,
        "hyperpod_scheduler.slurm.commands.SubprocessSlurm": False,
        "hyperpod_scheduler.errors.UsageError": True,
        "hyperpod_scheduler.engine.tick": False,
    }
    assert _allowed("hyperpod_scheduler.slurm.commands.SubprocessSlurm", "slurm_bridge.py")
