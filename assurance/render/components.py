"""The system's components and the contracts between them, and which case node is about which.

The trust-boundary diagram draws components (engine, kernels, verifier, Triton compiler,
GPU, driver, evidence store) inside regions by how they are assured, and the contracts that
cross each boundary as edges. A case node is attached to a component or a contract by its
explicit ``component`` field (a component or contract key) when the case sets one, else by
the first keyword rule below that its id or text matches; kernel proofs are about the kernels,
other solutions about the engine, and goals and strategies are attached to nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from assurance.render.model import NodeModel

__all__ = ["Component", "Contract", "COMPONENTS", "CONTRACTS", "REGIONS", "attachments", "region_of"]


@dataclass(frozen=True, slots=True)
class Component:
    key: str  # a DOT-safe identifier
    label: str


@dataclass(frozen=True, slots=True)
class Contract:
    key: str
    source: str  # component key
    target: str  # component key
    label: str


COMPONENTS = (
    Component("engine", "Inference engine"),
    Component("kernels", "Triton kernels (sealed plan)"),
    Component("verifier", "Kernel verifier"),
    Component("triton", "Triton compiler"),
    Component("driver", "Driver and CUDA runtime"),
    Component("gpu", "GPU"),
    Component("store", "Evidence store"),
)

CONTRACTS = (
    Contract("contract_translation", "engine", "kernels", "kernel contract as the engine uses it"),
    Contract("tensor_representation", "engine", "kernels", "tensor representation correspondence"),
    Contract("interface_mapping", "engine", "kernels", "interface mapping"),
    Contract("sealed_plan", "engine", "kernels", "launches only in the sealed plan, no autotuning"),
    Contract("attention_finiteness", "engine", "kernels", "attention finiteness premises"),
    Contract("kernel_proof", "verifier", "kernels", "selected-region invariance proofs"),
    Contract("compilation", "kernels", "triton", "the code that runs (compiled or interpreted) keeps the source semantics"),
    Contract("launch", "triton", "driver", "driver loads and launches the compiled code"),
    Contract("execution", "driver", "gpu", "GPU executes the code as compiled"),
    Contract("graph_replay", "engine", "driver", "padded CUDA-graph replay fidelity"),
    Contract("evidence_bundle", "engine", "store", "evidence bundles (schema v2)"),
    Contract("proof_evidence", "verifier", "store", "kernel proof evidence"),
)

# Regions from strongest to weakest assurance, then the two without support.
REGIONS = {
    "verified": "Verified (kernel proofs)",
    "runtime-checked": "Checked at run time",
    "tested": "Tested",
    "trusted": "Trusted",
    "unsupported": "Unsupported (failed, stale or missing)",
    "outside": "Outside the case (implicitly trusted)",
}

# (needles, key, applies to trusted items only): GPU, compiler and driver are only ever
# trusted here, while a solution's text may merely mention them ("a comparison run on the GPU").
_RULES: tuple[tuple[tuple[str, ...], str, bool], ...] = (
    (("contract translation", "contract-translation", "contract_translation"), "contract_translation",
     False),
    (("tensor representation", "tensor-representation", "representation correspondence"),
     "tensor_representation", False),
    (("interface mapping", "interface-mapping", "interface_mapping"), "interface_mapping", False),
    (("finiteness", "finite"), "attention_finiteness", False),
    (("cuda graph", "cuda-graph", "cudagraph", "graph replay"), "graph_replay", False),
    (("sealed plan", "sealed-plan", "autotun", "launch configuration"), "sealed_plan", False),
    (("cpu path", "interpreter"), "compilation", True),
    (("triton compiler", "compiler", "triton primitive"), "triton", True),
    (("driver", "cuda runtime"), "driver", True),
    (("gpu execution", "gpu"), "gpu", True),
    (("translator", "solver encoding", "verifier", "z3"), "verifier", True),
    (("evidence store", "hash chain", "evidence bundle"), "store", False),
    (("kernel proof", "selected-region", "selected region"), "kernels", False),
)

_KEYS = {c.key for c in COMPONENTS} | {c.key for c in CONTRACTS}


def attachments(node: NodeModel) -> tuple[str, ...]:
    """The component and contract keys ``node`` is about; none for goals, strategies and context.

    A kernel proof is about a kernel and is the verifier's contract with it, so it counts for both.
    """
    if node.component:
        return (node.component,) if node.component in _KEYS else ()
    if node.kind != "solution" and not node.is_trusted:
        return ()
    if "kernel_proof" in node.categories:
        return ("kernels", "kernel_proof")
    haystack = f"{node.node_id} {node.text}".lower()
    for needles, key, trusted_only in _RULES:
        if (node.is_trusted or not trusted_only) and any(n in haystack for n in needles):
            return (key,)
    return ("engine",)


_STATUS_REGION = {"verified": "verified", "runtime-checked": "runtime-checked", "tested": "tested",
                  "trusted-reviewed": "trusted", "trusted-unreviewed": "trusted"}
_REGION_RANK = ("verified", "runtime-checked", "tested", "trusted")


def region_of(statuses: list[str]) -> str:
    """The region of a component whose attached nodes have ``statuses``: the weakest support."""
    if not statuses:
        return "outside"
    regions = [_STATUS_REGION[s] for s in statuses if s in _STATUS_REGION]
    if not regions:
        return "unsupported"
    return max(regions, key=_REGION_RANK.index)
