"""`hyperpod-scheduler demo`: the scheduler across a simulated week on the embedded emulator."""

from __future__ import annotations

import typer
from rich.table import Table

from hyperpod_scheduler.cli.context import printer
from hyperpod_scheduler.cli.output import console, print_json
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.demo.run import DemoResult, run_demo, summary_rows
from hyperpod_scheduler.emulator import Emulator


def show(result: DemoResult, days: float) -> None:
    """The per-cluster table and the savings report."""
    from hyperpod_scheduler.cli.report import print_table

    table = Table(title=f"after {days:g} virtual days")
    for col in ("cluster", "schedule", "stops", "starts", "restored", "recorded sizes", "instance-h", "saved"):
        table.add_column(col, overflow="fold")
    for r in summary_rows(result):
        table.add_row(
            f"{r['cluster']}\n[dim]{r['story']}[/]",
            r["schedule"],
            str(r["stops"]),
            str(r["starts"]),
            f"{r['restores']}" + (f" [red]({r['failures']} failed)[/]" if r["failures"] else ""),
            "\n".join(f"{g}={c}" for g, c in r["recorded_sizes"].items()),
            f"{r['instance_hours']:.0f} of {r['always_on_hours']:.0f}",
            f"{r['saved_pct']:.0f}%",
        )
    console.print(table)
    for r in summary_rows(result):
        if "ready_by" in r:
            rb = r["ready_by"]
            console.print(
                f"{r['cluster']} (ready_by): ready when the day began on {rb['on_time']} of {rb['mornings']} "
                f"mornings; its lead now: {rb['lead']}",
                highlight=False,
                markup=False,
            )
    print_table(result.report)


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        days: float = typer.Option(7.0, "--days", min=0.1, max=62, help="Virtual days to simulate."),
        step_minutes: float = typer.Option(10.0, "--step-minutes", min=1, max=120, help="Virtual minutes per tick."),
        seed: int = typer.Option(7, "--seed", help="Emulator seed (same seed, same run)."),
        examples: str | None = typer.Option(None, "--examples", help="Folder with the example specs."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
        serve: bool = typer.Option(False, "--dashboard", help="Keep serving the dashboard over the demo's results."),
        port: int = typer.Option(8080, "--port", help="Dashboard port with --dashboard (0: a free port)."),
    ) -> None:
        """Create three example clusters in the emulator and schedule them across a virtual week."""

        if not as_json:
            console.print(
                "[bold]hyperpod-scheduler demo[/]: three clusters on the embedded HyperPod emulator, "
                f"{days:g} virtual days, a tick every {step_minutes:g} virtual minutes\n"
            )

        def finish(result: DemoResult, emu: Emulator, config: Config, state_path: str) -> None:
            if as_json:
                return
            show(result, days)
            if serve:
                from hyperpod_scheduler.cli.dashboard import DEFAULT_TOKEN_ENV, token_from_env
                from hyperpod_scheduler.web.demo_serve import serve_demo

                serve_demo(
                    emu,
                    config,
                    state_path,
                    port=port,
                    token=token_from_env(DEFAULT_TOKEN_ENV),
                    announce=lambda line: console.print(line, highlight=False),
                )
            else:
                console.print(
                    f"\ndashboard: run `hyperpod-scheduler demo --dashboard` and open http://127.0.0.1:{port}/ "
                    "to browse these results (fleet, week timelines, savings, schedule grids)",
                    highlight=False,
                )

        result = run_demo(
            days=days,
            step_minutes=step_minutes,
            seed=seed,
            examples=examples,
            events=printer(as_json),
            on_ready=None if as_json else lambda ep: console.print(f"emulator: {ep}; fleet InService\n"),
            on_finish=finish,
        )
        rows = summary_rows(result)
        if as_json:
            from hyperpod_scheduler.cost.summary import as_document

            print_json({"clusters": rows, "report": as_document(result.report)})
            return
        if any(r["failures"] for r in rows) and not any(r["restores"] for r in rows):
            raise typer.Exit(1)
