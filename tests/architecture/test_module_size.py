"""Every engine module holds one responsibility and stays under 500 lines: the day one grows past it,
this names it, so it is split by responsibility rather than left to grow into another ``Engine``."""

from __future__ import annotations

from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "src" / "hyperpod_scheduler" / "engine"
LIMIT = 500


def test_no_engine_module_reaches_500_lines() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(ENGINE.glob("*.py"))}
    assert len(sizes) > 10, f"engine modules not found in {ENGINE}"
    over = {name: n for name, n in sizes.items() if n >= LIMIT}
    assert not over, f"engine modules at or over {LIMIT} lines (split them by responsibility): {over}"
