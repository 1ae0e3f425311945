"""`bitcase verify`: exit codes, JSON on stdout, evidence bundles."""

import json

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app
from evidence_db.validate import validate_evidence
from tests.proofs.conftest import KERNELS, MUTANTS

runner = CliRunner()


def test_plan_entry_verified_as_json_and_bundle(tmp_path):
    out = tmp_path / "proofs.jsonl"
    result = runner.invoke(app, ["verify", "--plan", "tiny", "--key", "matmul.n128_k64", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    assert entry["verdict"] == "VERIFIED" and entry["key"] == "matmul.n128_k64"
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for record in records:
        validate_evidence(record)
    proof = next(r for r in records if r["category"] == "kernel_proof")
    assert proof["obligation"] == "kernel.matmul.n128_k64.contract" and proof["status"] == "pass"
    assert proof["subjects"][0]["uri"] == "code:kernels/matmul.py"
    assert proof["details"]["verifier_version"] and proof["details"]["triton_version"]
    assert proof["deployment"]["fields"]["kernel_plan"]["name"] == "tiny"
    trusted = {r["obligation"] for r in records if r["category"] == "trusted_contract_translation"}
    assert {"trusted.triton-compiler", "trusted.dot-position-independence", "trusted.host-glue"} <= trusted


def test_refuted_user_kernel_exits_1_with_fail_record(tmp_path):
    out = tmp_path / "m.jsonl"
    target = f"{MUTANTS / 'atomic_rowsum.py'}::rowsum_atomic"
    result = runner.invoke(app, ["verify", target, "--contract", str(MUTANTS / "atomic_rowsum.toml"), "--out", str(out)])
    assert result.exit_code == 1
    assert "REFUTED" in result.stdout and "Counterexample:" in result.stdout
    (proof,) = [json.loads(line) for line in out.read_text().splitlines() if '"kernel_proof"' in line]
    assert proof["status"] == "fail" and proof["details"]["counterexample"]["A"]


def test_user_kernel_with_constexprs_is_verified():
    target = f"{KERNELS / 'matmul.py'}::matmul_kernel"
    result = runner.invoke(app, ["verify", target, "--contract", str(KERNELS / "matmul.toml"), "--constexpr",
                                 "BLOCK_M=32", "--constexpr", "BLOCK_N=32", "--constexpr", "BLOCK_K=32", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["configuration"] == {"BLOCK_K": 32, "BLOCK_M": 32, "BLOCK_N": 32}


def test_bad_input_exits_2():
    assert runner.invoke(app, ["verify", "--plan", "huge"]).exit_code == 2
    assert runner.invoke(app, ["verify", "--plan", "tiny", "--key", "nope"]).exit_code == 2
    assert runner.invoke(app, ["verify", f"{KERNELS / 'matmul.py'}::matmul_kernel"]).exit_code == 2
    assert runner.invoke(app, ["verify", "missing.py::k", "--contract", "c.toml"]).exit_code == 2
    assert runner.invoke(app, ["verify", "--constexpr", "X=1"]).exit_code == 2


def test_deployment_file_names_the_records(tmp_path):
    from kernels.plan import preset_plan

    plan = preset_plan("tiny")
    fields = {"kernel_plan": {"name": "tiny", "digest": plan.digest,
                              "entries": [e.as_dict() for e in plan.entries if e.key == "rope_store_kv.hq4_hkv2_d16_p16"]},
              "accelerator": {"device_type": "cpu"}}
    d_file = tmp_path / "d.json"
    d_file.write_text(json.dumps({"fields": fields}))
    out = tmp_path / "b.jsonl"
    result = runner.invoke(app, ["verify", "--deployment", str(d_file), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert [e["key"] for e in json.loads(result.stdout)] == ["rope_store_kv.hq4_hkv2_d16_p16"]
    record = json.loads(out.read_text().splitlines()[0])
    assert record["deployment"]["fields"] == fields


def test_plan_entries_in_worker_processes_come_back_in_plan_order(monkeypatch):
    keys = ["rms_norm.h64", "attention_combine.hq4_d16_s128", "matmul.n128_k64", "embedding.v256_h64"]
    args = ["verify", "--plan", "tiny", "--json"] + [a for k in keys for a in ("--key", k)]
    serial = runner.invoke(app, args + ["--jobs", "1"])
    parallel = runner.invoke(app, args + ["--jobs", "2"])
    assert serial.exit_code == parallel.exit_code == 0, parallel.output
    verdicts = [[(r["key"], r["verdict"], r["obligations_proved"]) for r in json.loads(out.stdout)] for out in (serial, parallel)]
    assert verdicts[0] == verdicts[1] and [k for k, _, _ in verdicts[0]] == sorted(keys)
    assert all(v == "VERIFIED" for _, v, _ in verdicts[1])


def test_bad_worker_counts_exit_2_with_the_setting_named(monkeypatch):
    result = runner.invoke(app, ["verify", "--plan", "tiny", "--jobs", "0"])
    assert result.exit_code == 2 and "--jobs" in result.output
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("BITCASE_VERIFY_JOBS", bad)
        result = runner.invoke(app, ["verify", "--plan", "tiny", "--key", "rms_norm.h64"])
        assert result.exit_code == 2 and "BITCASE_VERIFY_JOBS" in result.output, result.output


def test_the_real_shape_q_k_norm_is_verified_through_the_cli():
    result = runner.invoke(app, ["verify", "--plan", "qwen3-0.6b", "--key", "rms_norm.h128", "--json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    assert entry["verdict"] == "VERIFIED" and entry["key"] == "rms_norm.h128"


@pytest.mark.parametrize("key", ["gelu_tanh_mul.i6912", "rms_norm.h1152_residual_offset",
                                 "embedding.v262144_h1152_scaled"])
def test_the_gemma3_1b_kernels_are_verified_through_the_cli(key):
    result = runner.invoke(app, ["verify", "--plan", "gemma3-1b", "--key", key, "--json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    assert entry["verdict"] == "VERIFIED" and entry["key"] == key
