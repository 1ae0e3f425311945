"""`bitcase probe`: bundle and store, the external case's status, check and report, exit codes 0 / 1 / 2 / 130."""

import json

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app

runner = CliRunner()
CASE = "assurance/cases/external.toml"
SMALL = ["--served-model-name", "fake-model", "--requests", "1", "--max-tokens", "6", "--chunk-size", "32", "--seed", "5"]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "store.db"
    assert invoke("db", "upgrade", "--db", db).exit_code == 0
    return db


def test_clean_probe_feeds_the_external_case(fake_server, store, tmp_path):
    bundle = tmp_path / "probe.jsonl"
    with fake_server() as url:
        result = invoke("probe", url, *SMALL, "--out", bundle, "--db", store, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert {s["status"] for s in summary["scenarios"].values()} == {"pass"}
    assert summary["records"] == len(bundle.read_text().splitlines()) == 17
    assert summary["requests_per_s"] > 0 and summary["resolution"] == "token ids and top-20 float32 logprobs"
    d = summary["deployment_digest"]
    assert f"--config {d}" in result.stderr  # the probe names the D to judge
    assert invoke("status", "--case", CASE, "--db", store).exit_code == 2  # no D pinned for the external case
    assert invoke("status", "--case", CASE, "--db", store, "--config", d).exit_code == 0
    check = invoke("check", "--case", CASE, "--db", store, "--config", d, "--json")
    assert check.exit_code == 0 and json.loads(check.stdout)["passed"] is True
    report = invoke("report", "--case", CASE, "--db", store, "--out", tmp_path / "report")
    assert report.exit_code == 0, report.output
    html = (tmp_path / "report" / "report.html").read_text()
    assert "everything here is test evidence about a black box" in html


def test_credentials_never_reach_the_evidence(fake_server, tmp_path, store):
    bundle = tmp_path / "probe.jsonl"
    with fake_server() as url:
        secret = url.replace("http://", "http://probe:hunter2@") + "?token=hunter3"
        result = invoke("probe", secret, *SMALL, "--scenario", "repeat", "--out", bundle)
    assert result.exit_code == 0, result.output
    text = bundle.read_text()
    assert "hunter2" not in text and "hunter3" not in text
    assert json.loads(text.splitlines()[0])["deployment"]["fields"]["endpoint"] == url


def test_a_counterexample_exits_1_and_fails_the_case(fake_server, store):
    with fake_server(perturb={"batch"}) as url:
        result = invoke("probe", url, *SMALL, "--scenario", "concurrent", "--db", store)
    assert result.exit_code == 1, result.output
    assert "concurrent: counterexample" in result.stdout
    d = result.stderr.split("--config ")[1].split()[0]
    status = invoke("status", "--case", CASE, "--db", store, "--config", d, "--json")
    assert status.exit_code == 1
    nodes = {n["id"]: n["status"] for n in json.loads(status.stdout)["nodes"]}
    assert nodes["probe.batch"] == "failed" and nodes["G.determinism"] == "defeated"


def test_declared_flags_become_part_of_d(fake_server, tmp_path):
    declared = tmp_path / "d.json"
    declared.write_text(json.dumps({"fields": {"engine": "fake 1.0", "max_num_seqs": 8}}))
    bundle = tmp_path / "b.jsonl"
    with fake_server() as url:
        result = invoke("probe", url, *SMALL, "--scenario", "repeat", "--deployment", declared, "--out", bundle)
    assert result.exit_code == 0, result.output
    fields = json.loads(bundle.read_text().splitlines()[0])["deployment"]["fields"]
    assert fields["declared"] == {"engine": "fake 1.0", "max_num_seqs": 8}


@pytest.mark.parametrize("args, message", [
    (["not-a-url"], "is not an http(s) URL"),
    (["http://127.0.0.1:9/v1", "--timeout", "2"], "cannot reach"),
    (["{url}", "--scenario", "nope"], "'nope' is not one of 'repeat'"),
    (["{url}", "--api", "ollama"], "'ollama' is not one of 'auto'"),
    (["{url}", "--deployment", "{missing}"], "cannot read a JSON object"),
    (["{url}", "--db", "{nostore}"], "no evidence store"),
])
def test_bad_input_exits_2_and_stores_nothing(fake_server, tmp_path, args, message):
    out = tmp_path / "b.jsonl"
    with fake_server() as url:
        filled = [a.format(url=url, missing=tmp_path / "missing.json", nostore=tmp_path / "none.db") for a in args]
        result = invoke("probe", *filled, *SMALL, "--out", out)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split())
    assert not out.exists()


def test_ctrl_c_stores_nothing(fake_server, tmp_path, store, monkeypatch):
    import probing.protocol as protocol

    calls = []

    def interrupt(message, done, owed):
        calls.append(message)
        if len(calls) > 8:
            raise KeyboardInterrupt
    original = protocol._Tally.__init__
    monkeypatch.setattr(protocol._Tally, "__init__", lambda self, progress: original(self, interrupt))
    out = tmp_path / "b.jsonl"
    with fake_server() as url:
        result = invoke("probe", url, *SMALL, "--out", out, "--db", store)
    assert result.exit_code == 130, result.output
    assert "nothing was written or stored" in result.stderr
    assert not out.exists() and not list(tmp_path.glob(".b.jsonl*"))
    from evidence_db.session import open_session
    from evidence_db.store import list_deployments

    with open_session(str(store)) as session:
        assert list_deployments(session=session) == []


def test_a_declared_chunk_size_must_be_a_positive_integer(fake_server, tmp_path):
    declared = tmp_path / "d.json"
    declared.write_text(json.dumps({"chunk_size": "big"}))
    with fake_server() as url:
        result = invoke("probe", url, "--model", "fake-model", "--deployment", declared, "--out", tmp_path / "b.jsonl")
    assert result.exit_code == 2
    assert "chunk_size 'big' is not a positive integer" in " ".join(result.stderr.split())


def test_signed_probe_bundle_is_checked_and_its_signer_stored(fake_server, store, tmp_path, monkeypatch):
    monkeypatch.setenv("BITCASE_KEYS", str(tmp_path / "keys"))
    monkeypatch.delenv("BITCASE_SIGNING_KEY", raising=False)
    made = invoke("key", "generate", "--name", "probe-ci", "--json")
    assert made.exit_code == 0, made.output
    key_id = json.loads(made.stdout)["key_id"]
    bundle = tmp_path / "probe.jsonl"
    with fake_server() as url:
        bad = invoke("probe", url, *SMALL, "--scenario", "repeat", "--db", store, "--sign-key", "nobody")
        assert bad.exit_code == 2  # a key that is not there: refused before any request
        result = invoke("probe", url, *SMALL, "--scenario", "repeat", "--out", bundle, "--db", store,
                        "--sign-key", key_id)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "probe.jsonl.sig").is_file()
    from evidence_db.session import open_session
    from evidence_db.signatures import list_signers

    with open_session(str(store)) as session:
        assert [s.key_id for s in list_signers(session=session)] == [key_id]
    assert invoke("ingest", bundle, "--db", store, "--require-signed").exit_code == 2  # signed, but not trusted
    assert invoke("key", "trust", key_id).exit_code == 0
    assert invoke("ingest", bundle, "--db", store, "--require-signed").exit_code == 0  # now a no-op re-ingest
