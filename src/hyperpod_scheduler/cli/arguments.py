"""The process's own edges, checked by the entry point before and after a command: arguments that are not
UTF-8, and a stdout that cannot be written (a full disk, a closed pipe).

Python hands a non-UTF-8 argument (``--cluster $'\\xff'``) over as text with a lone surrogate, which
fails wherever it is first encoded: in a store key, a JSON document, an AWS call, the terminal. It is
refused here, naming the option, before any command sees it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs.text import quoted

_SURROGATE = re.compile("[\ud800-\udfff]")


def checked(argv: list[str]) -> list[str]:
    """``argv`` if every argument is UTF-8 text; else one ``UsageError`` naming the first that is not."""
    for i, arg in enumerate(argv):
        if _SURROGATE.search(arg) is None:
            continue
        option, eq, _ = arg.partition("=")
        if arg.startswith("--") and eq:
            name = option
        elif i > 0 and argv[i - 1].startswith("-") and argv[i - 1] != "--":
            name = argv[i - 1]
        else:
            name = f"argument {i + 1}"
        raw = os.fsencode(arg)  # the bytes as given (surrogateescape gives them back)
        raise UsageError(f"{name}: {quoted(raw)} is not UTF-8 text")
    return argv


# What writing to a full disk, a closed pipe or a dead terminal raises. Files the tool writes go through
# inputs.files, which turns these into a UsageError; one that reaches the entry point was stdout's.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EBADF})


def output_failed(exc: OSError) -> bool:
    """Whether ``exc``, reaching the entry point, means stdout could not be written."""
    return exc.errno in _OUTPUT_ERRNOS or not stdout_works()


def stdout_works() -> bool:
    """Whether what was printed could be written: a flush that fails means the output was lost."""
    if sys.stdout is None:
        return False
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # ValueError: flushing a closed file
        return False
    return True


def discard_stdout() -> None:
    """Point the process's own stdout at /dev/null, so the interpreter's last flush cannot fail (it would
    print 'Exception ignored' and exit 120). A stream a test put in its place is left to the test."""
    out = sys.__stdout__
    if out is None or sys.stdout is not out:
        return
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, out.fileno())
        finally:
            os.close(null)
        out.flush()
