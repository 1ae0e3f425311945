"""What each derived status, review state and evidence category means, for the legend.

The wording keeps the categories apart: only a kernel proof is a proof; a runtime check and
a test are evidence of a different, weaker kind, and trusted items are not checked at all.
"""

from __future__ import annotations

__all__ = ["STATUS_TEXT", "REVIEW_TEXT", "CATEGORY_TEXT", "VERDICT_TEXT", "STATUS_ORDER", "REGION_TEXT",
           "EDGE_TEXT"]

STATUS_TEXT = {
    "verified": "Discharged by a kernel proof (relational proof checked with Z3).",
    "runtime-checked": "Checked by the engine at run time; a check, not a proof.",
    "tested": "Backed by passing comparison runs or tests; a test, not a proof.",
    "trusted-reviewed": "Taken on trust; an accepting audit review pins its current digest.",
    "trusted-unreviewed": "Taken on trust without a valid accepting review.",
    "stale": "Evidence predates a change to something it covers.",
    "failed": "Failing evidence or a counterexample.",
    "missing": "No evidence of an allowed category.",
    "supported": "Every supporting branch rests on verified, checked or tested evidence.",
    "supported-under-trust": "Supported, but resting on trusted items (see the trusted base).",
    "defeated": "A supporting branch failed or a counterexample holds.",
    "incomplete": "Some supporting branch is missing or stale.",
    "not-applicable": "Its condition excludes it under this deployment configuration.",
    "distrusted": "Treated as unsupported in a what-if analysis.",
}

# The order statuses are counted and listed in: strongest first, problems last.
STATUS_ORDER = tuple(STATUS_TEXT)

VERDICT_TEXT = {
    "supported": "Supported",
    "supported-under-trust": "Supported under trust",
    "defeated": "Defeated",
    "incomplete": "Not supported (incomplete)",
}

REVIEW_TEXT = {
    "accepted": "An unexpired accepting review pins the current digest.",
    "unreviewed": "Never reviewed.",
    "needs-work": "The latest review asks for changes.",
    "rejected": "The latest review rejects it.",
    "stale": "Reviewed, but the item changed since (digest differs).",
    "expired": "The accepting review has expired.",
}

CATEGORY_TEXT = {
    "kernel_proof": "Kernel proof",
    "runtime_config_check": "Runtime check",
    "test_result": "Test result",
    "trusted_contract_translation": "Trusted item",
}

# The trust-boundary diagram's regions: a component sits in the weakest region of the case nodes
# about it, so one unproved node is enough to move it out of "verified".
REGION_TEXT = {
    "verified": "Every case node about it is verified by a kernel proof.",
    "runtime-checked": "Its weakest case node is checked at run time: a check, not a proof.",
    "tested": "Its weakest case node is tested: a test, not a proof.",
    "trusted": "It rests on at least one item taken on trust: not checked at all.",
    "unsupported": "No case node about it is supported: each is failed, stale or missing.",
    "outside": "No case node is about it: outside the case, so implicitly trusted.",
}

EDGE_TEXT = {
    "solid": "A contract between two components, assured by verified, runtime-checked or tested evidence.",
    "dashed": "A contract taken on trust, or with no case node (outside the case); a dashed region is not checked.",
    "red": "A red edge or border: a case node about it is failed, stale or missing.",
}
