"""Every file the tool opens, checked at the door: only regular files are read, and a file is written only by
replacing it, atomically, with a regular file made beside it.

Opening a FIFO waits for a writer for ever; reading ``/dev/zero`` never ends; writing "a file" that is
``/dev/null`` or another device used to replace the node with a regular file (as root, that breaks the
machine), and writing through a symbolic link damaged whatever it pointed at. So:

- ``open_input`` refuses anything but a regular file by its ``stat`` before opening it, then opens it
  without blocking (``O_NONBLOCK``: a FIFO swapped in between cannot hang the open) and checks again on
  the open descriptor;
- ``write_text``/``write_bytes`` refuse a target that is a folder, a device, a FIFO, a socket or a symbolic
  link (a loop included) before anything is created, write a temporary file in the same folder and
  ``os.replace`` it over the name: a reader sees the old file or the new one, never half of it. An
  existing file's permission bits carry over to its replacement; no file is ever ``chmod``-ed in place.

Every refusal is one ``UsageError`` (exit 2) naming the option and the path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs.text import quoted


def kind(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a FIFO (named pipe)")."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


class NotRegular(OSError):
    """The path names something other than a regular file (``what`` says what)."""

    def __init__(self, what: str) -> None:
        super().__init__(errno.EINVAL, what)
        self.what = what


def open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (a link to one is followed); ``NotRegular`` or
    the ``OSError`` of the open otherwise. Never blocks on a FIFO, never opens a device."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegular(kind(mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode  # what was opened, whatever the name pointed at a moment before
        if not stat.S_ISREG(mode):
            raise NotRegular(kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_input(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` if it is a regular file; one line naming ``option`` otherwise (for a path handed to a
    library that opens it itself, such as SQLite or the emulator's capacity model)."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise UsageError(f"{option}: {_path(p)}: no such file") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{option}: {_path(p)}: cannot read: {_why(exc)}") from None
    if not stat.S_ISREG(mode):
        raise UsageError(f"{option}: {_path(p)} is {kind(mode)}, not a regular file; refused unread")
    return p


def writable_target(
    path: str | os.PathLike[str], option: str, *, make_folders: bool = False, missing_folder_ok: bool = False
) -> int | None:
    """Check that ``path`` may be replaced by a new regular file: it is one already (its permission bits
    are returned) or it does not exist and its folder does (made first with ``make_folders``; None).
    ``missing_folder_ok``: a check made before the folder is (a missing folder passes)."""
    p = Path(path)
    shown = _path(p)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:  # ELOOP in a parent, ENOTDIR, a NUL byte
        raise UsageError(f"{option}: {shown}: cannot write: {_why(exc)}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(
                f"{option}: {shown} is a symbolic link; refusing to replace it or write where it points "
                "(give the path of a regular file)"
            )
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{option}: {shown} is {kind(st.st_mode)}, not a regular file; nothing was written")
        return stat.S_IMODE(st.st_mode)
    folder = p.parent
    try:
        if make_folders:
            folder.mkdir(parents=True, exist_ok=True)
        folder_mode = folder.stat().st_mode
    except FileNotFoundError:
        if missing_folder_ok:
            return None
        raise UsageError(f"{option}: {shown}: the folder {_path(folder)} does not exist") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{option}: {shown}: cannot write: {_why(exc)}") from None
    if not stat.S_ISDIR(folder_mode):
        raise UsageError(f"{option}: {shown}: {_path(folder)} is {kind(folder_mode)}, not a folder")
    return None


def write_bytes(
    path: str | os.PathLike[str],
    data: bytes,
    option: str,
    *,
    mode: int | None = None,
    make_folders: bool = False,
    check: Callable[[Path], object] | None = None,
) -> Path:
    """Replace (or create) the regular file ``path`` with ``data``, atomically. ``mode``: the new file's
    permission bits (default: the replaced file's, or 0666 less the umask for a new one); ``check`` is
    called on the new file before it replaces the old one (what it raises leaves the old one as it was)."""
    p = Path(path)
    existing = writable_target(p, option, make_folders=make_folders)
    keep = mode if mode is not None else existing
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            if keep is not None:
                os.fchmod(fd, keep)  # our own new file: never the one being replaced
        finally:
            os.close(fd)
        if check is not None:
            check(tmp)
        os.replace(tmp, p)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise UsageError(f"{option}: {_path(p)}: cannot write: {_why(exc)}; nothing was written") from None
        raise
    return p


def write_text(
    path: str | os.PathLike[str],
    text: str,
    option: str,
    *,
    mode: int | None = None,
    make_folders: bool = False,
    check: Callable[[Path], object] | None = None,
) -> Path:
    """``write_bytes`` of ``text`` as UTF-8 (a lone surrogate is refused: it has no UTF-8 form)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{option}: the text to write is not valid Unicode (a lone surrogate)") from None
    return write_bytes(path, data, option, mode=mode, make_folders=make_folders, check=check)


def _path(path: Path) -> str:
    """A path as an error names it: quoted, control characters escaped by the printer, whole unless absurd."""
    return quoted(str(path), 300)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        return "a symbolic link loop"
    return str(getattr(exc, "strerror", None) or exc)
