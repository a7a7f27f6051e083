"""The layers, checked on the source: faces -> app -> engine -> edges, no face imports another face, and
only the composition root builds the engine. A newcomer can trust the README's picture because this
test fails the day the code stops matching it."""

from __future__ import annotations

import ast

from tests.architecture.imports import Import, concern, engine_constructions, modules, package_imports, parsed

COMPOSITION_ROOT = "hyperpod_scheduler.app.compose"
# The command line is the entry point of everything: it may start the other faces (the dashboard, the
# demo, the Lambda artefact and templates); nothing imports it.
FACES = ("cli", "web", "deploy", "demo")
LAUNCHER = "cli"
APP = "app"
# The engine and what listens to its events (notifications consume engine.events).
ENGINE = ("engine", "notify")
# Edges and pure parts below the engine: anything here may use anything else here, nothing above.
BELOW = (
    "agent", "aws", "cluster", "config", "cost", "emulator", "errors", "guards", "inputs", "schedule", "slurm", "store",
)  # fmt: skip
TIER = {
    **{f: 0 for f in FACES},
    APP: 1,
    **{e: 2 for e in ENGINE},
    **{b: 3 for b in BELOW},
    "hyperpod_scheduler": 3,  # the package root (its __version__)
}


def violation(imp: Import) -> str | None:
    """Why ``imp`` breaks the layering, or None."""
    src, dst = concern(imp.module), concern(imp.target)
    if src == dst:
        return None
    if src not in TIER or dst not in TIER:
        return f"{src} or {dst} is not in the layer map of tests/architecture (add the new folder)"
    if TIER[src] == 0 and TIER[dst] == 0:
        return None if src == LAUNCHER else f"face {src} imports face {dst}"
    if src == "engine" and dst == "notify":
        return "the engine imports a listener of its own events"
    if TIER[dst] < TIER[src]:
        return f"{src} (below) imports {dst} (above)"
    return None


def _key(imp: Import) -> tuple[str, str]:
    return imp.module, imp.target


def _where(imp: Import, why: str) -> str:
    return f"{imp.module}:{imp.line} imports {imp.target}: {why}"


def test_layers_point_one_way_and_no_face_imports_another() -> None:
    found = [_where(i, why) for i in package_imports() if (why := violation(i)) is not None]
    assert found == [], "\n".join(found)


def test_only_the_composition_root_builds_the_engine() -> None:
    found = []
    for module, path in modules():
        if module in (COMPOSITION_ROOT, "hyperpod_scheduler.engine.runner"):
            continue
        lines = engine_constructions(module, parsed(path))
        found += [f"{module}:{line} builds Engine (build it through {COMPOSITION_ROOT})" for line in lines]
    assert found == [], "\n".join(found)


def test_guards_do_not_import_the_engine() -> None:
    found = [
        _where(i, "guards sit below the engine")
        for i in package_imports()
        if concern(i.module) == "guards" and concern(i.target) in (*ENGINE, APP, *FACES)
    ]
    assert found == []


def test_the_emulator_imports_only_errors_and_the_slurm_edge_from_its_bridge() -> None:
    found = []
    for i in package_imports():
        if concern(i.module) != "emulator" or concern(i.target) == "emulator":
            continue
        allowed = i.target == "hyperpod_scheduler.errors" or (
            i.module == "hyperpod_scheduler.emulator.slurm_bridge" and concern(i.target) == "slurm"
        )
        if not allowed:
            found.append(_where(i, "the emulator is a witness: its rules are its own"))
    assert found == [], "\n".join(found)


# ---- the checks themselves can fail ------------------------------------------------------------------


def test_the_checks_catch_a_face_importing_a_face_a_layer_upwards_and_an_engine_built_elsewhere() -> None:
    def imp(module: str, target: str) -> Import:
        return Import(module, target, 1)

    assert (
        violation(imp("hyperpod_scheduler.web.service", "hyperpod_scheduler.cli.context"))
        == "face web imports face cli"
    )
    assert (
        violation(imp("hyperpod_scheduler.deploy.worker", "hyperpod_scheduler.demo.run"))
        == "face deploy imports face demo"
    )
    assert violation(imp("hyperpod_scheduler.cli.demo", "hyperpod_scheduler.web.demo_serve")) is None  # it launches it
    assert violation(imp("hyperpod_scheduler.guards.capacity", "hyperpod_scheduler.engine.runner")) is not None
    assert violation(imp("hyperpod_scheduler.engine.fleet", "hyperpod_scheduler.app.compose")) is not None
    assert violation(imp("hyperpod_scheduler.app.compose", "hyperpod_scheduler.web.app")) is not None
    assert violation(imp("hyperpod_scheduler.engine.runner", "hyperpod_scheduler.notify.channels")) is not None
    assert violation(imp("hyperpod_scheduler.newthing.x", "hyperpod_scheduler.store")) is not None
    source = "from hyperpod_scheduler.engine.runner import Engine as E\ndef f(s, c, n):\n    return E(s, c, n)\n"
    assert engine_constructions("hyperpod_scheduler.web.x", ast.parse(source)) == [3]
