"""The diagram and the report of a user's own case: components from the case, or derived from its graph."""

from __future__ import annotations

import re
from pathlib import Path

from tests.ownproject.conftest import MAPPING, invoke
from tests.render.conftest import needs_dot

STORE = ["--db", "bitcase.db", "--case", "case.toml"]

# The ledger's own components: postings, money, and Python's decimal module that money relies on.
DECLARED = '''
[[component]]
id = "ledger"
label = "Ledger postings"

[[component]]
id = "money"
label = "Money and rounding"

[[component]]
id = "py-decimal"
label = "Python decimal module"

[[contract]]
id = "posting.amounts"
from = "ledger"
to = "money"
label = "amounts are Money values"

[[contract]]
id = "rounding"
from = "money"
to = "py-decimal"
label = "decimal rounds half to even as documented"
'''


def _ingest() -> None:
    result = invoke("ingest", "reports/xunit1.xml", *STORE, "--deployment", "deployment.json", *MAPPING,
                    "--skip-unmapped")  # the parsing test is no obligation of this case
    assert result.exit_code == 0, result.stderr


def _clusters(dot_text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"subgraph (cluster_\w+) \{(.*?)\n\}", dot_text, re.S)}


def _declare(project: Path) -> None:
    text = (project / "case.toml").read_text(encoding="utf-8")
    for node, component in (("ledger.balances", "ledger"), ("ledger.rounding", "money"),
                            ("trusted.decimal", "rounding")):
        text = text.replace(f'id = "{node}"\n', f'id = "{node}"\ncomponent = "{component}"\n')
    (project / "case.toml").write_text(text + DECLARED, encoding="utf-8")


def test_a_case_without_components_gets_a_diagram_derived_from_its_argument(project: Path) -> None:
    _ingest()
    result = invoke("diagram", "--out", "trust.dot", *STORE)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "trust.dot"
    dot_text = Path("trust.dot").read_text(encoding="utf-8")
    assert "Inference engine" not in dot_text and "Triton" not in dot_text
    clusters = _clusters(dot_text)
    assert re.search(r"^tinyledger \[label=\"tinyledger\\n2 tested\"", clusters["cluster_tested"], re.M)
    assert re.search(r"^trusted_decimal \[", clusters["cluster_trusted"], re.M)
    assert re.search(r"^tinyledger -> trusted_decimal \[.*style=dashed", dot_text, re.M)
    assert "declares no [[component]] tables" in clusters["cluster_legend"]
    again = invoke("diagram", "--out", "again.dot", *STORE)
    assert again.exit_code == 0 and Path("again.dot").read_bytes() == Path("trust.dot").read_bytes()


def test_declared_components_and_contracts_are_drawn(project: Path) -> None:
    _declare(project)
    _ingest()
    result = invoke("diagram", "--out", "trust.dot", *STORE)
    assert result.exit_code == 0, result.stderr
    dot_text = Path("trust.dot").read_text(encoding="utf-8")
    clusters = _clusters(dot_text)
    assert re.search(r'^ledger \[label="Ledger postings\\n1 tested"', clusters["cluster_tested"], re.M)
    assert re.search(r'^money \[label="Money and rounding\\n1 tested"', clusters["cluster_tested"], re.M)
    assert re.search(r'^py_decimal \[label="Python decimal module\\n\(no case node\)"', clusters["cluster_outside"],
                     re.M)
    rounding = re.search(r"^money -> py_decimal \[(.*)\];$", dot_text, re.M).group(1)
    assert "1 trusted-unreviewed" in rounding and "style=dashed" in rounding
    assert re.search(r'^ledger -> money \[label="amounts are Money values\\n\(no case node\)"', dot_text, re.M)
    assert "declares no [[component]]" not in dot_text and "tinyledger [" not in dot_text
    focused = invoke("diagram", "--out", "focus.dot", "--focus", "ledger.rounding", *STORE)
    assert focused.exit_code == 0, focused.stderr
    assert "money [" in Path("focus.dot").read_text(encoding="utf-8")
    assert "ledger [" not in Path("focus.dot").read_text(encoding="utf-8")


@needs_dot
def test_report_of_a_case_without_kernels_has_no_kernel_tables(project: Path) -> None:
    _ingest()
    result = invoke("report", "--out", "out", *STORE)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == str(Path("out") / "report.html")
    html = Path("out/report.html").read_text(encoding="utf-8")
    for present in ("Comparison suites", "Trusted base", "trusted.decimal", "What the diagram shows",
                    "solid edge", "dashed edge", "Outside the case", "declares no <code>[[component]]</code>"):
        assert present in html, present
    for absent in ("Kernel proofs", "No kernel proofs", "Runtime checks", "No runtime checks", "Needs attention",
                   "Inference engine"):
        assert absent not in html, absent
    svg = html.split('<figure class="svg">', 1)[1].split("</figure>", 1)[0]
    assert "tinyledger" in svg and "Legend" in svg


def _validate() -> tuple[int, str]:
    result = invoke("case", "validate", "case.toml")
    return result.exit_code, result.stderr + result.stdout


def test_bad_component_tables_exit_2_naming_file_line_and_fix(project: Path) -> None:
    case = project / "case.toml"
    original = case.read_text(encoding="utf-8")
    base_lines = original.count("\n")

    case.write_text(original.replace('id = "ledger.rounding"\n', 'id = "ledger.rounding"\ncomponent = "mony"\n')
                    + DECLARED, encoding="utf-8")
    code, out = _validate()
    assert code == 2
    line = original.splitlines().index('id = "ledger.rounding"')  # its [[node]] line, 1-based
    assert f"case.toml:{line}: node ledger.rounding: component 'mony' is not declared [unknown-component]" in out
    assert "did you mean 'money'?" in out
    diagram = invoke("diagram", "--out", "trust.dot", *STORE)
    assert diagram.exit_code == 2 and "component 'mony' is not declared" in diagram.stderr
    assert not Path("trust.dot").exists()

    case.write_text(original + DECLARED + '\n[[component]]\nid = "money"\nlabel = "Again"\n'
                    '\n[[contract]]\nid = "audit"\nfrom = "ledger"\nto = "auditor"\nlabel = "x"\n', encoding="utf-8")
    code, out = _validate()
    assert code == 2
    first = base_lines + DECLARED.splitlines().index('id = "money"')
    assert re.search(rf"case\.toml:\d+: \[\[component\]\] money: id 'money' is already declared \(first at line "
                     rf"{first}\) \[duplicate-component\]", out)
    assert "'to' names 'auditor', which no [[component]] table declares [unknown-component]" in out
    assert "declare 'auditor' in a [[component]] table" in out

    case.write_text(original.replace('id = "C.python"\n', 'id = "C.python"\ncomponent = "ledger"\n'), encoding="utf-8")
    code, out = _validate()
    assert code == 2
    assert "node C.python: 'component' applies to goals, strategies and solutions, not to a context" in out
    assert "component 'ledger' is not declared" not in out

    case.write_text(original.replace('id = "ledger.rounding"\n', 'id = "ledger.rounding"\ncomponent = "money"\n'),
                    encoding="utf-8")
    code, out = _validate()
    assert code == 2 and 'declare it: [[component]] id = "money"' in out

    case.write_text(original + '\n[[component]]\nid = "a:b"\n', encoding="utf-8")
    code, out = _validate()
    assert code == 2 and "[dot-unsafe-id]" in out and "has no 'label'" in out
