"""Reading the package's imports and ``Engine(...)`` calls from its source (AST), for the boundary tests."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = "hyperpod_scheduler"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. hyperpod_scheduler.web.service
    target: str  # what it imports, e.g. hyperpod_scheduler.cli.report
    line: int


def modules(src: Path = SRC) -> Iterator[tuple[str, Path]]:
    for path in sorted((src / ROOT).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def imports_in(module: str, tree: ast.AST) -> Iterator[Import]:
    """Every import of the package, at any depth (inside functions and TYPE_CHECKING blocks too)."""
    package = module if _is_package(module) else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield Import(module, f"{base}.{alias.name}" if _is_module_like(base, alias.name) else base, node.lineno)


def _is_package(module: str) -> bool:
    path = SRC.joinpath(*module.split("."))
    return path.is_dir()


def _is_module_like(base: str, name: str) -> bool:
    """``from pkg import mod`` names a module when ``pkg/mod.py`` (or ``pkg/mod/``) exists."""
    path = SRC.joinpath(*base.split("."), name)
    return path.with_suffix(".py").exists() or path.is_dir()


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, read once per process: the boundary tests each walk the whole package, and
    parsing its ~250 modules again for each of them was most of their time. (Nothing rewrites the trees.)"""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def package_imports(src: Path = SRC) -> list[Import]:
    return list(_package_imports(src))


@functools.cache
def _package_imports(src: Path) -> tuple[Import, ...]:
    out = []
    for module, path in modules(src):
        out.extend(i for i in imports_in(module, parsed(path)) if i.target == ROOT or i.target.startswith(ROOT + "."))
    return tuple(out)


def engine_constructions(module: str, tree: ast.AST) -> list[int]:
    """Lines where ``Engine`` (under any name it was imported as) is called."""
    names = {"Engine"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(f"{ROOT}.engine"):
            names |= {a.asname or a.name for a in node.names if a.name == "Engine"}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if called in names:
            lines.append(node.lineno)
    return lines


def concern(module: str) -> str:
    """The top-level folder a module belongs to (``web``, ``engine``...); the package root is ``errors``-like."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT
