"""A pytest plugin that keeps only the tests that drive the CLI (for test_terminal_width.py).

A test drives the CLI when its code, the code of the test helpers and fixtures it uses, or
what those call in turn: mentions CliRunner or an ``invoke`` call, imports or names anything of
``assurance.cli`` (the Typer app, ``main``, the help renderer), carries a string naming it (a
``python -m assurance.cli`` or ``-c "from assurance.cli.main import main"`` subprocess), or
reads captured output (capsys, capfd). Anything else prints nothing of the CLI's, so its
outcome cannot depend on the terminal's width.
"""

from __future__ import annotations

import inspect
import types

import pytest

CLI_PACKAGE = "assurance.cli"
_CLI_NAMES = frozenset({"CliRunner", "invoke"})
_CAPTURE_FIXTURES = frozenset({"capsys", "capsysbinary", "capfd", "capfdbinary"})


def _module_of(obj: object) -> str:
    module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
    return module if isinstance(module, str) else ""


def _in_tests(obj: object) -> bool:
    return _module_of(obj).split(".")[0] == "tests"


def _is_cli(obj: object, depth: int = 1) -> bool:
    """Anything of assurance.cli, Typer or Click (the app, its commands), a string naming
    assurance.cli, or a list, tuple or dict holding one (a table of the app's commands)."""
    if isinstance(obj, str):
        return CLI_PACKAGE in obj
    if any(module == CLI_PACKAGE or module.startswith(CLI_PACKAGE + ".") or module.split(".")[0] in ("typer", "click")
           for module in (_module_of(obj), type(obj).__module__)):
        return True
    if depth > 0 and isinstance(obj, (list, tuple, dict)):
        return any(_is_cli(x, depth - 1) for x in (list(obj.items()) if isinstance(obj, dict) else obj))
    return False


def _code_drives_cli(code: types.CodeType, namespace: dict, seen: set) -> bool:
    if code in seen:
        return False
    seen.add(code)
    for const in code.co_consts:
        if isinstance(const, str) and CLI_PACKAGE in const:
            return True
        if isinstance(const, types.CodeType) and _code_drives_cli(const, namespace, seen):
            return True
    # a helper reached as an attribute of a test module (support.run_cli(...)) is looked up there too
    modules = [namespace.get(name) for name in code.co_names]
    scopes = [namespace] + [vars(m) for m in modules if isinstance(m, types.ModuleType) and _in_tests(m)]
    for name in code.co_names:
        if name in _CLI_NAMES or CLI_PACKAGE in name:
            return True
        for scope in scopes:
            if name in scope and _object_drives_cli(scope[name], seen):
                return True
    return False


def _object_drives_cli(obj: object, seen: set) -> bool:
    if _is_cli(obj):
        return True
    if not _in_tests(obj):
        return False
    if isinstance(obj, type):
        return any(_object_drives_cli(member, seen) for member in vars(obj).values())
    func = inspect.unwrap(obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj)
    code = getattr(func, "__code__", None)
    if code is None:  # an instance of a test helper class: its methods
        return _object_drives_cli(type(obj), seen)
    return _code_drives_cli(code, func.__globals__, seen)


def drives_cli(item: pytest.Item) -> bool:
    """Whether ``item``'s test function or any fixture it requests drives the CLI (module docstring);
    an item that is not a test function (a doctest) is kept."""
    if not isinstance(item, pytest.Function) or _CAPTURE_FIXTURES.intersection(item.fixturenames):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and any(_is_cli(value) for value in callspec.params.values()):
        return True
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        functions += [d.func for d in defs]
    seen: set = set()
    return any(f is not None and _object_drives_cli(f, seen) for f in functions)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        (kept if drives_cli(item) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
