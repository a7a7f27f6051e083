"""The demo keeps serving the dashboard with --dashboard; report --html writes one self-contained file."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.demo.run import run_demo
from tests.served import first_page, url_in_output


def test_demo_with_dashboard_serves_the_fleet_page() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperpod_scheduler.cli.main", "demo", "--days", "1", "--dashboard", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        seen: list[str] = []
        url = url_in_output(proc, r"dashboard: (http://127\.0\.0\.1:\d+/)", 120, seen)
        assert url, "".join(seen[-20:])
        page = first_page(url, tries=50, pause_s=0.2)
        for cluster in ("p5-training", "g5-dev", "trn1-research"):
            assert cluster in page
        # Monday's ready-by start of g5-dev: its lead and its phases on the cluster page.
        g5 = urllib.request.urlopen(url + "clusters/g5-dev", timeout=5).read().decode()
        assert "Ready-by lead time" in g5 and "this schedule does not use ready_by" not in g5
        assert 'class="seg starting"' in g5 and "requested 06:20Z; launched" in g5
        assert "g5-workers: launched +" in g5  # the history's phases line
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_report_html_is_one_self_contained_file(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite"

    def keep_state(result, emu, config, state_path) -> None:  # type: ignore[no-untyped-def]
        # The demo's store is open in WAL mode: copy it with SQLite's backup API, not as bytes.
        with sqlite3.connect(state_path) as src, sqlite3.connect(state) as dst:
            src.backup(dst)

    run_demo(days=2, step_minutes=15, on_finish=keep_state)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        app,
        [
            "report",
            "--html",
            str(out),
            "--state",
            str(state),
            "--no-fsx",
            "--since",
            "2026-11-29T00:00Z",
            "--until",
            "2026-12-02T00:00Z",
        ],
    )
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "g5-dev" in html and "<svg" in html
    assert not re.search(r"""(src|href)=["']https?://""", html)  # nothing fetched from elsewhere
