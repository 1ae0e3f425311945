"""The fixed value sets of CLI options, spelled here so ``--help`` imports nothing heavy.

Each tuple repeats a constant of a lower layer (named beside it); ``tests/cli/test_choices.py``
fails when the two drift apart. Single-valued options use ``Literal[...]`` of a tuple;
repeatable ones an Enum from :func:`choice_enum` (Typer takes no list of Literal).
"""

from __future__ import annotations

from enum import Enum

__all__ = ["SCALES", "PRESETS", "DTYPES", "STAGES", "SUITES", "SCENARIOS", "APIS", "choice_enum"]

SCALES = ("ci", "full")  # engine.compare: the two deployment scales
PRESETS = ("tiny", "small", "llama-1b", "qwen3-tiny", "mistral-tiny", "gemma3-tiny", "qwen3-0.6b", "mistral-7b",
           "gemma3-1b")  # kernels.shapes.PRESETS
DTYPES = ("float32", "bfloat16")  # the checkpoint dtypes the engine runs
STAGES = ("verify", "runtime", "properties", "compare")  # assurance.pipeline.options.STAGES
SUITES = ("all", "batch", "chunk", "prefill-decode", "prefix", "schedule", "negative-control",
          "fidelity")  # "all" + engine.compare.protocol.SUITES
SCENARIOS = ("repeat", "concurrent", "prefix", "long", "prefill-decode", "seeded")  # probing.protocol.SCENARIOS
APIS = ("auto", "openai", "vllm", "sglang", "llama.cpp", "tgi")  # probing.backend.APIS


def choice_enum(name: str, values: tuple[str, ...]) -> type[Enum]:
    """A str Enum whose members are ``values`` (their names and values alike), for a repeatable option."""
    return Enum(name, {value: value for value in values}, type=str)
