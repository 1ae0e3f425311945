"""What `bitcase assure`'s producers import is installed by the README's first command (`pip install -e .`).

The properties producer runs the engine's property tests under pytest in a subprocess; in the
test environment pytest is always there, so only this check notices when a plain install lacks it.
"""

import ast
import re
import sys
import tomllib

from assurance.pipeline.stages import PROPERTY_TESTS
from assurance.subjects import project_root


def _distribution(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def test_every_third_party_module_the_property_tests_import_is_a_runtime_dependency():
    root = project_root()
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    runtime = {_distribution(r) for r in pyproject["project"]["dependencies"]}
    own = {"assurance", "engine", "kernels", "proofs", "evidence_db", "tests"}
    imported = {"pytest"}  # the runner itself
    for files in PROPERTY_TESTS.values():
        for name in files:
            for node in ast.walk(ast.parse((root / name).read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    imported.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    imported.add(node.module.split(".")[0])
    third_party = {m for m in imported - own if m not in sys.stdlib_module_names and m != "__future__"}
    assert third_party <= runtime, f"missing from [project].dependencies: {sorted(third_party - runtime)}"
