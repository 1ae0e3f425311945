"""The engine's request API: validation, isolation of bad requests, cancellation, stops, deployment D."""

import pytest
import torch

from engine.config import EngineConfig
from engine.deployment import DeploymentMismatch, current_deployment
from engine.llm_engine import LLM, BadRequestError, LLMEngine
from engine.sampling_params import SamplingParams
from engine.trace import compare_traces
from tests.engine.conftest import P, SMALL_ENGINE

PARAMS = SamplingParams(max_tokens=4, ignore_eos=True)
GOOD = [list(range(5, 5 + P + 3)), [1, 2, 3]]
MAX_MODEL_LEN = SMALL_ENGINE["max_model_len"]


@pytest.fixture(scope="module")
def clean_outputs(tiny_dir):
    return LLM(tiny_dir, **SMALL_ENGINE).generate(GOOD, PARAMS)


@pytest.mark.parametrize("prompt, params, message", [
    ([], PARAMS, "empty"),
    ([1, 256], PARAMS, r"token 1 is 256; token ids are integers in \[0, 256\)"),
    ([1, -3], PARAMS, "token 1 is -3"),
    ([1, True], PARAMS, "token 1 is True"),
    ([1, 2, 2.0], PARAMS, "token 2 is 2.0"),
    ((5, None), PARAMS, "token 1 is None"),
    ("1,2", PARAMS, "list of token ids"),
    ([1] * (MAX_MODEL_LEN - 3), PARAMS, f"needs {MAX_MODEL_LEN + 1} positions"),
    ([1, 2], {"temperature": 0.5}, "SamplingParams"),
])
def test_bad_requests_are_refused_and_disturb_nothing(tiny_dir, clean_outputs, prompt, params, message):
    engine = LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    ids = [engine.add_request(GOOD[0], PARAMS)]
    with pytest.raises(BadRequestError, match=message):
        engine.add_request(prompt, params)
    ids.append(engine.add_request(GOOD[1], PARAMS))
    done = {o.request_id: o for o in engine.run()}
    for rid, ref in zip(ids, clean_outputs):
        assert compare_traces(done[rid].trace, ref.trace).agree and done[rid].token_ids == ref.token_ids


def test_numpy_integer_token_ids_are_accepted_as_ints(tiny_dir):
    import numpy as np

    engine = LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    rid = engine.add_request([np.int64(t) for t in GOOD[0]], PARAMS)
    out = {o.request_id: o for o in engine.run()}[rid]
    assert out.prompt_token_ids == tuple(GOOD[0]) and all(type(t) is int for t in out.prompt_token_ids)


@pytest.mark.parametrize("kwargs, message", [
    ({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"), ({"top_k": -1}, "top_k"),
    ({"max_tokens": 0}, "max_tokens"), ({"seed": -1}, "seed"), ({"seed": 2**64}, "seed"),
    ({"stop_token_ids": [-1]}, "stop_token_ids"), ({"temperature": float("nan")}, "temperature"),
])
def test_bad_sampling_values_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


def test_duplicate_request_ids_are_refused(tiny_dir):
    engine = LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    engine.add_request([1, 2], PARAMS, request_id="a")
    with pytest.raises(BadRequestError, match="already used"):
        engine.add_request([1, 2], PARAMS, request_id="a")


def test_generate_validates_every_request_before_queueing_any(tiny_dir):
    llm = LLM(tiny_dir, **SMALL_ENGINE)
    with pytest.raises(BadRequestError, match="request 1"):
        llm.generate([[1, 2], [999]], PARAMS)
    assert not llm.engine.has_unfinished()


@pytest.mark.parametrize("cancel_at_step", [0, 1, 3])
def test_cancelling_mid_flight_frees_everything(tiny_dir, clean_outputs, cancel_at_step):
    # The first victim is queued before any step, mid-prefill after one (a page-aligned chunk of
    # its 3P + 1 tokens) and decoding, its full pages published, after three; the second stays
    # queued (max_num_seqs).
    config = EngineConfig(**{**SMALL_ENGINE, "max_num_batched_tokens": 2 * P, "max_num_seqs": 2})
    engine = LLMEngine(tiny_dir, config)
    keep = engine.add_request(GOOD[1], PARAMS)
    victims = [engine.add_request(list(range(1, 3 * P + 2)), PARAMS), engine.add_request([4] * (2 * P + 1), PARAMS)]
    done = {}
    for _ in range(cancel_at_step):
        done.update({o.request_id: o for o in engine.step().finished})
    cancelled = [engine.cancel(rid) for rid in victims]
    assert all(out is not None and out.finish_reason == "cancelled" for out in cancelled)
    chunk_ends, num_produced = {0: ((), 0), 1: ((P,), 0), 3: ((P, 2 * P, 3 * P + 1), 1)}[cancel_at_step]
    assert cancelled[0].prefill_chunk_ends == chunk_ends and len(cancelled[0].token_ids) == num_produced
    assert cancelled[1].prefill_chunk_ends == ()
    assert engine.cancel(victims[0]) is None and engine.cancel("nope") is None
    done.update({o.request_id: o for o in engine.run()})
    assert done[keep].token_ids == clean_outputs[1].token_ids
    bm = engine.block_manager
    assert bm.num_available_pages == config.num_pages and bm.audit([]) == []
    assert not engine.has_unfinished()


def test_stop_tokens_end_a_request_with_a_prefix_of_its_trace(tiny_dir, clean_outputs):
    ref = clean_outputs[0]
    stop = ref.token_ids[2]
    first = ref.token_ids.index(stop)
    out = LLM(tiny_dir, **SMALL_ENGINE).generate([GOOD[0]], SamplingParams(max_tokens=4, stop_token_ids=[stop]))[0]
    assert out.finish_reason == "stop" and out.token_ids == ref.token_ids[:first + 1]
    assert compare_traces(out.trace, ref.trace).agree


def test_digest_only_traces_still_compare(tiny_dir, clean_outputs):
    out = LLM(tiny_dir, keep_logit_rows=False, **SMALL_ENGINE).generate([GOOD[0]], PARAMS)[0]
    assert all(e.logits is None for e in out.trace.entries)
    assert compare_traces(out.trace, clean_outputs[0].trace).agree
    assert out.to_dict()["logits_digests"] == [e.logits_digest for e in clean_outputs[0].trace.entries]


def test_deployment_configuration(tiny_dir):
    engine = LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    fields = engine.deployment.fields
    assert fields["weights_digest"] == engine.runner.weights_digest
    assert fields["kernel_plan"]["digest"] == engine.runner.plan.digest and fields["kernel_plan"]["entries"]
    assert fields["accelerator"]["name"] == "cpu" and fields["dtype"] == "float32"
    assert fields["torch_num_threads"] == torch.get_num_threads() == 1
    assert fields["engine"]["page_size"] == SMALL_ENGINE["page_size"]
    assert set(fields["software"]) == {"python", "torch", "triton", "bitcase"}
    assert current_deployment(tiny_dir, **SMALL_ENGINE).digest == engine.deployment.digest
    other = LLMEngine(tiny_dir, EngineConfig(**{**SMALL_ENGINE, "page_size": 2 * P})).deployment
    assert other.digest != engine.deployment.digest
    LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE), expected_deployment=engine.deployment.digest)
    with pytest.raises(DeploymentMismatch, match="refusing to serve"):
        LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE), expected_deployment=other.digest)


def test_engine_limits_beyond_the_model_are_refused(tiny_dir):
    with pytest.raises(ValueError, match="max_position_embeddings"):
        LLMEngine(tiny_dir, EngineConfig(max_model_len=4096, num_pages=512))


@pytest.mark.parametrize("kwargs, message", [
    ({"page_size": 0}, "page_size"), ({"max_num_batched_tokens": 8, "page_size": 16}, "at least page_size"),
    ({"num_pages": 2}, "cannot hold one request"), ({"device": "tpu"}, "device"), ({"dtype": "float16"}, "dtype"),
    ({"num_threads": 0}, "num_threads"), ({"check_kv_pages_per_step": -1}, "check_kv_pages_per_step"),
])
def test_engine_config_is_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(**kwargs)


def test_unknown_engine_options_are_named():
    with pytest.raises(ValueError, match="unknown engine option.*page_sise"):
        EngineConfig.from_kwargs(page_sise=4)
