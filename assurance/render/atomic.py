"""Writing output files atomically: a reader sees the old file or the new one, never half of one.

The data goes to a temporary file in the target's directory, which then replaces the target
by rename. A rename replaces a symlink at the target path itself, so writing never follows a
link to overwrite the file it points to.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (mode 0666 less the umask, as ``open`` would); return ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; outputs are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
