"""The deterministic inference engine.

Public API (imported lazily, so ``import engine.scheduler`` and friends never pull in torch)::

    from engine import LLM, SamplingParams
    outputs = LLM("models/tiny", device="cpu").generate([[1, 2, 3]], SamplingParams(max_tokens=8))
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LLM", "LLMEngine", "EngineConfig", "SamplingParams", "SamplerState", "RequestOutput", "StepResult",
           "BadRequestError", "Trace", "compare_traces", "InvariantViolation", "ReferenceModel"]

_LOCATIONS = {
    "LLM": "engine.llm_engine", "LLMEngine": "engine.llm_engine", "RequestOutput": "engine.llm_engine",
    "StepResult": "engine.llm_engine", "BadRequestError": "engine.llm_engine", "EngineConfig": "engine.config",
    "SamplingParams": "engine.sampling_params", "SamplerState": "engine.sampling_params",
    "Trace": "engine.trace", "compare_traces": "engine.trace", "InvariantViolation": "engine.checks",
    "ReferenceModel": "engine.reference",
}


def __getattr__(name: str) -> Any:
    if name not in _LOCATIONS:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    return getattr(importlib.import_module(_LOCATIONS[name]), name)
