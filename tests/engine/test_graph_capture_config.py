"""``graph_capture``: when CUDA graphs are captured is an engine choice outside D.

Capture itself (on demand equals at start-up, bitwise) needs a GPU: tests/gpu/test_graph_capture_gpu.py.
"""

import pytest

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine


def test_an_unknown_capture_time_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"graph_capture 'lazy' is not one of \('startup', 'on_demand'\)"):
        EngineConfig(graph_capture="lazy")


def test_the_capture_time_leaves_d_unchanged(tiny_dir):
    config = dict(cuda_graphs=True, num_pages=64, max_model_len=256)
    startup = LLMEngine(tiny_dir, EngineConfig(**config))
    on_demand = LLMEngine(tiny_dir, EngineConfig(**config, graph_capture="on_demand"))
    assert EngineConfig(graph_capture="on_demand").limits() == EngineConfig().limits()
    assert on_demand.deployment.digest == startup.deployment.digest
    assert on_demand.runner.padded_decode.graphs is None  # the CPU has no graphs: padded steps run eagerly
    assert on_demand.runner.padded_mixed.graphs is None
