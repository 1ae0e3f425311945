"""JUnit XML reports as test_result evidence: obligations, deployments, statuses, hostile XML."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from evidence_db.canonical import sha256_digest
from evidence_db.errors import BundleError
from evidence_db.ingest import ingest_paths, load_deployment_file
from evidence_db.junit import junit_records
from evidence_db.store import load_evidence
from tests.evidence_db.factories import DEPLOYMENT

SUBJECT = sha256_digest(b"scheduler")
DEPLOYMENT_JSON = json.dumps({"fields": DEPLOYMENT.fields}).replace('"', "&quot;")
REPORT = f"""<?xml version="1.0" encoding="utf-8"?>
<testsuites>
  <testsuite name="pytest" tests="5" time="1.5" timestamp="2025-06-01T12:00:00.250000+02:00" hostname="ci-1">
    <properties><property name="bitcase.deployment" value="{DEPLOYMENT_JSON}"/></properties>
    <testcase classname="tests.engine.test_sched" name="test_fifo" time="0.01">
      <properties>
        <property name="obligation" value="G_sched_explicit"/>
        <property name="subject" value="code:engine/scheduler.py {SUBJECT}"/>
      </properties>
    </testcase>
    <testcase classname="tests.engine.test_sched" name="test_preempt[4]" time="0.02">
      <failure message="assert 1 == 2&#10;second line" type="AssertionError">traceback here</failure>
    </testcase>
    <testcase classname="tests.kernels.test_matmul" name="test_gpu" time="0"><skipped message="no GPU"/></testcase>
    <testcase classname="tests.kernels.test_matmul" name="test_boom" time="0.1"><error message="boom"/></testcase>
    <testcase classname="tests.kernels.test_matmul" name="test_boom" time="0.1"/>
  </testsuite>
</testsuites>
"""
MAPPING = [("tests.engine.*", "G_sched"), ("tests.kernels.*", "G_kernels"), ("*", "G_never")]


def write(tmp_path: Path, text: str | bytes, name: str = "report.xml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_each_testcase_becomes_a_test_result(tmp_path: Path) -> None:
    path = write(tmp_path, REPORT)
    records = [r for _, r in junit_records(path, obligation_map=MAPPING)]
    assert [(r["status"], r["obligation"]) for r in records] == [
        ("pass", "G_sched_explicit"), ("fail", "G_sched"), ("inconclusive", "G_kernels"), ("error", "G_kernels"),
        ("pass", "G_kernels")]
    assert {r["category"] for r in records} == {"test_result"}
    tag = sha256_digest(path.read_bytes())[7:23]
    assert records[1]["id"] == f"junit:{tag}:tests.engine.test_sched.test_preempt[4]"
    assert records[4]["id"].endswith("test_boom#2")
    assert records[1]["summary"] == "tests.engine.test_sched.test_preempt[4]: fail: assert 1 == 2"
    assert records[1]["details"]["junit"]["text"] == "traceback here"
    assert records[0]["subjects"] == [{"uri": "code:engine/scheduler.py", "sha256": SUBJECT}]
    assert records[0]["produced_at"] == "2025-06-01T10:00:00.250000Z"
    assert records[0]["producer"]["finished_at"] == "2025-06-01T10:00:01.750000Z"
    assert records[0]["deployment"]["digest"] == DEPLOYMENT.digest


def test_report_ingests_once(db_session: Session, tmp_path: Path) -> None:
    path = write(tmp_path, REPORT)
    [(_, first)] = ingest_paths(session=db_session, paths=[path], obligation_map=MAPPING)
    [(_, again)] = ingest_paths(session=db_session, paths=[path], obligation_map=MAPPING)
    assert (first.added, again.added, again.unchanged) == (5, 0, 5)
    assert {v.deployment_digest for v in load_evidence(session=db_session)} == {DEPLOYMENT.digest}


def test_deployment_option_and_missing_deployment(tmp_path: Path) -> None:
    bare = write(tmp_path, REPORT.replace(f'<property name="bitcase.deployment" value="{DEPLOYMENT_JSON}"/>', ""))
    with pytest.raises(BundleError, match="need the deployment configuration") as info:
        list(junit_records(bare, obligation_map=MAPPING))
    assert "--deployment FILE.json" in info.value.hint and "testsuite 'pytest'" in info.value.where
    deployment_file = write(tmp_path, json.dumps({"fields": {"gpu": "x"}}), "d.json")
    deployment = load_deployment_file(deployment_file)
    records = [r for _, r in junit_records(bare, obligation_map=MAPPING, deployment=deployment)]
    assert {r["deployment"]["fields"]["gpu"] for r in records} == {"x"}
    bad = write(tmp_path, json.dumps({"fields": {"gpu": "x"}, "digest": "sha256:" + "0" * 64}), "bad.json")
    with pytest.raises(BundleError, match="does not match the fields"):
        load_deployment_file(bad)
    with pytest.raises(BundleError, match="expected a deployment object"):
        load_deployment_file(write(tmp_path, '{"gpu": "x"}', "plain.json"))


def test_testcase_without_obligation_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="no obligation for this test case") as info:
        list(junit_records(write(tmp_path, REPORT), obligation_map=[("tests.engine.*", "G")]))
    assert "testcase 'tests.kernels.test_matmul.test_gpu'" in info.value.where
    assert "--obligation" in info.value.hint


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
<!ENTITY lol9 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">]>
<testsuite name="x"><testcase name="t" classname="&lol9;"/></testsuite>"""
XXE = """<?xml version="1.0"?>
<!DOCTYPE t [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><testsuite><testcase name="&xxe;"/></testsuite>"""


@pytest.mark.parametrize(("text", "message"), [
    (BILLION_LAUGHS, "refused XML"),
    (XXE, "refused XML"),
    ("<testsuite><testcase name='a'></testsuite>", "not well-formed XML: mismatched tag"),
    ("<html><body/></html>", "root element <html> is not <testsuites> or <testsuite>"),
    (b"<testsuite name='\xff'/>", "not well-formed XML: not well-formed \\(invalid token\\): line 1"),
])
def test_hostile_or_broken_xml(tmp_path: Path, text: str | bytes, message: str) -> None:
    started = time.monotonic()
    with pytest.raises(BundleError, match=message):
        list(junit_records(write(tmp_path, text), obligation_map=MAPPING))
    assert time.monotonic() - started < 5


def test_reports_written_by_pytest(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "def test_ok(record_property):\n"
        "    record_property('obligation', 'G_sample')\n"
        "def test_bad():\n"
        "    assert 1 == 2\n"
        "@pytest.mark.skip(reason='not here')\n"
        "def test_skipped():\n"
        "    pass\n")
    report = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    "test_sample.py"], cwd=tmp_path, capture_output=True, check=False, timeout=120)
    records = [r for _, r in junit_records(report, obligation_map=[("*", "G_default")],
                                           deployment={"fields": {}, "digest": sha256_digest(b"{}")})]
    assert [(r["details"]["junit"]["name"], r["status"], r["obligation"]) for r in records] == [
        ("test_ok", "pass", "G_sample"), ("test_bad", "fail", "G_default"),
        ("test_skipped", "inconclusive", "G_default")]


@pytest.mark.parametrize("timestamp", ["9999-12-31T23:59:59", "0001-01-01T00:00:00+05:00", "not a time"])
def test_extreme_or_bad_timestamps_fall_back(tmp_path: Path, timestamp: str) -> None:
    path = write(tmp_path, REPORT.replace("2025-06-01T12:00:00.250000+02:00", timestamp).replace('time="1.5"',
                                                                                                 'time="1e300"'))
    records = [r for _, r in junit_records(path, obligation_map=MAPPING)]
    assert all(r["produced_at"].endswith("Z") for r in records)
