"""The CLI run in this process, as ``main()`` runs it: exit code, stdout and stderr. Much faster than a
child process, so fuzzed argument sets and the issue's examples can run by the hundred."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hyperpod_scheduler.cli.main import run

DOCUMENTED_EXIT_CODES = frozenset({0, 1, 2, 3})  # docs/reliability.md: 70 is a bug, 130 an interrupt


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]

    def one_error_line(self) -> str:
        """The single ``error: ...`` line a failure must print (and nothing else on stderr)."""
        assert self.code in (1, 2), f"exit {self.code}: {self.err!r}"
        lines = self.error_lines
        assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line: {self.err!r}"
        assert "internal error" not in lines[0] and "Traceback" not in self.err, lines[0]
        return lines[0]


@contextlib.contextmanager
def _env(values: Mapping[str, str] | None) -> Iterator[None]:
    if not values:
        yield
        return
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class FullStream(io.StringIO):
    """A stdout on a full disk (/dev/full): every write and flush fails with ENOSPC."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


Stdout = Literal["captured", "closed", "full"]


def cli(*args: str, env: Mapping[str, str] | None = None, stdout: Stdout = "captured") -> Ran:
    """The CLI on ``args``; ``stdout`` "closed" runs it as with ``>&-`` (sys.stdout is None), "full" as with
    ``>/dev/full`` (the output is then empty)."""
    out, err = io.StringIO(), io.StringIO()
    target = {"captured": out, "closed": None, "full": FullStream()}[stdout]
    with _env(env), contextlib.redirect_stdout(target), contextlib.redirect_stderr(err):  # type: ignore[type-var]
        code = run(list(args))
    return Ran(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _whole_env(values: Mapping[str, str], cwd: str | os.PathLike[str] | None) -> Iterator[None]:
    """``os.environ`` is ``values`` and nothing else (as a child process given ``env=`` sees it), and the
    working directory ``cwd``; both as they were afterwards."""
    saved, here = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(values)
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)


def completed(
    args: Sequence[str], env: Mapping[str, str], cwd: str | os.PathLike[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI on ``args`` in this process, given the whole environment ``env`` (and ``cwd``) as a child
    would be, answered as ``subprocess.run(..., capture_output=True, text=True)`` answers: a drop-in for
    the tests whose subject is what the CLI says and does, not the process it runs in (those keep a
    child: the tour, the crash tests, the terminal and signal tests, the smoke tests)."""
    out, err = io.StringIO(), io.StringIO()
    with _whole_env(env, cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(list(args))
    return subprocess.CompletedProcess(["hyperpod-scheduler", *args], code, out.getvalue(), err.getvalue())
