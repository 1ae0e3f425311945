"""Kernel proofs carry over to a new D only when the kernel, contract, configuration and versions are unchanged."""

from dataclasses import dataclass, field

from assurance.pipeline.reuse import carry_proofs
from assurance.subjects import project_root
from evidence_db.bundle import Deployment, Producer
from evidence_db.canonical import file_digest
from evidence_db.views import EvidenceView, SubjectView
from proofs import VERIFIER_VERSION
from proofs.producer import package_version

OLD_D, NEW_D = Deployment(fields={"n": 1}), Deployment(fields={"n": 2})
PRODUCER = Producer("bitcase assure", "0", "", "host", "cpu", "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z")
SOURCE = "kernels/silu_mul.py"


@dataclass(frozen=True)
class Target:
    key: str
    source_digest: str
    kernel: str = "silu_mul"
    constexprs: dict = field(default_factory=dict)


def proof(*, source_digest: str, status: str = "pass", verdict: str = "VERIFIED", deployment=OLD_D,
          triton: str | None = None, key: str = "silu_mul.i128") -> EvidenceView:
    details = {"key": key, "verdict": verdict, "source_digest": source_digest,
               "triton_version": triton or package_version("triton"), "verifier_version": VERIFIER_VERSION}
    return EvidenceView(item_id=f"kernel_proof:{key}:t", category="kernel_proof", obligation=f"kernel.{key}.contract",
                        status=status, summary="proved", deployment_digest=deployment.digest,
                        produced_at="2026-01-01T00:00:00Z", content_digest="sha256:x", producer_tool="bitcase verify",
                        producer_version="0", subjects=(SubjectView(f"code:{SOURCE}", source_digest),),
                        details=details)


def carry(views, targets):
    return carry_proofs(evidence=views, targets=targets, deployment=NEW_D, producer=PRODUCER)


def test_an_unchanged_proof_is_carried_and_names_its_origin():
    digest = file_digest(project_root() / SOURCE)
    carried, remaining = carry([proof(source_digest=digest)], [Target("silu_mul.i128", digest)])
    assert remaining == []
    (record,) = carried
    assert record.deployment.digest == NEW_D.digest and record.status == "pass"
    assert record.details["carried_from"] == {"record": "kernel_proof:silu_mul.i128:t", "deployment": OLD_D.digest}


def test_anything_changed_means_verify_again():
    digest = file_digest(project_root() / SOURCE)
    target = Target("silu_mul.i128", digest)
    for old in (proof(source_digest="sha256:" + "0" * 64),  # the kernel was edited since
                proof(source_digest=digest, status="fail", verdict="REFUTED"),
                proof(source_digest=digest, triton="0.0.1"),
                proof(source_digest=digest, key="silu_mul.i256")):
        carried, remaining = carry([old], [target])
        assert carried == [] and remaining == ["silu_mul.i128"], old.details


def test_a_proof_under_the_same_d_is_not_carried():
    digest = file_digest(project_root() / SOURCE)
    carried, remaining = carry([proof(source_digest=digest, deployment=NEW_D)], [Target("silu_mul.i128", digest)])
    assert carried == [] and remaining == ["silu_mul.i128"]
