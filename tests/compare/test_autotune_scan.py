"""The no-autotune scan finds every spelling of a run-time configuration chooser, and only those."""

import textwrap
from pathlib import Path

from engine.compare.autotune_scan import scan_sources
from engine.compare.identity import REPO_ROOT


def _tree(tmp_path: Path, source: str) -> Path:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "engine").mkdir()
    (tmp_path / "kernels" / "k.py").write_text(textwrap.dedent(source))
    return tmp_path


def test_project_sources_are_clean():
    findings, num_files = scan_sources(REPO_ROOT)
    assert findings == [] and num_files > 10


def test_every_spelling_is_found(tmp_path):
    root = _tree(tmp_path, """
        import triton
        import triton as tr
        from triton import autotune, heuristics as h
        from triton.runtime.autotuner import Autotuner
        import triton.runtime.autotuner

        @triton.autotune(configs=[triton.Config({"B": 16})], key=["n"])
        @triton.jit
        def k(x, n): pass

        wrapped = tr.heuristics({"B": lambda a: 16})(k)
        """)
    findings, _ = scan_sources(root)
    found = {(f.line, f.what) for f in findings}
    assert (4, "from triton import autotune") in found
    assert (4, "from triton import heuristics") in found
    assert (5, "from triton.runtime.autotuner import Autotuner") in found
    assert (6, "import triton.runtime.autotuner") in found
    assert (8, "triton.autotune") in found and (8, "triton.Config") in found
    assert (12, "tr.heuristics") in found


def test_unrelated_names_and_text_are_not_findings(tmp_path):
    root = _tree(tmp_path, '''
        """We never use triton.autotune here."""
        import triton
        config = {"autotune": False}
        def autotune(): return "not triton"
        autotune()
        ''')
    assert scan_sources(root)[0] == []
