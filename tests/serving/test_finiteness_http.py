"""The run-time finiteness check through `bitcase serve` and the openai client.

A checkpoint whose embedding row of one token is NaN makes every request holding that token break
the attention premise (its q, K and V rows are NaN): such a request must end with an OpenAI-style
error, the others must get exactly what they get on a clean server, and /metrics counts it.
"""

from __future__ import annotations

import httpx
import pytest

from engine.checkpoint import make_checkpoint
from engine.tokenizer_make import write_tokenizer
from tests.serving.conftest import running_server

POISON_TOKEN = 77


@pytest.fixture(scope="module")
def poisoned_dir(tmp_path_factory):
    from safetensors.torch import load_file, save_file

    directory = make_checkpoint("tiny", tmp_path_factory.mktemp("serve-nan"), seed=0)
    write_tokenizer(directory)
    tensors = load_file(directory / "model.safetensors")
    tensors["model.embed_tokens.weight"][POISON_TOKEN] = float("nan")
    save_file(tensors, directory / "model.safetensors")
    return directory


def test_a_request_breaking_the_premise_gets_an_error_and_the_others_are_served(poisoned_dir, model_dir):
    import openai

    clean_prompt, bad_prompt = [5, 6, 7, 8, 9, 10], [5, 6, POISON_TOKEN, 8, 9, 10]
    with running_server(model_dir) as clean:
        expected = openai.OpenAI(base_url=clean.v1, api_key="unused", max_retries=0, timeout=60).completions.create(
            model="tiny", prompt=clean_prompt, max_tokens=6, temperature=0)
    # start-up checks off: their probe prompts hold every token, so the check ends the probe's
    # requests too and runtime.plan, which needs them to finish, refuses to serve this checkpoint
    with running_server(poisoned_dir, startup_checks=False) as served:
        client = openai.OpenAI(base_url=served.v1, api_key="unused", max_retries=0, timeout=60)
        with pytest.raises(openai.InternalServerError) as raised:
            client.completions.create(model="tiny", prompt=bad_prompt, max_tokens=6, temperature=0)
        error = raised.value.body
        assert error["code"] == "non_finite_attention" and "finiteness check" in error["message"]
        chunks = list(client.completions.create(model="tiny", prompt=bad_prompt, max_tokens=6, temperature=0,
                                                stream=True))
        last = chunks[-1].choices[0]
        assert last.finish_reason == "error"
        assert last.model_extra["error"]["code"] == "non_finite_attention"
        got = client.completions.create(model="tiny", prompt=clean_prompt, max_tokens=6, temperature=0)
        assert got.choices[0].model_extra["token_ids"] == expected.choices[0].model_extra["token_ids"]
        assert got.choices[0].model_extra["row_digests"] == expected.choices[0].model_extra["row_digests"]
        metrics = httpx.get(served.base_url + "/metrics", timeout=10).text
        assert "bitcase_attention_non_finite_total 2" in metrics
        assert 'bitcase_request_finish_total{reason="error"} 2' in metrics
