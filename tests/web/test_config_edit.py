"""Saving a schedule from the grid edits people's own config file: everything else in it survives."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.web.config_edit import write_schedule

EXAMPLE = Path(__file__).parents[2] / "examples" / "hyperpod-scheduler.yaml"
NEW = {"windows": ["Mon-Thu 09:00-17:00"], "timezone": "Europe/Berlin", "holidays": "DE-BE"}


def _copy(tmp_path: Path, text: str, mode: int = 0o640) -> Path:
    path = tmp_path / "hyperpod-scheduler.yaml"
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)
    return path


def _split(text: str, name: str) -> tuple[list[str], list[str]]:
    """The file's lines outside schedule ``name``'s block, and the block's own lines."""
    lines = text.splitlines()
    first = lines.index(f"  {name}:")
    last = next(i for i in range(first + 1, len(lines)) if not lines[i].startswith("    "))
    return lines[:first] + lines[last:], lines[first:last]


def test_only_the_edited_schedule_changes_in_the_shipped_example(tmp_path: Path) -> None:
    before = EXAMPLE.read_text(encoding="utf-8")
    path = _copy(tmp_path, before)
    write_schedule(path, "office-hours", NEW)
    after = path.read_text(encoding="utf-8")
    # Every other line, comments, flow lists, quotes and indentation included, is exactly as it was.
    rest_before, _ = _split(before, "office-hours")
    rest_after, block = _split(after, "office-hours")
    assert rest_after == rest_before
    assert yaml.safe_load("\n".join(block)) == {"office-hours": NEW}
    assert load_config(path).schedules["training"] == load_config(EXAMPLE).schedules["training"]


def test_the_file_keeps_its_permissions(tmp_path: Path) -> None:
    path = _copy(tmp_path, EXAMPLE.read_text(encoding="utf-8"), mode=0o644)
    write_schedule(path, "office-hours", NEW)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_two_space_sequence_style_is_kept_too(tmp_path: Path) -> None:
    text = (
        "# team config\n"
        "schedules:\n"
        "  office:  # the dev team\n"
        "    windows:\n"
        "    - Mon-Fri 08:00-19:00 UTC\n"
        "targets:\n"
        "- region: us-east-1\n"
        "  schedule: office\n"
        "  clusters: [dev]   # just one\n"
    )
    path = _copy(tmp_path, text)
    write_schedule(path, "office", {"windows": ["Mon-Fri 07:00-19:00 UTC"]})
    after = path.read_text(encoding="utf-8")
    assert after == text.replace("08:00", "07:00")


def test_an_edit_that_breaks_the_config_leaves_the_file_untouched(tmp_path: Path) -> None:
    before = EXAMPLE.read_text(encoding="utf-8")
    path = _copy(tmp_path, before)
    with pytest.raises(UsageError, match="Mon-Fry"):
        write_schedule(path, "office-hours", {"windows": ["Mon-Fry 08:00-19:00 UTC"]})
    with pytest.raises(UsageError, match="'nowhere' is not in"):
        write_schedule(path, "nowhere", NEW)
    assert path.read_text(encoding="utf-8") == before
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind
    assert yaml.safe_load(before) == yaml.safe_load(path.read_text(encoding="utf-8"))
