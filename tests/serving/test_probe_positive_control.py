"""The probe's positive control: `bitcase probe` against `bitcase serve` on the tiny model.

Every scenario the served engine can exercise must pass with its witness; the deterministic
engine behind an HTTP layer must show no difference at the resolution the server returns.
"""

import json

import httpx
from typer.testing import CliRunner

from assurance.cli.main import app
from tests.serving.conftest import running_server
from engine.config import EngineConfig


def test_probe_of_bitcase_serve_passes_every_exercised_scenario(model_dir, tmp_path):
    bundle = tmp_path / "probe.jsonl"
    # The engine computes prefill in chunks of max_num_batched_tokens rows: the long-prompt
    # scenario needs prompts longer than that, and the probe has to be told it.
    config = EngineConfig(keep_logit_rows=False, max_num_batched_tokens=64)
    with running_server(model_dir, config=config) as served:
        deployment_digest = httpx.get(served.base_url + "/bitcase/deployment", timeout=30).json()["deployment_digest"]
        result = CliRunner().invoke(app, [
            "probe", served.base_url, "--model", "tiny", "--requests", "1", "--max-tokens", "6",
            "--chunk-size", "64", "--seed", "3", "--out", str(bundle), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    statuses = {name: s["status"] for name, s in summary["scenarios"].items()}
    assert set(statuses.values()) == {"pass"}, statuses
    records = [json.loads(line) for line in bundle.read_text().splitlines()]
    assert records and all(r["status"] == "pass" for r in records)
    external = records[0]["deployment"]["fields"]
    assert external["kind"] == "external" and external["system_fingerprint"] == [deployment_digest]
    assert external["probe_features"]["echo"] and external["probe_features"]["seed"]
    # the server's own running count is the second overlap witness, sampled during every group
    assert {r["details"]["server_watch"] for r in records} == {"GET /metrics (bitcase_running)"}
    grouped = [r["details"]["witness"]["server"] for r in records if "server" in r["details"]["witness"]]
    assert len(grouped) == 12 and all(w["samples"] >= 1 for w in grouped)
    assert any(w["batched"] for w in grouped)
