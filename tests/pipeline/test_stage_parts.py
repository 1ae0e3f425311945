"""A stage's parts are stored as each finishes: a failure after the first part keeps that part."""

from pathlib import Path

from assurance.pipeline import run as pipeline
from assurance.pipeline.options import AssureOptions
from assurance.pipeline.stages import StageContext
from evidence_db.bundle import Deployment, EvidenceRecord, Producer
from evidence_db.migrate import ensure_store
from evidence_db.session import open_session
from evidence_db.store import load_evidence

D = Deployment(fields={"n": 1})
PRODUCER = Producer("bitcase assure", "0", "", "host", "cpu", "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z")


def _record(suite: str) -> EvidenceRecord:
    return EvidenceRecord(id=f"test:{suite}", category="test_result", obligation=f"suite.{suite}", status="pass",
                          summary=f"{suite} passed", producer=PRODUCER, deployment=D)


def _setup(tmp_path: Path) -> tuple[AssureOptions, StageContext]:
    options = AssureOptions(db_url=f"sqlite:///{tmp_path / 'store.db'}", home=tmp_path, out_dir=tmp_path / "out",
                            case_path=tmp_path / "case.toml")
    ensure_store(options.db_url)
    ctx = StageContext(model_dir=tmp_path, deployment=D, device="cpu", scale="ci", label="", command=("test",),
                       progress=lambda *a: None, db_url=options.db_url)
    return options, ctx


def _stored(options: AssureOptions) -> list[str]:
    with open_session(options.db_url) as session:
        return sorted(v.item_id for v in load_evidence(session=session))


def test_each_part_is_stored_and_a_later_failure_keeps_the_earlier_parts(tmp_path, monkeypatch):
    options, ctx = _setup(tmp_path)

    def parts(stage, ctx, wanted):
        yield "batch", [_record("batch")]
        yield "chunk", [_record("chunk")]
        raise RuntimeError("the GPU fell off")

    monkeypatch.setattr(pipeline, "run_stage", parts)
    outcome = pipeline._run_stage(options, "compare", ctx, ["suite.batch", "suite.chunk", "suite.prefix"],
                                  tmp_path / "bundles", "")
    assert outcome.action == "error"
    assert "the GPU fell off" in outcome.message and "2 part(s) finished before it are stored" in outcome.message
    assert (outcome.num_records, outcome.num_added) == (2, 2)
    assert _stored(options) == ["test:batch", "test:chunk"]
    assert sorted(p.name for p in (tmp_path / "bundles").iterdir()) == ["compare-batch.jsonl", "compare-chunk.jsonl"]


def test_a_single_part_stage_keeps_its_plain_bundle_name(tmp_path, monkeypatch):
    options, ctx = _setup(tmp_path)
    monkeypatch.setattr(pipeline, "run_stage", lambda stage, ctx, wanted: iter([("", [_record("x")])]))
    outcome = pipeline._run_stage(options, "verify", ctx, ["suite.x"], tmp_path / "bundles", "forced-1")
    assert outcome.action == "ran" and outcome.bundle.endswith("verify-forced-1.jsonl")
    assert _stored(options) == ["test:x"]


def test_evidence_only_under_another_d_makes_the_obligation_stale_not_missing(tmp_path):
    from assurance.pipeline.run import _obligation_statuses
    from assurance.scope import default_case_path
    from evidence_db.store import ingest_records

    options, _ = _setup(tmp_path)
    options = AssureOptions(db_url=options.db_url, home=tmp_path, out_dir=tmp_path / "out",
                            case_path=default_case_path(home=tmp_path))
    other = Deployment(fields={"n": 2})
    record = EvidenceRecord(id="test:prefix", category="test_result", obligation="suite.prefix", status="pass",
                            summary="passed elsewhere", producer=PRODUCER, deployment=other)
    with open_session(options.db_url, write=True) as session:
        ingest_records(session=session, records=[record])
    statuses, _, _ = _obligation_statuses(options, D)
    assert statuses["suite.prefix"] == "stale"
    assert statuses["suite.chunk"] == "missing"
