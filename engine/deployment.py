"""The deployment configuration D an engine runs under: its fields and digest.

D fixes everything value-relevant that is not a request: the weights and config (digests), the
activation dtype, the sealed kernel plan (name, digest, entries), the accelerator (GPU model,
compute capability, driver and CUDA versions; the CPU model off-GPU), the Python/torch/Triton/
bitcase versions, torch's CPU thread count, the page size and the engine limits (with whether the
run-time attention finiteness check runs, ``engine.check_finite``). Evidence names
the D it was produced under; nothing claims equality across two D.
"""

from __future__ import annotations

import platform
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from engine.config import EngineConfig
from engine.model_config import ModelSpec, read_model_spec
from evidence_db.bundle import Deployment
from kernels.plan import SealedPlan, plan_for

__all__ = ["build_deployment", "accelerator_fields", "software_fields", "current_deployment",
           "DeploymentMismatch"]


class DeploymentMismatch(RuntimeError):
    """The engine's recomputed D differs from the one it was asked to run under."""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia_driver(index: int) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--id={index}", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def accelerator_fields(device: str) -> dict[str, Any]:
    """What D records about the machine: the CPU always, the GPU when ``device`` is CUDA."""
    fields: dict[str, Any] = {"device_type": torch.device(device).type, "cpu_model": _cpu_model(),
                              "machine": platform.machine()}
    if fields["device_type"] == "cuda":
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        fields.update({"name": props.name, "compute_capability": f"{props.major}.{props.minor}",
                       "total_memory_bytes": int(props.total_memory), "cuda": torch.version.cuda,
                       "driver": _nvidia_driver(index)})
    else:
        fields["name"] = "cpu"
    return fields


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def software_fields() -> dict[str, str]:
    """Interpreter and library versions."""
    return {"python": platform.python_version(), "torch": torch.__version__, "triton": _version("triton"),
            "bitcase": _version("bitcase")}


def build_deployment(*, spec: ModelSpec, config: EngineConfig, dtype: str, plan: SealedPlan,
                     weights_digest: str, num_threads: int) -> Deployment:
    """D for an engine of ``config`` serving the checkpoint ``spec``/``weights_digest`` under ``plan``.

    ``num_threads`` is torch's CPU thread count as the engine runs it (``torch.get_num_threads()``
    after start-up).
    """
    fields = {
        "weights_digest": weights_digest,
        "model": {"architecture": spec.architecture, "config_digest": spec.config_digest,
                  "checkpoint_dtype": spec.checkpoint_dtype},
        "dtype": dtype,
        "kernel_plan": {"name": plan.name, "digest": plan.digest, "entries": [e.as_dict() for e in plan.entries]},
        "accelerator": accelerator_fields(config.device),
        "software": software_fields(),
        "torch_num_threads": num_threads,
        "engine": config.limits(),
    }
    return Deployment(fields=fields)


def current_deployment(model_dir: Path | None = None, **overrides: Any) -> Deployment:
    """D of an engine for ``model_dir`` (default: the tiny preset, seed 0) with EngineConfig ``overrides``.

    Loads no model onto a device and changes no torch setting: it reads the checkpoint to digest
    it and records the thread count the engine would set.
    """
    from engine.checkpoint import make_checkpoint
    from engine.loader import read_checkpoint, weights_digest

    config = EngineConfig.from_kwargs(**overrides)
    with tempfile.TemporaryDirectory(prefix="bitcase-d-") as tmp:
        if model_dir is not None:
            directory = Path(model_dir)
        else:  # D has no tokenizer field: only the weights and config.json are needed
            directory = make_checkpoint("tiny", Path(tmp), seed=0, tokenizer=False)
        spec = read_model_spec(directory)
        digest = weights_digest(read_checkpoint(directory, spec))
    dtype = spec.serving_dtype(config.dtype)
    plan = plan_for(spec.shape(page_size=config.page_size, dtype=dtype, check_finite=config.check_finite))
    return build_deployment(spec=spec, config=config, dtype=dtype, plan=plan, weights_digest=digest,
                            num_threads=config.num_threads)
