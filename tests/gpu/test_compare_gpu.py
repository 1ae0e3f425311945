"""The comparison protocol at full scale on CUDA (Llama-3.2-1B shape, bfloat16, random weights).

A short, full-scale-shaped run: one shard of the five determinism suites (8K prompts, the full
chunk budgets), one shard of the negative control, and the runtime configuration checks, all under
the full scale's D on the GPU. Environment:

* ``BITCASE_GPU_MODEL_DIR``: an existing llama-1b checkpoint (default: one is written, ~2.5 GB);
* ``BITCASE_GPU_COMPARE_SHARD``: which shard of the suites to run (default ``1/8``; ``1/1`` runs
  all 832 determinism comparisons).

Run: ``python -m pytest tests/gpu/test_compare_gpu.py -q`` on a machine with a CUDA GPU.
"""

import os
from collections import Counter
from pathlib import Path

import pytest
import torch

from engine.compare.api import plan, run_suites, runtime_checks

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SUITES = ["batch", "chunk", "prefill-decode", "prefix", "schedule"]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    given = os.environ.get("BITCASE_GPU_MODEL_DIR")
    if given:
        return Path(given)
    from engine.checkpoint import make_checkpoint

    return make_checkpoint("llama-1b", tmp_path_factory.mktemp("llama-1b"), seed=0)


def _failures(records):
    return [(r.summary, r.details.get("problems"), r.details.get("findings", [])[:2])
            for r in records if r.status != "pass"]


def test_runtime_checks_pass_on_cuda(llama_dir):
    records = runtime_checks(llama_dir, "cuda", "full", command=["pytest"])
    assert not _failures(records)
    deployment = next(r for r in records if r.obligation == "runtime.deployment")
    assert deployment.details["fields"]["accelerator"]["observed"] == torch.cuda.get_device_name()


def test_a_full_scale_shard_is_bitwise_equal(llama_dir):
    shard = os.environ.get("BITCASE_GPU_COMPARE_SHARD", "1/8")
    planned = plan(llama_dir, SUITES, "full", shard=shard, device="cuda")
    records = run_suites(llama_dir, SUITES, scale="full", device="cuda", shard=shard, command=["pytest"],
                         runtime=False)
    assert not _failures(records)
    assert {r.details["unit"] for r in records} == {u.unit_id for u in planned}
    counts = Counter(r.details["num_comparisons"] for r in records)
    assert sum(n * k for n, k in counts.items()) == sum(u.num_comparisons for u in planned)
    assert all(r.deployment.fields["accelerator"]["device_type"] == "cuda" for r in records)


def test_the_negative_control_detects_on_cuda(llama_dir):
    records = run_suites(llama_dir, "negative-control", scale="full", device="cuda", shard="1/5",
                         command=["pytest"], runtime=False)
    (unit,) = records
    assert unit.status == "pass" and unit.details["num_failed"] > 0, unit.summary
