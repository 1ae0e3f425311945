"""Every ``--help`` names values in human words (FILE, DIR, URL, N, [a|b]), never Python types."""

from __future__ import annotations

import re

import pytest
import typer
from typer._click import Context
from typer.testing import CliRunner

from assurance.cli.docgen import iter_commands
from assurance.cli.main import app

# What Typer or click print when a parameter has no metavar: <str>, <list[Path]>, <int range>,
# {paths}, LIST[PATH], TEXT, INTEGER, BOOLEAN.
PYTHON_TYPE = re.compile(r"<(?:str|int|float|bool|path|file|dir|list\[[^>]*\]|[a-z]+ range|Path)>"
                         r"|\{[a-z_]+\}|\bLIST\[|\b(?:TEXT|INTEGER|BOOLEAN|FLOAT)\b")
# A metavar: upper-case words joined by = : . , / _ - (FILE, GLOB=ID, FILE.py::KERNEL, I/N, ID[,ID...]).
HUMAN = re.compile(r"^[A-Z][A-Za-z0-9_]*(?:(?:[=:./,_|-]+|\[,)[A-Za-z0-9_.\]]+)*$|^YYYY-MM-DD$")
CHOICE = re.compile(r"^\[[a-z0-9._-]+(?:\|[a-z0-9._-]+)+\]$")

COMMANDS = list(iter_commands(typer.main.get_command(app)))


def _type_column(cmd, param):
    return param.display_type_rich(Context(cmd))


@pytest.mark.parametrize("path", [" ".join(p[1:]) or "(root)" for p, _ in COMMANDS])
def test_help_shows_no_python_type(path):
    args = [] if path == "(root)" else path.split()
    for columns in ("80", "300"):
        result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": columns})
        assert result.exit_code == 0, result.output
        found = PYTHON_TYPE.findall(result.stdout)
        assert not found, f"bitcase {path} --help shows {sorted(set(found))}"


@pytest.mark.parametrize("path", [" ".join(p[1:]) or "(root)" for p, _ in COMMANDS])
def test_every_value_has_a_human_metavar_or_its_choices(path):
    cmd = dict((" ".join(p[1:]) or "(root)", c) for p, c in COMMANDS)[path]
    bad = []
    for param in cmd.params:
        if param.hidden:
            continue
        if param.param_type_name == "argument":
            if not (param.metavar and HUMAN.match(param.metavar)) or _type_column(cmd, param) is not None:
                bad.append(f"{param.name}: metavar {param.metavar!r}, type {_type_column(cmd, param)!r}")
            continue
        shown = _type_column(cmd, param)
        if param.is_flag:
            assert shown is None, f"{param.opts}: a flag shows {shown!r}"
        elif not (HUMAN.match(shown or "") or CHOICE.match(shown or "")):
            bad.append(f"{'/'.join(param.opts)} shows {shown!r}")
    assert not bad, f"bitcase {path}: " + "; ".join(bad)


def test_a_required_argument_reads_as_its_metavar_in_the_usage_line():
    usage = CliRunner().invoke(app, ["ingest", "--help"], env={"COLUMNS": "300"}).stdout
    assert "bitcase ingest [OPTIONS] PATH..." in usage
    usage = CliRunner().invoke(app, ["verify", "--help"], env={"COLUMNS": "300"}).stdout
    assert "bitcase verify [OPTIONS] [FILE.py::KERNEL]" in usage


@pytest.mark.parametrize("args, option, choices", [
    (["model", "make", "--preset", "huge", "x"], "--preset", "'tiny', 'small', 'llama-1b'"),
    (["compare", "--model", "m", "--out", "o.jsonl", "--scale", "big"], "--scale", "'ci', 'full'"),
    (["compare", "--model", "m", "--out", "o.jsonl", "--suite", "nope"], "--suite", "'all', 'batch'"),
    (["export", "--format", "xml"], "--format", "'json', 'sarif'"),
    (["probe", "http://x/v1", "--api", "other"], "--api", "'auto', 'openai'"),
    (["assure", "--stage", "nope"], "--stage", "'verify', 'runtime'"),
    (["generate", "--model", "m", "--dtype", "float16"], "--dtype", "'float32', 'bfloat16'"),
])
def test_a_bad_choice_exits_2_listing_the_choices(args, option, choices):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert option in result.stderr and choices in result.stderr, result.stderr


def test_choices_are_shown_in_help():
    out = CliRunner().invoke(app, ["model", "make", "--help"], env={"COLUMNS": "300"}).stdout
    assert "[tiny|small|llama-1b|qwen3-tiny|mistral-tiny|gemma3-tiny|qwen3-0.6b|mistral-7b|gemma3-1b]" in out
    out = CliRunner().invoke(app, ["probe", "--help"], env={"COLUMNS": "300"}).stdout
    assert "[auto|openai|vllm|sglang|llama.cpp|tgi]" in out
