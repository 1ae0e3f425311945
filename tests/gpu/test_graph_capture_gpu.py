"""On-demand graph capture on a GPU: an engine that captures each shape in its first step gives the
traces of one that captured every shape at start-up, bitwise, with overlapped decode and staggered
arrivals, captures only the shapes it ran, and starts faster; a closed comparison engine gives its
device memory back."""

import time

import pytest
import torch

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from tests.gpu.test_engine_speed_gpu import ENGINE, GREEDY, SAMPLED, assert_bitwise_equal, generate, llama_dir, prompts  # noqa: F401
from tests.gpu.test_mixed_graphs_gpu import staggered

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def started(llama_dir, capture: str) -> tuple[LLMEngine, float]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    engine = LLMEngine(llama_dir, EngineConfig(**ENGINE, cuda_graphs=True, graph_capture=capture))
    torch.cuda.synchronize()
    return engine, time.perf_counter() - start


def test_on_demand_capture_equals_startup_capture_bitwise(llama_dir, prompts):
    LLMEngine(llama_dir, EngineConfig(**ENGINE, cuda_graphs=True))  # compiles every kernel: both starts below are warm
    startup, startup_s = started(llama_dir, "startup")
    on_demand, on_demand_s = started(llama_dir, "on_demand")
    assert len(on_demand.runner.padded_decode.graphs) == len(on_demand.runner.padded_mixed.graphs) == 0
    assert on_demand.deployment.digest == startup.deployment.digest  # the capture time is not part of D
    for params in (GREEDY, SAMPLED):
        assert_bitwise_equal(generate(on_demand, prompts, params), generate(startup, prompts, params))
    assert_bitwise_equal(staggered(on_demand, prompts), staggered(startup, prompts))
    decode, mixed = on_demand.runner.padded_decode.graphs, on_demand.runner.padded_mixed.graphs
    assert 0 < len(decode) <= len(decode.shapes) and 0 < len(mixed) < len(mixed.shapes)  # only what ran
    assert len(startup.runner.padded_decode.graphs) == len(decode.shapes)
    assert on_demand_s < 0.5 * startup_s, (on_demand_s, startup_s)


def test_a_closed_comparison_engine_gives_its_device_memory_back(llama_dir):
    from engine.compare.engine_port import RealEngine

    config = {**ENGINE, "cuda_graphs": True, "graph_capture": "on_demand"}
    RealEngine(llama_dir, config).close()  # the weights stay loaded for the process's later engines
    before = torch.cuda.memory_reserved()
    handle = RealEngine(llama_dir, config)
    assert torch.cuda.memory_reserved() > before
    handle.close()
    assert torch.cuda.memory_reserved() <= before + (64 << 20)  # its KV pool, graphs and buffers are gone
