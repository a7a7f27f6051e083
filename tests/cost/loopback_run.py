"""Run the demo or the quick tour with every connection off loopback refused and recorded.

``python tests/cost/loopback_run.py {demo|tour} DIR``: the guard goes in before anything of the product
is imported, so it covers every client, thread and library. Exit 0 when everything ran and nothing
tried to leave the machine; 3 (with each attempt on stderr) when something did; anything else when
a step failed. Used by ``test_loopback.py``, in a subprocess of its own: the guard is the suite's (tests/offline.py),
without the metadata setting the suite's own processes get, so the product is proven without it.
"""

from __future__ import annotations

import sys
from typing import Any

from tests import offline

offline.guard(metadata_off=False)  # the product's own behaviour: no AWS_EC2_METADATA_DISABLED set for it

# Only now the product.
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from hyperpod_scheduler.cli.main import app  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def cli(*args: str) -> None:
    """One command as the console script runs it; a non-zero exit stops the run."""
    try:
        app(list(args), standalone_mode=False)
    except SystemExit as exc:
        if exc.code:
            raise
    print(f"ok: hyperpod-scheduler {' '.join(args)}", file=sys.stderr)


def pages(client: TestClient, paths: list[str]) -> None:
    for path in paths:
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])


def demo(folder: Path) -> None:
    from hyperpod_scheduler.demo.run import run_demo
    from hyperpod_scheduler.web.app import create_app
    from hyperpod_scheduler.web.demo_serve import demo_dashboard

    cli("demo", "--days", "2")

    def browse(result: Any, emu: Any, config: Any, state_path: str) -> None:
        # What `demo --dashboard` serves, while the demo's emulator and store still exist.
        dash = demo_dashboard(emu, config, state_path, None)
        client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
        pages(client, ["/", "/savings", "/api/savings", "/api/fleet", "/clusters/p5-training", "/schedules"])
        found = [fs for c in client.get("/api/savings").json()["clusters"] for fs in c["file_systems"]]
        assert len(found) == 3, found  # FSx end to end, through the emulator's own S3 and FSx
        dash.close()

    run_demo(days=1, on_finish=browse)


def tour(folder: Path) -> None:
    from hyperpod_scheduler.emulator import start_emulator
    from hyperpod_scheduler.web import Dashboard, create_app

    emu = start_emulator(speed=600)
    try:
        assert emu.storage is not None
        emu.storage.s3.create_bucket("sagemaker-g5-dev-lifecycle")
        # The README's tour as it was: only SageMaker pointed at the emulator.
        os.environ.update(
            {
                "AWS_ENDPOINT_URL_SAGEMAKER": emu.endpoint,
                "AWS_ACCESS_KEY_ID": "x",
                "AWS_SECRET_ACCESS_KEY": "x",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        )
        config = folder / "hyperpod-scheduler.yaml"
        state = folder / "state.sqlite"
        config.write_text(
            yaml.safe_dump(
                {
                    "state": str(state),
                    "defaults": {"poll_seconds": 0.2},
                    "schedules": {"office": "Mon-Fri 08:00-19:00 Europe/Berlin"},
                    "targets": [{"region": "us-east-1", "clusters": [{"name": "g5-dev", "schedule": "office"}]}],
                }
            )
        )
        cli(
            "cluster",
            "create",
            str(EXAMPLES / "g5-dev-extension.yaml"),
            "--upload-scripts",
            str(EXAMPLES / "lifecycle-scripts"),
        )
        for _ in range(200):
            if emu.backend.dispatch("DescribeCluster", {"ClusterName": "g5-dev"})["ClusterStatus"] == "InService":
                break
            time.sleep(0.1)
        cli("stop", "g5-dev", "--wait", "-c", str(config))
        cli("start", "g5-dev", "--wait", "-c", str(config))
        cli("plan", "-c", str(config))
        cli("status", "-c", str(config))
        started = time.perf_counter()
        cli("report", "-c", str(config))
        print(f"report on the emulator: {time.perf_counter() - started:.2f} s in-process", file=sys.stderr)
        cli("report", "-c", str(config), "--html", str(folder / "report.html"))
        dash = Dashboard(config_file=str(config), state=str(state))
        pages(
            TestClient(create_app(dash, allowed_hosts=["testserver"])),
            ["/", "/savings", "/api/savings", "/clusters/g5-dev", "/schedules"],
        )
        doc = TestClient(create_app(dash, allowed_hosts=["testserver"])).get("/api/savings").json()
        assert not [n for n in doc["notes"] if "failed" in n], doc["notes"]
        dash.close()
    finally:
        emu.close()


if __name__ == "__main__":
    scenario, folder = sys.argv[1], Path(sys.argv[2])
    {"demo": demo, "tour": tour}[scenario](folder)
    attempts = offline.taken()
    if attempts:
        print(json.dumps(attempts, indent=1), file=sys.stderr)
        sys.exit(3)
    print("no connection left loopback", file=sys.stderr)
