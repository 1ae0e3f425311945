"""The comparison protocol's fixed vocabulary: suites, obligation ids, seed and the counts each suite owes.

Torch-free, so the CLI, the sharding logic and the assurance case can read it without loading a model.
The decomposition of every count is documented in ``docs/comparison-protocol.md``.
"""

from __future__ import annotations

__all__ = [
    "PROTOCOL_VERSION",
    "PROTOCOL_SEED",
    "SUITES",
    "DETERMINISM_SUITES",
    "OBLIGATIONS",
    "EXPECTED_COMPARISONS",
    "RUNTIME_OBLIGATIONS",
    "FINITENESS_OBLIGATION",
    "FIDELITY_OBLIGATION",
    "suite_names",
]

# Bumped whenever a change to prompts, groups, units or acceptance rules changes what a record means;
# it is part of every record's id, so evidence from two protocol versions can never be merged.
PROTOCOL_VERSION = 1
PROTOCOL_SEED = 0x5EED2026

# Suite name (CLI spelling) -> obligation id (assurance/cases/determinism.toml).
OBLIGATIONS: dict[str, str] = {
    "batch": "suite.batch",
    "chunk": "suite.chunk",
    "prefill-decode": "suite.prefill_decode",
    "prefix": "suite.prefix",
    "schedule": "suite.schedule",
    "negative-control": "suite.negative_control",
    "fidelity": "fidelity.reference",
}
SUITES = tuple(OBLIGATIONS)
# The suites whose comparisons are bitwise determinism evidence (fidelity and the control are not).
DETERMINISM_SUITES = ("batch", "chunk", "prefill-decode", "prefix", "schedule")

# Comparisons per model and deployment configuration, identical at every scale.
EXPECTED_COMPARISONS: dict[str, int] = {
    "batch": 296,  # 32 prompts x 3 group sizes x 3 orders + 4 spots x 2 fresh-process checks
    "chunk": 90,  # 18 prompts x 5 chunk budgets
    "prefill-decode": 384,  # 3 prompts x 128 generated positions
    "prefix": 14,  # 10 partial donors + 2 full-prompt hits + 1 shared prefix + 1 generated prefix
    "schedule": 48,  # 6 scenarios x 8 prompts
    "negative-control": 196,  # one unit of each determinism suite re-run perturbed: 32 + 18 + 128 + 10 + 8
    "fidelity": 6,  # 6 prompts, each a full prefill row set against the reference
}

RUNTIME_OBLIGATIONS = ("runtime.plan", "runtime.no_autotune", "runtime.deployment")
# Discharged by the runtime stage under a D with the run-time finiteness check on (kernels/finiteness.py).
FINITENESS_OBLIGATION = "trusted.attention-finiteness"
FIDELITY_OBLIGATION = "fidelity.reference"


def suite_names(selection: str) -> tuple[str, ...]:
    """Expand a ``--suite`` value (``all`` or a suite name) into suite names, in protocol order.

    ``all`` is every suite including the negative control and fidelity.

    >>> suite_names("chunk")
    ('chunk',)
    >>> len(suite_names("all")) == len(SUITES)
    True
    """
    if selection == "all":
        return SUITES
    if selection not in OBLIGATIONS:
        raise ValueError(f"unknown suite {selection!r}; choose one of: all, {', '.join(SUITES)}")
    return (selection,)
