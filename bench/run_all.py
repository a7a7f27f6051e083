"""Run every benchmark in bench/ and write bench/README.md with the latest figures.

    .venv/bin/python bench/run_all.py            # the full figures (several minutes)
    .venv/bin/python bench/run_all.py --quick    # every script with --quick (about a minute)

Each ``*_bench.py`` runs as its own process (one that fails or hangs is reported, the others still
run); its Markdown output goes into the summary as printed. The raw figures are kept in
bench/results/latest.json; the figures of the run before are read from there first and every figure
that moved is shown next to its previous value.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "latest.json"
README = HERE / "README.md"
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
# Every *_bench.py runs with its defaults, fleet_wave_bench.py included (issue 14: the 19:00 wave of
# 400 targets x 25 clusters through the real orchestrator and worker on a simulated clock).
# Runs beyond "each script with its defaults": the fleet tick at 10,000 clusters (issue 7; time only: the
# memory target is at 1,000 clusters, and the traced pass would take longer than all the rest).
EXTRA_FULL = [("tick_bench.py", ["--clusters", "10000", "--time-only"], "tick_bench.py --clusters 10000 --time-only")]


@dataclass
class Run:
    label: str
    command: list[str]
    exit_code: int | None = None  # None: timed out
    seconds: float = 0.0
    output: str = ""
    error_tail: str = ""
    figures: dict[str, list[float]] = field(default_factory=dict)
    at: str = ""  # when it ran (a run kept from an earlier summary keeps its own time)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def figures(output: str) -> dict[str, list[float]]:
    """Every line that carries numbers, keyed by the line with its numbers blanked out."""
    found: dict[str, list[float]] = {}
    for line in output.splitlines():
        values = [float(v.replace(",", "")) for v in NUMBER.findall(line)]
        if not values or set(line.strip()) <= set("|-: "):
            continue
        key = " ".join(NUMBER.sub("#", line).split())
        while key in found:  # the same shape twice (two rows alike): keep both apart
            key += " +"
        found[key] = values
    return found


def run(label: str, args: list[str], timeout: float) -> Run:
    command = [sys.executable, str(HERE / args[0]), *args[1:]]
    result = Run(
        label,
        [Path(command[0]).name, *[os.path.relpath(c, HERE.parent) if c.startswith("/") else c for c in command[1:]]],
    )
    print(f"running {label} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent)
        result.exit_code = done.returncode
        result.output = done.stdout
        result.error_tail = "\n".join(done.stderr.strip().splitlines()[-15:])
    except subprocess.TimeoutExpired as exc:
        result.output = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        result.error_tail = f"timed out after {timeout:.0f} s"
    result.seconds = time.perf_counter() - t0
    result.at = _now()
    result.figures = figures(result.output)
    return result


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def kept(previous: dict[str, Any] | None, runs: list[Run], quick: bool) -> list[Run]:
    """With --only: the other benchmarks' latest figures, carried over from the previous summary."""
    if previous is None or bool(previous.get("quick")) != quick:
        return []
    fresh = {r.label for r in runs}
    # A label no benchmark makes any more (a script removed, an extra run renamed) is dropped, not carried.
    made = {p.name for p in HERE.glob("*_bench.py")} | {label for _, _, label in EXTRA_FULL}
    out = []
    for old in previous.get("runs", []):
        if old.get("label") not in fresh and old.get("label") in made:
            out.append(Run(**{**old, "at": old.get("at") or previous.get("generated_at", "?")}))
    return out


def _blocks(output: str) -> list[str]:
    """Tables as they are (they render); every other run of lines in a text block."""
    out: list[str] = []
    text: list[str] = []
    table: list[str] = []
    for line in output.rstrip().splitlines():
        if line.lstrip().startswith("|"):
            if text:
                out.append("```text\n" + "\n".join(text) + "\n```")
                text = []
            table.append(line)
        else:
            if table:
                out.append("\n".join(table))
                table = []
            if line.strip():
                text.append(line)
    if text:
        out.append("```text\n" + "\n".join(text) + "\n```")
    if table:
        out.append("\n".join(table))
    return out


def _change(prev: list[float], now: list[float]) -> str:
    parts = []
    for a, b in zip(prev, now, strict=False):
        if a == b:
            continue
        parts.append(f"{_fmt(a)} → {_fmt(b)}" + (f" ({100 * (b - a) / a:+.0f}%)" if a else ""))
    return "; ".join(parts[:4]) + (" …" if len(parts) > 4 else "")


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v == int(v) and abs(v) >= 1000 else f"{v:g}"


def comparison(runs: list[Run], previous: dict[str, Any] | None, quick: bool) -> list[str]:
    if previous is None:
        return ["No previous run recorded: the next run will be compared with this one."]
    lines = [f"Previous run: {previous.get('generated_at', '?')} on {previous.get('cores', '?')} cores"
             f" ({'quick' if previous.get('quick') else 'full'} figures)."]  # fmt: skip
    if bool(previous.get("quick")) != quick:
        lines.append("That run used the other mode (quick / full), so its figures are not comparable; not compared.")
        return lines
    before = {r["label"]: r for r in previous.get("runs", [])}
    rows = []
    for r in runs:
        old = before.get(r.label)
        if old is None:
            rows.append(f"| {r.label} | (new) | |")
            continue
        if old.get("exit_code") != r.exit_code:
            rows.append(f"| {r.label} | exit code | {old.get('exit_code')} → {r.exit_code} |")
        for key, now in r.figures.items():
            prev = old.get("figures", {}).get(key)
            if prev is not None and prev != now and len(prev) == len(now):
                shown = key.replace("|", "/")
                rows.append(f"| {r.label} | `{shown[:90]}` | {_change(prev, now)} |")
    if not rows:
        lines.append("Every figure is the same as in the previous run.")
        return lines
    lines += ["", "| benchmark | line (numbers as #) | previous → now |", "|---|---|---|", *rows]
    return lines


def write_readme(runs: list[Run], meta: dict[str, Any], compared: list[str], quick: bool) -> None:
    mode = "quick (`--quick`)" if quick else "full"
    lines = [
        "# Benchmarks",
        "",
        "Written by `bench/run_all.py`; do not edit by hand. Raw figures: `bench/results/latest.json`.",
        "",
        "## How to reproduce",
        "",
        "```console",
        "$ .venv/bin/python bench/run_all.py            # full figures",
        "$ .venv/bin/python bench/run_all.py --quick    # every script with --quick",
        "$ .venv/bin/python bench/<name>_bench.py --help # one benchmark, with its own options",
        "```",
        "",
        "Speed figures depend on the machine: compare runs on the same one. Nothing here calls AWS; every",
        "figure comes from the local emulator on loopback.",
        "",
        "## Latest run",
        "",
        f"- when: {meta['generated_at']}",
        f"- machine: {meta['cores']} cores, {meta['platform']}, Python {meta['python']}",
        f"- mode: {mode}",
        "",
        "| benchmark | status | wall | run at |",
        "|---|---|---|---|",
    ]
    for r in runs:
        status = "ok" if r.ok else ("timed out" if r.exit_code is None else f"failed (exit {r.exit_code})")
        lines.append(f"| {r.label} | {status} | {r.seconds:.1f} s | {r.at} |")
    lines += ["", "## Compared with the previous run", "", *compared, ""]
    for r in runs:
        lines += [f"## {r.label}", "", f"`{' '.join(r.command)}` ({r.seconds:.1f} s on {meta['cores']} cores)", ""]
        if not r.ok:
            lines += [
                "**This benchmark did not finish cleanly:**",
                "",
                "```text",
                r.error_tail or "(no output)",
                "```",
                "",
            ]
        for block in _blocks(r.output):
            lines += [block, ""]
    README.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark; skip the extra runs")
    parser.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="run only these scripts (the others' figures are kept from the last summary)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before one benchmark is stopped")
    args = parser.parse_args()
    scripts = sorted(p.name for p in HERE.glob("*_bench.py"))
    if args.only:
        scripts = [s for s in scripts if s in args.only or s.removesuffix(".py") in args.only]
    plan = [(s, [s, *(["--quick"] if args.quick else [])]) for s in scripts]
    if not args.quick:
        plan += [(label, [script, *extra]) for script, extra, label in EXTRA_FULL if script in scripts]
    previous = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else None
    runs = [run(label, cmd, args.timeout) for label, cmd in plan]
    compared = comparison(runs, previous, args.quick)
    if args.only:
        runs = sorted([*runs, *kept(previous, runs, args.quick)], key=lambda r: r.label)
    meta = {
        "generated_at": _now(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": f"{platform.system()} {platform.machine()}",
        "quick": args.quick,
    }
    write_readme(runs, meta, compared, args.quick)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({**meta, "runs": [asdict(r) for r in runs]}, indent=2) + "\n", encoding="utf-8")
    failed = [r.label for r in runs if not r.ok]
    print(
        f"wrote {README.relative_to(HERE.parent)}"
        + (f"; did not finish cleanly: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
