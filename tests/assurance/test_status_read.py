"""`bitcase status` reads only what the rules use; its evaluation equals one over the whole store."""

import os
import secrets

import pytest
from sqlalchemy import make_url

from assurance.scope import assess, choose_deployment, evaluate_under
from evidence_db.bundle import Deployment, EvidenceRecord, Producer
from evidence_db.engine import create_store_engine
from evidence_db.migrate import ensure_store
from evidence_db.reviews import list_reviews
from evidence_db.session import open_session
from evidence_db.store import count_elsewhere, ingest_records, list_deployments, load_evidence

PRODUCER = Producer("bitcase test", "1", "pytest", "host", "cpu", "2026-10-31T00:00:00Z", "2026-10-31T00:00:01Z")
CPU = Deployment({"device": "cpu"})
GPU = Deployment({"device": "cuda:0"})
CASE = """
[case]
id = "read"
title = "What a status read must keep"
top = "G.top"

[[node]]
id = "G.top"
kind = "goal"
text = "Top"
supported_by = ["kernel.mm.contract", "suite.batch", "suite.chunk", "suite.prefix", "suite.schedule"]
""" + "".join(f"""
[[node]]
id = "{node}"
kind = "solution"
text = "{node}"
any_of = ["kernel_proof", "test_result"]
""" for node in ("kernel.mm.contract", "suite.batch", "suite.chunk", "suite.prefix", "suite.schedule"))


def record(item, obligation, status="pass", *, deployment=CPU, details=None, category="test_result"):
    return EvidenceRecord(id=item, category=category, obligation=obligation, status=status, summary=f"{item} {status}",
                          producer=PRODUCER, deployment=deployment, details=details or {})


def unit(run, name, units=("u1", "u2")):
    return record(f"{run}.{name}", "suite.batch", details={"run_key": run, "unit": name, "suite_units": list(units)})


RECORDS = [
    # R2: a logical key lets the newer passing proof retire the older failing one
    record("proof-1", "kernel.mm.contract", "fail", category="kernel_proof", details={"logical_key": "mm", "m": 3}),
    record("proof-2", "kernel.mm.contract", category="kernel_proof", details={"logical_key": "mm"}),
    # R12: run r1 lacks u2 (does not count), run r2 is complete
    unit("r1", "u1"), unit("r2", "u1"), unit("r2", "u2"),
    # R7: evidence only under another configuration, a pass and a failure that must not defeat
    record("chunk-gpu", "suite.chunk", deployment=GPU), record("chunk-gpu-fail", "suite.chunk", "fail", deployment=GPU),
    # R3: a defeater shows its counterexample
    record("prefix-ok", "suite.prefix", details={"n": 1}),
    record("prefix-bad", "suite.prefix", "error", details={"first_mismatch": 17, "max_abs_diff": 0.5}),
    # passing items whose details no rule reads
    record("schedule-1", "suite.schedule", details={"comparisons": 12}),
    record("gpu-only-obligation", "suite.unclaimed", deployment=GPU),
    record("cpu-unclaimed", "suite.unclaimed"),
]


@pytest.fixture(scope="module")
def postgres_url():
    """A scratch PostgreSQL database (as the store tests make theirs), or a skip without a server."""
    base = os.environ.get("BITCASE_TEST_POSTGRES_URL")
    if not base:
        if os.environ.get("BITCASE_REQUIRE_POSTGRES") == "1":
            pytest.fail("BITCASE_REQUIRE_POSTGRES=1 but BITCASE_TEST_POSTGRES_URL is not set")
        pytest.skip("the PostgreSQL case needs BITCASE_TEST_POSTGRES_URL")
    name = f"bitcase_read_{secrets.token_hex(4)}"
    admin = create_store_engine(base).execution_options(isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path_factory):
    """(store URL, case path) holding RECORDS and a newer item under GPU, on each backend."""
    tmp = tmp_path_factory.mktemp("read")
    url = f"sqlite:///{tmp / 'bitcase.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    ensure_store(url)
    with open_session(url, write=True) as session:
        ingest_records(session=session, records=RECORDS + [record("latest-gpu", "suite.schedule", deployment=GPU)])
    case = tmp / "case.toml"
    case.write_text(CASE)
    return url, case


@pytest.mark.parametrize("config", [CPU.digest, GPU.digest, "sha256:" + "f" * 64])
def test_status_read_equals_the_whole_store_read(store, config):
    url, case = store
    lean = assess(db=url, case_path=case, home=case.parent / "home", config=config).evaluation
    with open_session(url) as session:
        choice = choose_deployment(config, list_deployments(session=session))
        everything, reviews = load_evidence(session=session), list_reviews(session=session)
    whole, _ = evaluate_under(case, choice, evidence=everything, reviews=reviews)
    assert lean.to_json() == whole.to_json()
    assert lean.num_evidence == len(RECORDS) + 1


def test_what_the_status_read_keeps(store):
    url, case = store
    evaluation = assess(db=url, case_path=case, home=case.parent / "home", config=CPU.digest).evaluation
    statuses = {n: r.status for n, r in evaluation.nodes.items()}
    assert statuses == {"G.top": "defeated", "kernel.mm.contract": "verified", "suite.batch": "tested",
                        "suite.chunk": "stale", "suite.prefix": "failed", "suite.schedule": "tested"}
    assert evaluation.node("suite.batch").evidence_ids == ("r2.u1", "r2.u2")
    assert [(c.evidence_id, c.details) for c in evaluation.node("suite.prefix").counterexamples] == [
        ("prefix-bad", {"first_mismatch": 17, "max_abs_diff": 0.5})]
    assert "2 item(s) exist only under other deployment configurations" in evaluation.node("suite.chunk").reasons
    assert evaluation.unclaimed_obligations == {"suite.unclaimed": 1}


def test_the_verified_read_gives_the_plain_reads_views(store):
    from evidence_db.verified_read import read_verified

    url, _ = store
    with open_session(url) as session:
        verified = read_verified(session=session)
        assert verified.chain.is_intact and verified.chain.num_rows == len(RECORDS) + 1
        assert verified.evidence == load_evidence(session=session)
        assert verified.reviews == list_reviews(session=session)
        lean = read_verified(session=session, deployment_digest=CPU.digest, with_details=False)
        assert lean.evidence == [v for v in load_evidence(session=session, with_details=False)
                                 if v.deployment_digest == CPU.digest]
        assert lean.elsewhere == count_elsewhere(session=session, deployment_digest=CPU.digest)
