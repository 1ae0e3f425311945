"""`bitcase report`, `diagram`, `review add/list` and `audit diff` on a real SQLite store."""

import json
import shutil

from typer.testing import CliRunner

from assurance.cli.main import app
from assurance.render import graphviz
from tests.render.conftest import ingest, make_record, needs_dot

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_report_writes_html_and_prints_its_path(store, case_file, tmp_path):
    out = tmp_path / "out"
    result = invoke("report", "--db", store, "--case", case_file, "--out", out, "--no-diagram")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out / "report.html")
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Supported under trust" in html and "BM=64" in html and "T.gpu" in html
    assert sorted(p.name for p in out.iterdir()) == ["report.html"]


def test_report_exits_1_when_a_top_claim_is_not_supported(store, case_file, tmp_path):
    ingest(store, [make_record("proof-2", "Sn.proof", "kernel_proof", "fail", details={"counterexample": {"row": 3}})])
    result = invoke("report", "--db", store, "--case", case_file, "--out", tmp_path / "o", "--no-diagram")
    assert result.exit_code == 1
    html = (tmp_path / "o" / "report.html").read_text(encoding="utf-8")
    assert "Defeated" in html and "counterexample" in html


def test_report_has_one_section_per_deployment_and_config_selects_one(store, case_file, tmp_path):
    ingest(store, [make_record("check-gpu", "Sn.plan", "runtime_config_check", fields={"accelerator": "H200"})])
    result = invoke("report", "--db", store, "--case", case_file, "--out", tmp_path / "a", "--no-diagram")
    html = (tmp_path / "a" / "report.html").read_text(encoding="utf-8")
    assert html.count('class="scope"') == 2 and result.exit_code == 1  # the H200 D has no proof
    from evidence_db.canonical import digest_of
    digest = digest_of({"accelerator": "cpu", "torch": "2.13.0"})
    result = invoke("report", "--db", store, "--case", case_file, "--out", tmp_path / "b", "--no-diagram",
                    "--config", digest[7:19])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "b" / "report.html").read_text(encoding="utf-8").count('class="scope"') == 1
    result = invoke("report", "--db", store, "--case", case_file, "--out", tmp_path / "c", "--config", "ffff")
    assert result.exit_code == 2 and "no deployment configuration matches" in result.stderr
    assert not (tmp_path / "c").exists()


def test_report_input_errors_exit_2(store, case_file, tmp_path):
    result = invoke("report", "--db", tmp_path / "missing.db", "--case", case_file, "--out", tmp_path / "o")
    assert result.exit_code == 2 and "no evidence store" in result.stderr
    result = invoke("report", "--db", store, "--case", tmp_path / "nope.toml", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "nope.toml" in result.stderr
    result = invoke("report", "--db", store, "--case", case_file, "--out", case_file)
    assert result.exit_code == 2 and "is a file" in result.stderr
    result = invoke("report", "--db", store, "--case", case_file, "--out", tmp_path / "o", "--templates", tmp_path / "t")
    assert result.exit_code == 2 and "template directory" in result.stderr


@needs_dot
def test_diagram_svg_and_focus(store, case_file, tmp_path):
    result = invoke("diagram", "--db", store, "--case", case_file, "--out", tmp_path / "d.svg")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "d.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
    result = invoke("diagram", "--db", store, "--case", case_file, "--out", tmp_path / "f.dot", "--focus", "Sn.proof")
    assert result.exit_code == 0 and "focus_claim" in (tmp_path / "f.dot").read_text(encoding="utf-8")


# The bundled case's components and contracts (declared in its [[component]] and [[contract]] tables).
_BUNDLED_COMPONENTS = ("engine", "kernels", "verifier", "triton", "driver", "gpu", "store")
_BUNDLED_CONTRACTS = (("engine", "kernels", 5), ("verifier", "kernels", 1), ("kernels", "triton", 1),
                      ("triton", "driver", 1), ("driver", "gpu", 1), ("engine", "driver", 1), ("engine", "store", 1),
                      ("verifier", "store", 1))


def test_the_bundled_cases_diagrams_keep_their_components(store, tmp_path):
    import re
    from pathlib import Path

    cases = Path(__file__).resolve().parents[2] / "assurance" / "cases"
    result = invoke("diagram", "--db", store, "--case", cases / "determinism.toml", "--out", tmp_path / "d.dot")
    assert result.exit_code == 0, result.stderr
    dot_text = (tmp_path / "d.dot").read_text(encoding="utf-8")
    drawn = re.findall(r"^(\w+) \[label=", dot_text, re.M)
    assert [n for n in drawn if not n.startswith("legend")] == sorted(_BUNDLED_COMPONENTS, key=drawn.index)
    assert set(drawn) >= set(_BUNDLED_COMPONENTS) and "unassigned" not in drawn
    edges = re.findall(r"^(\w+) -> (\w+) \[", dot_text, re.M)
    for source, target, count in _BUNDLED_CONTRACTS:
        assert edges.count((source, target)) == count, (source, target)
    assert "Kernel verifier\\n3 trusted-unreviewed" in dot_text  # translator, rules and solver encoding
    assert re.search(r'^engine -> kernels \[label="launches only in the sealed plan', dot_text, re.M)
    result = invoke("diagram", "--db", store, "--case", cases / "external.toml", "--out", tmp_path / "x.dot")
    assert result.exit_code == 0, result.stderr
    dot_text = (tmp_path / "x.dot").read_text(encoding="utf-8")
    assert "External inference engine (black\\nbox)" in dot_text and "Triton" not in dot_text
    assert "6 missing" in dot_text and "declares no [[component]]" not in dot_text


def test_diagram_errors(store, case_file, tmp_path, monkeypatch):
    result = invoke("diagram", "--db", store, "--case", case_file, "--out", tmp_path / "d.jpg")
    assert result.exit_code == 2 and ".svg, .png or .dot" in result.stderr
    result = invoke("diagram", "--db", store, "--case", case_file, "--out", tmp_path / "d.dot", "--focus", "G.nope")
    assert result.exit_code == 2 and "G.top" in result.stderr
    monkeypatch.setattr(graphviz.shutil, "which", lambda name: None)
    result = invoke("diagram", "--db", store, "--case", case_file, "--out", tmp_path / "d.png")
    assert result.exit_code == 2 and "apt-get install graphviz" in result.stderr
    assert (tmp_path / "d.dot").read_text(encoding="utf-8").startswith("digraph")
    assert not (tmp_path / "d.png").exists()


def test_diagram_replaces_a_symlink_instead_of_writing_through_it(store, case_file, tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    link = tmp_path / "d.dot"
    link.symlink_to(precious)
    result = invoke("diagram", "--db", store, "--case", case_file, "--out", link)
    assert result.exit_code == 0, result.output
    assert precious.read_text() == "keep me"  # the link's target is untouched
    assert not link.is_symlink() and link.read_text(encoding="utf-8").startswith("digraph")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".d.dot")) == []  # no temporary left
    unwritable = invoke("diagram", "--db", store, "--case", case_file, "--out", case_file / "x.dot")
    assert unwritable.exit_code == 2 and "cannot write" in unwritable.stderr


def test_report_shows_the_chain_check_and_the_version(store, case_file, tmp_path):
    result = invoke("report", "--db", store, "--case", case_file, "--out", tmp_path / "o", "--no-diagram")
    html = (tmp_path / "o" / "report.html").read_text(encoding="utf-8")
    assert "Evidence store hash chain: hash chain intact:" in html and "data-chain-verified-at=" in html
    assert " · bitcase " in html and "hash chain intact" in result.stderr


def test_review_add_pins_and_shows_in_list_and_report(store, case_file, tmp_path):
    result = invoke("review", "add", "T.gpu", "--decision", "accept", "--by", "alice", "--rationale", "checked",
                    "--db", store, "--case", case_file, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["target_kind"] == "trusted item" and record["target_digest"].startswith("sha256:")
    result = invoke("review", "add", "proof-1", "--decision", "needs-work", "--by", "bob", "--rationale", "[b]rerun[/b]",
                    "--db", store, "--case", case_file, "--expires", "2999-01-01")
    assert result.exit_code == 0, result.output
    listed = json.loads(invoke("review", "list", "--db", store, "--case", case_file, "--json").stdout)
    assert [(r["target"], r["decision"], r["pinned_to_current"]) for r in listed] == [
        ("T.gpu", "accept", True), ("proof-1", "needs-work", True)]
    table = invoke("review", "list", "--db", store, "--case", case_file).stdout
    assert "T.gpu" in table and "[b]" in table and "current" in table  # brackets shown, not read as markup
    invoke("report", "--db", store, "--case", case_file, "--out", tmp_path / "o", "--no-diagram")
    html = (tmp_path / "o" / "report.html").read_text(encoding="utf-8")
    assert "trusted-reviewed" in html and "by alice" in html

    case_file.write_text(case_file.read_text().replace("part of D", "part of D, edited"), encoding="utf-8")
    listed = json.loads(invoke("review", "list", "--db", store, "--case", case_file, "--json").stdout)
    assert listed[0]["pinned_to_current"] is False  # editing the rationale made the review stale


def test_review_add_rejects_what_it_cannot_review(store, case_file):
    base = ("--decision", "accept", "--by", "a", "--rationale", "r", "--db", store, "--case", case_file)
    result = invoke("review", "add", "T.gpx", *base)
    assert result.exit_code == 2 and "T.gpu" in result.stderr  # suggests the close match and lists trusted items
    result = invoke("review", "add", "Sn.proof", *base)
    assert result.exit_code == 2 and "not a trusted item" in result.stderr
    result = invoke("review", "add", "T.gpu", *base, "--expires", "2020-01-01")
    assert result.exit_code == 2 and "in the past" in result.stderr
    result = invoke("review", "add", "T.gpu", *base[:1], "maybe", *base[2:])
    assert result.exit_code == 2
    assert json.loads(invoke("review", "list", "--db", store, "--json").stdout) == []


def test_audit_diff_between_stores_and_snapshots(store, case_file, tmp_path):
    other = tmp_path / "other.db"
    shutil.copy(store, other)
    result = invoke("audit", "diff", store, other, "--case", case_file)
    assert result.exit_code == 0 and result.stdout == ""
    ingest(other, [make_record("proof-2", "Sn.proof", "kernel_proof", "fail")])
    result = invoke("audit", "diff", store, other, "--case", case_file, "--json")
    assert result.exit_code == 1
    diff = json.loads(result.stdout)
    assert diff["evidence"]["added"] == ["proof-2"] and not diff["identical"]
    changed = {(c["node"], c["before"], c["after"]) for c in diff["status_changes"]}
    assert ("Sn.proof", "verified", "failed") in changed and ("G.top", "supported-under-trust", "defeated") in changed
    assert diff["trusted_base"] == {"added": [], "removed": []}  # T.gpu is still rested on


def test_audit_diff_reads_exported_json_and_rejects_junk(store, case_file, tmp_path):
    from assurance.render.loading import load_state

    evaluation = load_state(db=str(store), case_path=case_file).scopes[0].evaluation
    exported = tmp_path / "a.json"
    exported.write_text(json.dumps(evaluation.to_json()), encoding="utf-8")
    assert invoke("audit", "diff", exported, store, "--case", case_file).exit_code == 0
    doc = evaluation.to_json()
    next(n for n in doc["nodes"] if n["id"] == "Sn.plan")["status"] = "missing"
    next(n for n in doc["nodes"] if n["id"] == "T.gpu")["status"] = "verified"  # discharged: leaves the base
    (tmp_path / "b.json").write_text(json.dumps({"evaluations": [doc]}), encoding="utf-8")
    result = invoke("audit", "diff", exported, tmp_path / "b.json")
    assert result.exit_code == 1 and "Sn.plan\truntime-checked -> missing" in result.stdout
    assert "trusted-\t" in result.stdout and result.stdout.rstrip().endswith("T.gpu")
    (tmp_path / "junk.json").write_text('{"hello": 1}', encoding="utf-8")
    result = invoke("audit", "diff", exported, tmp_path / "junk.json")
    assert result.exit_code == 2 and "not an exported case snapshot" in result.stderr
    assert invoke("audit", "diff", exported, tmp_path / "absent.json").exit_code == 2
