"""Atomic file writes: a temporary file beside the target, flushed to disk, then renamed over it.

A reader never sees a half-written bundle, signature, checkpoint or report, and a crash leaves the
old file in place. The rename replaces a symlink at the target rather than writing through it.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

__all__ = ["atomic_file", "write_atomic"]


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask  # what open() would give; mkstemp creates 0600


@contextmanager
def atomic_file(path: Path, *, binary: bool = False, mode: int | None = None) -> Iterator[IO]:
    """Open a stand-in for ``path``; on a clean exit it replaces ``path`` (``mode``: default as ``open``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _default_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return ``path``."""
    with atomic_file(path, binary=True) as f:
        f.write(data)
    return Path(path)
