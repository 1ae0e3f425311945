"""A closed comparison engine is freed at once: its runner and graph sets refer to each other, so
without the collection in close() its K/V pool would wait for Python's cyclic collector."""

import gc
import weakref

from engine.compare.engine_port import RealEngine
from engine.compare.units import RequestSpec
from engine.sampling_params import SamplingParams


def test_closing_frees_the_kv_pool_without_waiting_for_the_collector(tiny_model_dir):
    handle = RealEngine(tiny_model_dir, {"cuda_graphs": True, "num_pages": 64, "max_model_len": 256})
    handle.run([RequestSpec("r", (1, 2, 3), SamplingParams(max_tokens=3, ignore_eos=True))])
    kv = weakref.ref(handle.engine.runner.kv.k)
    runner = weakref.ref(handle.engine.runner)
    gc.disable()  # only close() may collect
    try:
        handle.close()
        assert kv() is None and runner() is None
    finally:
        gc.enable()


def test_without_the_collection_the_runner_would_outlive_close(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(gc, "collect", lambda *a: 0)
    handle = RealEngine(tiny_model_dir, {"cuda_graphs": True, "num_pages": 64, "max_model_len": 256})
    runner = weakref.ref(handle.engine.runner)
    gc.disable()
    try:
        handle.close()
        assert runner() is not None  # the cycle this guards against is real
    finally:
        gc.enable()
        monkeypatch.undo()
        gc.collect()
