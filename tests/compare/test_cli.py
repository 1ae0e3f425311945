"""`bitcase compare` and `bitcase check-config`: output on stdout, exit codes 0 / 1 / 2."""

import json

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def stderr_text(result):
    return " ".join(result.stderr.split())


def read_bundle(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_compare_writes_a_bundle_and_json_summary(tiny_model_dir, tmp_path):
    out = tmp_path / "prefix.jsonl"
    result = invoke("compare", "--model", tiny_model_dir, "--suite", "prefix", "--out", out, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["obligations"]["suite.prefix"] == {
        "category": "test_result", "status": "pass", "units": 4, "comparisons": 14, "passed": 14, "failed": 0,
        "detected": 0, "errors": 0, "findings": 0}
    assert {"runtime.plan", "runtime.no_autotune", "runtime.deployment"} <= set(summary["obligations"])
    records = read_bundle(out)
    assert len(records) == summary["records"] == 4 + 4  # units + runtime checks, finiteness included
    assert (summary["shard"], summary["device"], summary["gpus"]) == ("1/1", "cpu", 1)
    assert all(r["schema"] == "bitcase.evidence/v2" for r in records)


def test_check_config_table_and_deployment_file(tiny_model_dir, tmp_path):
    d_file = tmp_path / "d.json"
    result = invoke("check-config", "--model", tiny_model_dir, "--out", tmp_path / "c.jsonl",
                    "--write-deployment", d_file)
    assert result.exit_code == 0, result.output
    assert "runtime.plan" in result.stdout and "pass" in result.stdout
    assert json.loads(d_file.read_text())["digest"].startswith("sha256:")


def test_check_config_against_another_deployment_exits_1(tiny_model_dir, tmp_path):
    d_file = tmp_path / "other.json"
    invoke("check-config", "--model", tiny_model_dir, "--out", tmp_path / "a.jsonl", "--write-deployment", d_file)
    d = json.loads(d_file.read_text())
    d["fields"]["torch_num_threads"] = 7  # a machine configured differently
    d_file.write_text(json.dumps({"fields": d["fields"]}))
    result = invoke("check-config", "--model", tiny_model_dir, "--out", tmp_path / "b.jsonl",
                    "--deployment", d_file, "--json")
    assert result.exit_code == 1
    summary = json.loads(result.stdout)["obligations"]
    assert summary["runtime.deployment"]["status"] == "fail"
    assert summary["runtime.plan"]["status"] == "error"  # no probe ran: the engine refused to start
    record = next(r for r in read_bundle(tmp_path / "b.jsonl") if r["obligation"] == "runtime.deployment")
    assert "refused to start" in record["summary"]


@pytest.mark.parametrize("args,message", [
    (["--shard", "3/2"], "shard 3/2"),
    (["--suite", "bogus"], "'bogus' is not one of 'all'"),
    (["--scale", "huge"], "'huge' is not one of 'ci', 'full'"),
    (["--device", "tpu"], "device 'tpu'"),
    (["--scale", "full"], "max_position_embeddings"),
    (["--gpus", "2"], "--gpus 2 needs --device cuda"),
    (["--gpus", "0"], "--gpus"),
])
def test_usage_errors_exit_2(tiny_model_dir, tmp_path, args, message):
    result = invoke("compare", "--model", tiny_model_dir, "--out", tmp_path / "x.jsonl", *args)
    assert result.exit_code == 2 and message in stderr_text(result) and result.stdout == ""
    assert not (tmp_path / "x.jsonl").exists()


def test_missing_model_and_bad_deployment_file_exit_2(tmp_path):
    result = invoke("compare", "--model", tmp_path / "nope", "--out", tmp_path / "x.jsonl")
    assert result.exit_code == 2 and "does not exist" in stderr_text(result)
    bad = tmp_path / "d.json"
    bad.write_text("[1, 2]")
    result = invoke("check-config", "--model", tmp_path, "--out", tmp_path / "x.jsonl", "--deployment", bad)
    assert result.exit_code == 2 and "not a deployment file" in stderr_text(result)


def test_gpus_with_shard_or_more_gpus_than_visible_exit_2(tiny_model_dir, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    base = ["compare", "--model", tiny_model_dir, "--out", tmp_path / "x.jsonl", "--device", "cuda", "--gpus", "2"]
    result = invoke(*base, "--shard", "1/2")
    assert result.exit_code == 2 and "cannot be combined" in stderr_text(result)
    result = invoke(*base)
    assert result.exit_code == 2 and "only 1 CUDA device(s) are visible" in stderr_text(result)
    assert not (tmp_path / "x.jsonl").exists()
