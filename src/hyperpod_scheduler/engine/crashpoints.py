"""Named step boundaries where the reliability tests kill the process (SIGKILL), failpoint style.

Inert unless HYPERPOD_SCHEDULER_CRASH_AT names a point; the tests set it in a child process to prove
that every step can be re-run after a crash without losing a size or sending an update twice.
"""

from __future__ import annotations

import os
import signal

ENV = "HYPERPOD_SCHEDULER_CRASH_AT"
POINTS = (
    "after-intent",  # snapshot and intent stored, UpdateCluster not sent
    "after-send",  # UpdateCluster accepted, 'sent' not stored
    "after-sent",  # 'sent' stored
    "while-following",  # between two looks at a settling cluster
    "before-settle",  # settled, outcome not stored
    "after-settle",  # outcome stored
)
# Boundaries off the straight path of one transition (reached only in the situations they name).
OFF_PATH = ("after-withdraw",)  # an unsent intent withdrawn, nothing planned in its place yet
# The AMI update before a morning restore (engine.image_update): reached only when a group changes release.
# Intent stored, not sent / accepted, not marked / settled and taken, the restore not yet planned.
IMAGE_PATH = ("after-image-intent", "after-image-send", "after-image-taken")
ALL = POINTS + OFF_PATH


def reached(point: str) -> None:
    wanted = os.environ.get(ENV)
    if wanted and wanted == point:
        os.kill(os.getpid(), signal.SIGKILL)
