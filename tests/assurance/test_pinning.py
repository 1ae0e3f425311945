"""Which D the gate judges: --config, the case's pin, the project file's, `current` for the bundled case."""

from pathlib import Path

import pytest

from assurance.cli._common import BitcaseError
from assurance.pinning import Pin, case_pin, gate_pin, project_pin, write_project_pin
from assurance.scope import BUNDLED_CASE

HEADER = '[case]\nid = "c"\ntop = "G"\n'
NODE = '\n[[node]]\nid = "G"\nkind = "goal"\ntext = "g"\n'


def case(tmp_path: Path, header_extra: str = "", tail: str = NODE) -> Path:
    path = tmp_path / "case.toml"
    path.write_text(HEADER + header_extra + tail)
    return path


def test_config_wins_over_every_pin(tmp_path):
    path = case(tmp_path, 'deployment = "abcd"\n')
    write_project_pin(tmp_path / "home", "latest")
    assert gate_pin("ef01", case_path=path, home=tmp_path / "home", bundled_case=BUNDLED_CASE) == Pin("ef01", "--config")


def test_the_case_pin_wins_over_the_project_file(tmp_path):
    path = case(tmp_path, 'deployment = "abcd"\n')
    write_project_pin(tmp_path / "home", "latest")
    pin = gate_pin(None, case_path=path, home=tmp_path / "home", bundled_case=BUNDLED_CASE)
    assert pin.spec == "abcd" and "pinned by the case" in pin.why


def test_the_project_file_pins_an_unpinned_case(tmp_path):
    path = case(tmp_path)
    written = write_project_pin(tmp_path / "home", "current")
    assert 'deployment = "current"' in written.read_text()
    write_project_pin(tmp_path / "home", "latest")  # an existing file is kept
    pin = gate_pin(None, case_path=path, home=tmp_path / "home", bundled_case=BUNDLED_CASE)
    assert pin == Pin("current", f"pinned by the project file {written}")


def test_the_bundled_case_judges_current_and_any_other_unpinned_case_is_refused(tmp_path):
    pin = gate_pin(None, case_path=BUNDLED_CASE, home=tmp_path / "home", bundled_case=BUNDLED_CASE)
    assert pin.spec == "current" and "bundled case" in pin.why
    with pytest.raises(BitcaseError, match="no deployment configuration D is pinned") as info:
        gate_pin(None, case_path=case(tmp_path), home=tmp_path / "home", bundled_case=BUNDLED_CASE)
    assert "--config" in info.value.hint and "project.toml" in info.value.hint


def test_a_case_header_after_its_nodes_is_still_read(tmp_path):
    path = tmp_path / "late.toml"
    path.write_text(NODE.lstrip() + "\n" + HEADER.replace("[case]\n", "") + 'deployment = "abcd"\n')
    assert case_pin(path) is None  # keys after [[node]] belong to that node: no [case] table at all
    path.write_text(HEADER + 'deployment = "abcd"\n' + NODE)
    assert case_pin(path).spec == "abcd"


@pytest.mark.parametrize("value", ['""', "3", "[]"])
def test_a_bad_pin_is_a_clear_error(tmp_path, value):
    with pytest.raises(BitcaseError, match="must be a non-empty string"):
        case_pin(case(tmp_path, f"deployment = {value}\n"))
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / "project.toml").write_text(f"deployment = {value}\n")
    with pytest.raises(BitcaseError, match="project.toml"):
        project_pin(tmp_path / "home")


def test_an_unreadable_project_file_names_itself(tmp_path):
    (tmp_path / "project.toml").write_text("deployment = \n")
    with pytest.raises(BitcaseError, match="cannot read the project file"):
        project_pin(tmp_path)
