"""The protocol against fake servers: a clean control, every perturbation caught, missing features degraded."""

import pytest

from probing.client import ProbeInputError, parse_endpoint
from probing.protocol import run_probe
from probing.scenario_base import Settings

SMALL = dict(model="fake-model", requests=1, max_tokens=6, seed=7)


def probe(url, *, scenarios=None, **kwargs):
    return run_probe(parse_endpoint(url), Settings(**{**SMALL, **kwargs}), chunk_size=32, scenarios=scenarios,
                     timeout_s=20)


def statuses(run):
    return {name: sorted({r.status for r in results}) for name, results in run.results.items()}


def test_control_server_passes_every_scenario_with_its_witness(fake_server):
    with fake_server() as url:
        run = probe(url)
    assert run.is_clean, [r.summary for rs in run.results.values() for r in rs if r.status != "pass"]
    assert set(run.results) == {"repeat", "concurrent", "prefix", "long", "prefill-decode", "seeded"}
    assert run.resolution == "token ids and top-20 float32 logprobs"
    assert run.num_not_float32 == 0 and run.num_logprobs > 0
    by_unit = {(r.scenario, r.unit): r for rs in run.results.values() for r in rs}
    assert by_unit[("concurrent", "c7.middle.p0")].witness["overlapping"] >= 1
    assert by_unit[("prefix", "p0")].witness["cached_tokens"] > 0
    assert by_unit[("long", "c3.last.p0")].witness["prompt_tokens"] > 32
    assert by_unit[("prefill-decode", "p0")].witness["echoed_tokens_match_generated"] is True
    records = run.records
    assert len(records) == sum(len(rs) for rs in run.results.values())
    assert {r.deployment.fields["kind"] for r in records} == {"external"}
    assert all("evidence at this resolution only" in r.summary for r in records)


@pytest.mark.parametrize("perturb, scenario", [
    ("batch", "concurrent"), ("prefix", "prefix"), ("chunk", "long"), ("prefill", "prefill-decode"),
    ("seed", "seeded")])
def test_each_perturbation_is_a_counterexample_and_repeat_stays_clean(fake_server, perturb, scenario):
    with fake_server(perturb={perturb}) as url:
        run = probe(url, scenarios=["repeat", scenario])
    assert statuses(run)["repeat"] == ["pass"]
    assert "fail" in statuses(run)[scenario]
    failed = [r for r in run.results[scenario] if r.status == "fail"]
    assert failed[0].difference.max_ulps > 0 and failed[0].difference.largest > 0
    record = next(r for r in run.records if r.status == "fail")
    assert "conclusive counterexample" in record.summary
    assert record.details["counterexample"]["first_differing_position"] == failed[0].difference.step


def test_a_server_that_differs_serially_is_reported_so(fake_server):
    with fake_server(perturb={"serial"}) as url:
        run = probe(url, scenarios=["repeat"])
    (result,) = run.results["repeat"]
    assert result.status == "fail" and result.summary.startswith("not deterministic even serially")
    assert result.difference.max_ulps > 0


@pytest.mark.parametrize("lacks, scenario, note", [
    ("logprobs", "prefill-decode", "no logprobs"), ("echo", "prefill-decode", "(HTTP 400: echo is not supported)"),
    ("seed", "seeded", "seeds refused (HTTP 400: unknown field: seed)"), ("cached_tokens", "prefix", None)])
def test_missing_features_leave_scenarios_not_exercised(fake_server, lacks, scenario, note):
    with fake_server(lacks={lacks}) as url:
        run = probe(url, scenarios=["repeat", scenario])
    assert statuses(run) == {"repeat": ["pass"], scenario: ["inconclusive"]}
    assert all(r.summary.startswith("not exercised") for r in run.results[scenario])
    assert not run.is_clean
    if note:
        assert any(note in n for n in run.backend.notes)


def test_without_logprobs_only_text_is_compared(fake_server):
    with fake_server(lacks={"logprobs"}) as url:
        run = probe(url, scenarios=["concurrent"], concurrency=4)
    assert run.resolution.startswith("generated tokens or text only")
    assert statuses(run)["concurrent"] == ["inconclusive", "pass"]  # 7 companions need --concurrency 8


def test_text_prompts_when_token_ids_are_refused(fake_server):
    with fake_server(lacks={"token_ids"}) as url:
        run = probe(url, scenarios=["repeat", "prefix"])
    assert run.backend.features.token_id_prompts is False
    assert statuses(run) == {"repeat": ["pass"], "prefix": ["pass"]}


def test_a_retried_request_is_never_compared(fake_server):
    # the repeat's second run is answered 503 once, then retried
    with fake_server(busy_after=1) as url:
        run = probe(url, scenarios=["repeat"])
    (result,) = run.results["repeat"]
    assert run.num_retried == 1
    # two runs besides the reference, one of them retried: only the other is compared
    assert (result.status, result.num_comparisons) == ("pass", 1)
    assert result.errors == ("repeat.p0.1: retried, not compared",)


def test_unknown_model_and_unreachable_server_are_input_errors(fake_server):
    with fake_server() as url:
        with pytest.raises(ProbeInputError, match="does not serve model 'nope'"):
            probe(url, model="nope")
    with pytest.raises(ProbeInputError, match="cannot reach"):
        run_probe(parse_endpoint("http://127.0.0.1:9/v1"), Settings(**SMALL), timeout_s=2)
