"""The server's own running count as a second overlap witness: /slots, a /metrics gauge, or neither."""

import pytest

from probing.client import parse_endpoint
from probing.protocol import run_probe
from probing.scenario_base import Settings
from probing.server_watch import running_from_metrics, running_from_slots

SMALL = dict(model="fake-model", requests=1, max_tokens=6, seed=7)


def probe(url, scenarios=("concurrent",)):
    return run_probe(parse_endpoint(url), Settings(**SMALL), chunk_size=32, scenarios=list(scenarios), timeout_s=20)


def by_unit(run, scenario="concurrent"):
    return {r.unit: r for r in run.results[scenario]}


@pytest.mark.parametrize("reports, source", [
    ("slots", "GET /slots (slots processing)"), ("metrics", "GET /metrics (vllm:num_requests_running)")])
def test_a_reported_running_count_is_sampled_during_every_group(fake_server, reports, source):
    with fake_server(reports=reports, step_s=0.02) as url:
        run = probe(url, scenarios=("concurrent", "long", "seeded"))
    assert run.is_clean
    assert all(r.details["server_watch"] == source for r in run.records)
    seven = by_unit(run)["c7.middle.p0"]
    server = seven.witness["server"]
    assert server["source"] == source and server["samples"] >= 1
    assert server["max_running"] > 1 and server["batched"] is True
    assert "the server reported up to" in seven.summary
    for scenario, unit in (("long", "c3.first.p0"), ("seeded", "c3.last.p0")):
        assert by_unit(run, scenario)[unit].witness["server"]["source"] == source


def test_a_server_that_queues_is_seen_running_one_at_a_time(fake_server):
    # one slot: the client still sees its requests in flight together, the server never ran two at once
    with fake_server(reports="slots", max_running=1, step_s=0.02) as url:
        run = probe(url)
    seven = by_unit(run)["c7.first.p0"]
    assert seven.status == "pass" and seven.witness["overlapping"] >= 1
    assert seven.witness["server"]["max_running"] == 1 and seven.witness["server"]["batched"] is False
    assert f"the server's {seven.witness['server']['samples']} sample(s) never saw more than 1 running" in seven.summary


def test_without_a_running_count_overlap_is_seen_from_the_client_only(fake_server):
    with fake_server() as url:
        run = probe(url)
    assert run.is_clean
    server = by_unit(run)["c3.last.p0"].witness["server"]
    assert server["source"] is None and "neither /slots nor" in server["reason"]
    assert any("overlap is seen from the client only" in n for n in run.backend.notes)
    assert run.records[0].details["server_watch"] is None


def test_running_counts_are_read_from_slots_and_prometheus_text():
    assert running_from_slots([{"id": 0, "is_processing": True}, {"id": 1, "is_processing": False}]) == 1
    assert running_from_slots([{"id": 0, "state": 1}, {"id": 1, "state": 1}]) == 2
    assert running_from_slots({"error": "slots disabled"}) is None and running_from_slots([]) is None
    text = ("# HELP llamacpp:requests_processing Number of requests processing.\n"
            "llamacpp:requests_processing 4\n"
            'vllm:num_requests_running{model_name="a"} 2.0\nvllm:num_requests_running{model_name="b"} 1.0\n'
            "vllm:num_requests_running_total 99\nbitcase_running garbage\n")
    assert running_from_metrics(text, "llamacpp:requests_processing") == 4
    assert running_from_metrics(text, "vllm:num_requests_running") == 3
    assert running_from_metrics(text, "bitcase_running") is None
    assert running_from_metrics(text, "tgi_batch_current_size") is None
