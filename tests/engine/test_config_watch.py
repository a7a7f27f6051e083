"""`run`'s config watch: an edit is followed, a broken one reported and ignored, a half-written one
looked at again rather than taken for an empty config."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_scheduler.cli.config_watch import ConfigWatch
from hyperpod_scheduler.config.model import Config

GOOD = (
    "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\ntargets: [{region: us-east-1, schedule: office, clusters: [a]}]\n"
)


def test_an_edit_is_followed_and_an_unchanged_file_costs_no_parse(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    watch = ConfigWatch(path, pause=lambda _s: None)
    assert watch.changed(Config()) is None
    path.write_text(GOOD.replace("clusters: [a]", "clusters: [a, b]"))
    found = watch.changed(Config())
    assert found is not None and [c.name for c in found.targets[0].clusters] == ["a", "b"]
    assert watch.changed(found) is None


def test_a_broken_edit_is_reported_once_and_not_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    watch = ConfigWatch(path, pause=lambda _s: None)
    path.write_text(GOOD.replace("clusters:", "clusterz:"))
    assert watch.changed(Config()) is None
    assert watch.changed(Config()) is None
    err = capsys.readouterr().err
    assert err.count("keeping the last good config") == 1 and "clusterz" in err


def test_a_file_caught_mid_save_is_looked_at_again_next_tick(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)

    def editor_still_writing(_seconds: float) -> None:
        path.write_text(GOOD.replace("clusters: [a]", "clusters: [a, c]"))

    watch = ConfigWatch(path, pause=editor_still_writing)
    path.write_text("")  # the first look sees the truncated file of a non-atomic save
    assert watch.changed(Config()) is None, "a half-written file was taken for the config"
    watch.pause = lambda _s: None
    found = watch.changed(Config())
    assert found is not None and [c.name for c in found.targets[0].clusters] == ["a", "c"]
