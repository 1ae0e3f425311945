"""What every compare record names: the deployment D, the subjects it covers, the producer, the run key.

The run key is a digest of everything that fixes what a comparison means: protocol version, seed,
scale, D's digest and the digests of every subject (the engine and kernel sources, the weights). It
is identical on every machine that runs a shard of the same run, and it is part of every record
id, so the same comparison produced twice is the same id (ingest rejects the second copy) while a
changed source or weight file gives new ids.
"""

from __future__ import annotations

import platform
import socket
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Sequence

from evidence_db.bundle import Deployment, Producer, Subject
from evidence_db.canonical import digest_of, file_digest

__all__ = ["RunIdentity", "code_subjects", "model_subject", "run_key", "producer", "core_digest", "REPO_ROOT",
           "CODE_DIRS"]

REPO_ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("engine", "kernels")
_CODE_SUFFIXES = (".py", ".json", ".toml")


def code_subjects(root: Path = REPO_ROOT) -> tuple[Subject, ...]:
    """``code:<path>`` subjects for every source file of the engine and the kernels, sorted.

    The whole of both packages (the comparison harness included) because any of them can change a
    value or what a comparison observes; the list is static so every shard computes the same key.
    """
    subjects = []
    for top in CODE_DIRS:
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and path.suffix in _CODE_SUFFIXES and "__pycache__" not in path.parts:
                subjects.append(Subject(f"code:{path.relative_to(root).as_posix()}", file_digest(path)))
    return tuple(subjects)


def core_digest(deployment: Deployment) -> str:
    """Digest of D's fields other than ``engine`` (the scheduling limits a suite may vary)."""
    return digest_of({k: v for k, v in deployment.fields.items() if k != "engine"})


def model_subject(weights_digest: str) -> Subject:
    """The checkpoint as a subject: ``model:<digest>``."""
    return Subject(f"model:{weights_digest}", weights_digest)


def run_key(*, deployment: Deployment, subjects: Sequence[Subject], scale: str, seed: int, protocol: int,
            label: str = "") -> str:
    """A 16-hex key of everything that fixes what the run's comparisons mean (see module docstring)."""
    digest = digest_of({"protocol": protocol, "seed": seed, "scale": scale, "deployment": deployment.digest,
                        "subjects": sorted([s.uri, s.sha256] for s in subjects), "label": label})
    return digest.split(":", 1)[1][:16]


def _bitcase_version() -> str:
    try:
        return metadata.version("bitcase")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def producer(tool: str, command: Sequence[str], accelerator: str, started_at: str, finished_at: str) -> Producer:
    """The producer block of a record: tool, bitcase version, command line, host and accelerator."""
    return Producer(tool=tool, version=_bitcase_version(), command=" ".join(command), host=socket.gethostname(),
                    accelerator=accelerator, started_at=started_at, finished_at=finished_at)


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """Shared by all records of one compare or check-config run."""

    key: str
    deployment: Deployment
    subjects: tuple[Subject, ...]
    producer: Producer
    scale: str
    seed: int
    shard: str  # "i/n"

    def environment(self) -> dict[str, str]:
        """Interpreter and platform of the producing process (for details, not for the key)."""
        return {"python": sys.version.split()[0], "platform": platform.platform()}
