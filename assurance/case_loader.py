"""Read a case TOML file into a :class:`~assurance.case_model.Case`.

The loader checks the file's shape (known keys, value types) and collects every problem
before raising :class:`~assurance.issues.CaseError`; structural checks over the whole graph
(unknown ids, cycles, policies) live in :mod:`assurance.validate`.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any

from assurance.case_components import component_issues, parse_components
from assurance.case_model import Case, Condition, Generator, Node
from assurance.ids import NodeId
from assurance.issues import CaseError, Issue

__all__ = ["load_case", "parse_case", "build_node", "NODE_KEYS", "GENERATOR_KEYS", "SOLUTION_ONLY_KEYS"]

CASE_KEYS = ("id", "title", "top", "document", "root", "deployment")
NODE_KEYS = ("id", "kind", "text", "source", "supported_by", "in_context_of", "undeveloped",
             "obligations", "requires", "any_of", "subjects", "trusted", "rationale",
             "max_age_days", "when", "when_not", "component")
SOLUTION_ONLY_KEYS = ("obligations", "requires", "any_of", "subjects", "trusted", "rationale",
                      "max_age_days")
GENERATOR_KEYS = ("id", "for_each", "parent", "match", "exclude", "node")
_STR_LIST_KEYS = ("supported_by", "in_context_of", "obligations", "requires", "any_of", "subjects")


def load_case(path: Path | str) -> Case:
    """Parse the case file at ``path``; raise :class:`CaseError` listing every shape problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CaseError([Issue("unreadable", str(path), None, f"cannot read the case file: {exc.strerror}",
                               "pass the path of an existing, readable .toml case file")]) from None
    return parse_case(text, path=path)


def parse_case(text: str, *, path: Path | None = None) -> Case:
    """Parse case TOML ``text`` (``path`` is used in messages and kept on the case)."""
    return _Parser(text, path).parse()


def build_node(raw: dict[str, Any], *, file: str, line: int = 0, generated_by: str | None = None) -> Node:
    """One node from a ``[[node]]``-shaped table (used for generated nodes); raises :class:`CaseError`."""
    parser = _Parser("", Path(file))
    node = parser._node(raw, line, generated_by=generated_by)
    if parser.issues:
        raise CaseError(parser.issues)
    return node


class _Parser:
    def __init__(self, text: str, path: Path | None) -> None:
        self.text = text
        self.path = path
        self.file = str(path) if path else "<case>"
        self.issues: list[Issue] = []

    def issue(self, code: str, node: str | None, message: str, fix: str, line: int = 0) -> None:
        self.issues.append(Issue(code, self.file, node, message, fix, line))

    def parse(self) -> Case:
        try:
            data = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"line (\d+)", str(exc))
            raise CaseError([Issue("toml-syntax", self.file, None, f"not valid TOML: {exc}",
                                   "correct the TOML syntax at the reported position",
                                   int(m.group(1)) if m else 0)]) from None
        self._unknown_keys(data, ("case", "node", "generate", "component", "contract"), None, "top level", 0)
        header = data.get("case")
        if not isinstance(header, dict):
            self.issue("no-header", None, "missing the [case] table",
                       'add [case] with id = "...", title = "..." and top = "<top goal id>"')
            header = {}
        self._unknown_keys(header, CASE_KEYS, None, "[case]", 0)
        case_id = self._str(header, "id", None, "[case]", 0, required=True)
        top = self._str(header, "top", None, "[case]", 0, required=True)
        root = self._str(header, "root", None, "[case]", 0)
        deployment = self._str(header, "deployment", None, "[case]", 0)  # the D the gate judges (assurance.pinning)
        node_lines = self._table_lines("node")
        gen_lines = self._table_lines("generate")
        nodes = tuple(self._node(raw, node_lines[i] if i < len(node_lines) else 0)
                      for i, raw in enumerate(self._array(data, "node")))
        generators = tuple(self._generator(raw, gen_lines[i] if i < len(gen_lines) else 0)
                           for i, raw in enumerate(self._array(data, "generate")))
        components, contracts, problems = parse_components(
            data, file=self.file, component_lines=self._table_lines("component"),
            contract_lines=self._table_lines("contract"))
        templates = [Node(id=NodeId(g.id), kind=str(g.template.get("kind", "")), text="", line=g.line,
                          components=self._components(dict(g.template), g.id, f"generator {g.id}", g.line))
                     for g in generators]
        self.issues += problems + component_issues((*nodes, *templates), components, contracts, file=self.file)
        if self.issues:
            raise CaseError(self.issues)
        return Case(id=case_id, title=str(header.get("title", "")), top=NodeId(top), nodes=nodes,
                    generators=generators, document=str(header.get("document", "")), path=self.path, root=root or "",
                    deployment=deployment, components=components, contracts=contracts)

    def _table_lines(self, name: str) -> list[int]:
        header = re.compile(rf"^\s*\[\[\s*{name}\s*\]\]\s*(#.*)?$")
        return [i for i, line in enumerate(self.text.splitlines(), start=1) if header.match(line)]

    def _array(self, data: dict[str, Any], key: str) -> list[dict[str, Any]]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.issue("type", None, f"'{key}' must be an array of tables",
                       f"write each entry as a [[{key}]] table")
            return []
        return value

    def _unknown_keys(self, raw: dict[str, Any], allowed: tuple[str, ...], node: str | None,
                      where: str, line: int) -> None:
        for key in sorted(set(raw) - set(allowed)):
            close = difflib.get_close_matches(key, allowed, n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"remove it; known keys: {', '.join(allowed)}"
            self.issue("unknown-key", node, f"unknown key '{key}' in {where}", fix, line)

    def _str(self, raw: dict[str, Any], key: str, node: str | None, where: str, line: int,
             *, required: bool = False) -> str:
        value = raw.get(key)
        if value is None:
            if required:
                self.issue("missing-key", node, f"{where} has no '{key}'", f'add {key} = "..."', line)
            return ""
        if not isinstance(value, str):
            self.issue("type", node, f"'{key}' in {where} must be a string, got {type(value).__name__}",
                       f'write {key} = "..."', line)
            return ""
        return value

    def _str_list(self, raw: dict[str, Any], key: str, node: str | None, where: str, line: int) -> tuple[str, ...]:
        value = raw.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.issue("type", node, f"'{key}' in {where} must be a list of strings",
                       f'write {key} = ["...", "..."]', line)
            return ()
        return tuple(value)

    def _bool(self, raw: dict[str, Any], key: str, node: str | None, where: str, line: int) -> bool:
        value = raw.get(key, False)
        if not isinstance(value, bool):
            self.issue("type", node, f"'{key}' in {where} must be true or false", f"write {key} = true", line)
            return False
        return value

    def _condition(self, raw: dict[str, Any], key: str, node: str | None, where: str, line: int) -> Condition:
        value = raw.get(key, {})
        if not isinstance(value, dict):
            self.issue("type", node, f"'{key}' in {where} must be a table of deployment fields",
                       f'write {key} = {{ accelerator = "cpu" }}', line)
            return ()
        pairs = []
        flat = _flatten(value)
        for name in sorted(flat):
            accepted = flat[name]
            accepted = [accepted] if isinstance(accepted, (str, int, bool)) else accepted
            if not isinstance(accepted, list) or not all(isinstance(v, (str, int, bool)) for v in accepted):
                self.issue("type", node, f"'{key}.{name}' in {where} must be a value or a list of values",
                           f'write {key} = {{ {name} = ["a", "b"] }}', line)
                continue
            pairs.append((name, tuple(_as_text(v) for v in accepted)))
        return tuple(pairs)

    def _node(self, raw: dict[str, Any], line: int, *, generated_by: str | None = None) -> Node:
        node_id = raw.get("id") if isinstance(raw.get("id"), str) else None
        where = f"node {node_id}" if node_id else "a [[node]] table"
        self._unknown_keys(raw, NODE_KEYS, node_id, where, line)
        node_id = self._str(raw, "id", node_id, where, line, required=True)
        kind = self._str(raw, "kind", node_id, where, line, required=True)
        text = self._str(raw, "text", node_id, where, line, required=True)
        if kind and kind != "solution":
            for key in SOLUTION_ONLY_KEYS:
                if key in raw:
                    self.issue("solution-only-key", node_id, f"'{key}' applies to solutions only, not to a {kind}",
                               f"remove '{key}' or make the node kind = \"solution\"", line)
        if "undeveloped" in raw and kind and kind != "goal":
            self.issue("goal-only-key", node_id, f"'undeveloped' applies to goals only, not to a {kind}",
                       "remove 'undeveloped'", line)
        lists = {key: self._str_list(raw, key, node_id, where, line) for key in _STR_LIST_KEYS}
        max_age = raw.get("max_age_days")
        if max_age is not None and (isinstance(max_age, bool) or not isinstance(max_age, int) or max_age <= 0):
            self.issue("type", node_id, "'max_age_days' must be a positive integer", "write max_age_days = 30", line)
            max_age = None
        obligations = lists["obligations"] or ((node_id,) if kind == "solution" and node_id else ())
        return Node(
            id=NodeId(node_id), kind=kind, text=text,
            source=self._str(raw, "source", node_id, where, line),
            supported_by=tuple(NodeId(i) for i in lists["supported_by"]),
            in_context_of=tuple(NodeId(i) for i in lists["in_context_of"]),
            is_undeveloped=self._bool(raw, "undeveloped", node_id, where, line),
            obligations=obligations, requires=lists["requires"], any_of=lists["any_of"],
            subjects=lists["subjects"], is_trusted=self._bool(raw, "trusted", node_id, where, line),
            rationale=self._str(raw, "rationale", node_id, where, line), max_age_days=max_age,
            when=self._condition(raw, "when", node_id, where, line),
            when_not=self._condition(raw, "when_not", node_id, where, line),
            line=line, generated_by=generated_by, components=self._components(raw, node_id, where, line),
        )

    def _components(self, raw: dict[str, Any], node_id: str | None, where: str, line: int) -> tuple[str, ...]:
        """The ``component`` field: one id or a list of ids, kept in order without repeats."""
        return tuple(dict.fromkeys(self._str_list(raw, "component", node_id, where, line)))

    def _generator(self, raw: dict[str, Any], line: int) -> Generator:
        gen_id = raw.get("id") if isinstance(raw.get("id"), str) else None
        where = f"generator {gen_id}" if gen_id else "a [[generate]] table"
        self._unknown_keys(raw, GENERATOR_KEYS, gen_id, where, line)
        gen_id = self._str(raw, "id", gen_id, where, line, required=True)
        for_each = self._str(raw, "for_each", gen_id, where, line) or "plan_entry"
        if for_each != "plan_entry":
            self.issue("generator", gen_id, f"unknown for_each '{for_each}'",
                       'use for_each = "plan_entry" (one node per sealed-plan entry)', line)
        template = raw.get("node")
        if not isinstance(template, dict):
            self.issue("generator", gen_id, f"{where} has no [generate.node] template table",
                       "add a [generate.node] table with id, kind, text and the solution's policy", line)
            template = {}
        else:
            self._unknown_keys(template, NODE_KEYS, gen_id, f"{where} [generate.node]", line)
        return Generator(id=gen_id, parent=NodeId(self._str(raw, "parent", gen_id, where, line, required=True)),
                         template=template, for_each=for_each,
                         match=self._str_list(raw, "match", gen_id, where, line),
                         exclude=self._str_list(raw, "exclude", gen_id, where, line), line=line)


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``: TOML dotted keys name fields in nested tables of D."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _as_text(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
