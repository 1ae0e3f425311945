"""Loaded weights shared by the engine lifetimes of one process.

The comparison suites start many engines in one process (one per batch group, one per cold
reference in a worker), and each would otherwise read, digest, cast and copy the same
checkpoint: at the llama-1b shape that is seconds per start and most of a full-scale run. The
engine never writes its weights, so engines over the same checkpoint files, dtype and device
share one loaded copy; everything else an engine owns (KV pool, prefix cache, scheduler, graphs)
stays its own. The key names every checkpoint file's size, modification time and inode, so a
rewritten checkpoint is read afresh. One entry is kept: a process that moves to another
checkpoint frees the previous one. :func:`clear` frees it explicitly.
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from engine.loader import INDEX_FILE, ModelWeights, checkpoint_files, load_weights
from engine.model_config import ModelSpec

__all__ = ["checkpoint_identity", "load_shared", "clear", "num_loads"]

_lock = threading.Lock()
_entry: tuple[tuple, tuple[ModelWeights, str]] | None = None
_num_loads = 0


def checkpoint_identity(model_dir: Path) -> tuple:
    """(resolved directory, then name, size, mtime_ns and inode of config.json, the index and every weight file)."""
    model_dir = Path(model_dir).resolve()
    index = model_dir / INDEX_FILE
    files = [model_dir / "config.json", *([index] if index.is_file() else []), *checkpoint_files(model_dir)]
    stats = []
    for path in files:
        st = path.stat()
        stats.append((path.name, st.st_size, st.st_mtime_ns, st.st_ino))
    return (str(model_dir), tuple(stats))


def load_shared(model_dir: Path, spec: ModelSpec, *, dtype: torch.dtype, device: torch.device | str
                ) -> tuple[ModelWeights, str]:
    """:func:`engine.loader.load_weights`, served from the process's one cached entry when it matches."""
    global _entry, _num_loads
    key = (checkpoint_identity(model_dir), spec.config_digest, str(dtype), str(torch.device(device)))
    with _lock:
        if _entry is not None and _entry[0] == key:
            return _entry[1]
        _entry = None  # free the previous checkpoint before reading the next
        loaded = load_weights(model_dir, spec, dtype=dtype, device=device)
        _num_loads += 1
        _entry = (key, loaded)
        return loaded


def clear() -> None:
    """Drop the cached weights (engines still holding them keep theirs alive until they go)."""
    global _entry
    with _lock:
        _entry = None


def num_loads() -> int:
    """How many times this process read a checkpoint from disk (for tests and benchmarks)."""
    return _num_loads
