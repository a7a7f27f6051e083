"""The README a newcomer opens: what the tool is in its first lines, then the two commands with how long
the test command takes; the count of risks it announces is the count it lists; docs cite no issue numbers
a reader cannot look up."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
WORDS = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def test_the_readme_opens_with_what_the_tool_is_then_the_two_commands() -> None:
    head = README.split("```bash", 1)[0]
    assert "SageMaker HyperPod" in head and "schedule" in head, head
    block = README.split("```bash", 1)[1].split("```", 1)[0]
    assert "scripts/demo.sh" in block and "scripts/test.sh" in block
    assert re.search(r"test\.sh.*\d+ min", block), block  # how long the test command takes here


def test_the_risks_announced_are_the_risks_listed() -> None:
    said = re.search(r"Scaling to zero has (\w+) risks", README)
    assert said, "README.md: no 'Scaling to zero has N risks'"
    # The list runs until the first paragraph that is not a bullet (what follows is not a risk).
    listed = re.split(r"\n\n(?!- )", README[said.end() :].lstrip("\n"), maxsplit=1)[0]
    bullets = re.findall(r"^- \*\*", listed, re.M)
    assert WORDS[said.group(1)] == len(bullets), (said.group(1), len(bullets))


def test_reliability_doc_cites_no_issue_numbers() -> None:
    text = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert not re.findall(r"\bissue \d+", text, re.I), re.findall(r".{30}\bissue \d+.{30}", text, re.I)
