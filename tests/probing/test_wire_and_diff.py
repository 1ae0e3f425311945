"""Parsing both logprob layouts, the float32 check, ULP distances, sentinels and the first difference."""

import pytest

from probing.diff import compare_completions, compare_positions
from probing.floats import is_float32, is_sentinel, ulp_distance
from probing.wire import Position, WireError, parse_completion

VLLM = {"system_fingerprint": None, "usage": {"prompt_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0}},
        "choices": [{"text": "ab", "logprobs": {
            "tokens": ["token_id:7", "token_id:9", "token_id:4"],
            "token_logprobs": [None, -0.6931471824645996, -9999.0],
            "top_logprobs": [None, {"token_id:9": -0.6931471824645996, "token_id:3": -1.25},
                             {"token_id:2": -0.5, "token_id:4": -9999.0}]}}]}
LLAMA_CPP = {"choices": [{"text": "xy", "logprobs": {"content": [
    {"id": 11, "token": "x", "logprob": -0.25, "top_logprobs": [{"id": 11, "token": "x", "logprob": -0.25},
                                                               {"id": 12, "token": "y", "logprob": -1.5}]},
    {"id": 12, "token": "y", "logprob": -0.6931472, "top_logprobs": []}]}}]}


def test_legacy_layout_with_token_ids_and_echo():
    c = parse_completion(VLLM, num_prompt=2, echo=True)
    assert [p.token for p in c.prompt] == ["id:7", "id:9"] and c.prompt[0].logprob is None
    assert c.generated == (Position("id:4", -9999.0, (("id:2", -0.5), ("id:4", -9999.0))),)
    assert c.cached_tokens == 0 and c.prompt_tokens == 2


def test_content_layout_names_tokens_by_id_and_keeps_every_number():
    c = parse_completion(LLAMA_CPP)
    assert [p.token for p in c.generated] == ["id:11", "id:12"]
    assert c.generated[0].top == (("id:11", -0.25), ("id:12", -1.5))
    assert [is_float32(v) for v in c.numbers] == [True, True, True, False]  # -0.6931472 is not a float32


def test_bad_responses_say_what_is_wrong():
    with pytest.raises(WireError, match="no choices"):
        parse_completion({"choices": []})
    with pytest.raises(WireError, match="not a number"):
        parse_completion({"choices": [{"logprobs": {"tokens": ["a"], "token_logprobs": ["x"]}}]})
    with pytest.raises(WireError, match="do not cover the prompt"):
        parse_completion(VLLM, num_prompt=5, echo=True)


def test_ulps_and_sentinels():
    assert ulp_distance(-0.6931471824645996, -0.6931471228599548) == 1
    assert is_sentinel(-9999.0) and is_sentinel(-3.4028234663852886e38) and not is_sentinel(-99.0)


def _pos(token, lp, top=()):
    return Position(token, lp, tuple(top))


def test_first_difference_position_ulps_and_largest():
    ref = (_pos("id:1", -0.5), _pos("id:2", -1.0, [("id:2", -1.0), ("id:3", -2.0)]))
    obs = (_pos("id:1", -0.5), _pos("id:2", -1.0000001192092896, [("id:2", -1.0000001192092896), ("id:3", -2.0)]))
    d = compare_positions(ref, obs)
    assert (d.step, d.what, d.max_ulps, d.num_differing) == (1, ("logprob", "top-k logprob"), 1, 1)
    assert d.largest == pytest.approx(1.19e-7, rel=1e-2)


def test_top_k_order_and_sentinels_are_differences_without_a_distance():
    ref = (_pos("id:1", -9999.0, [("id:1", -0.1), ("id:2", -0.2)]),)
    obs = (_pos("id:1", -7.5, [("id:2", -0.2), ("id:1", -0.1)]),)
    d = compare_positions(ref, obs)
    assert d.what == ("sentinel", "top-k tokens or order") and d.max_ulps is None
    assert compare_positions(ref, ref) is None


def test_prefix_comparability_and_text_fallback():
    a = parse_completion({"choices": [{"text": "hello world"}]})
    b = parse_completion({"choices": [{"text": "hello"}]})
    assert compare_completions(a, b) is None
    c = parse_completion({"choices": [{"text": "help"}]})
    assert compare_completions(a, c).what == ("text",)


@pytest.mark.parametrize("module", ["probing.floats", "probing.wire", "probing.diff", "probing.client"])
def test_doctests(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
