"""Selected-region contracts: what two launches share and which outputs must agree.

A contract is a TOML file beside the kernels (``kernels/contracts/<kernel>.toml``); the format
is documented in ``docs/verifier.md``. It names the launch grid (host glue), how each scalar
argument relates between the two launches (``same`` or ``batch``), the tensors with their
layout and relation (``equal``, ``index``, ``paged``, ``none``), the selected output region,
and the premises (per-launch ``assume``, relational ``same``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofs.errors import ContractError
from proofs.tir import FLOAT_DTYPES, INT_DTYPES

__all__ = ["Contract", "Each", "TensorSpec", "Relation", "ParamSpec", "Vary", "index_bound", "load_contract",
           "parse_contract"]

Dim = str | int


@dataclass(frozen=True, slots=True)
class ParamSpec:
    kind: str  # same | batch
    dtype: str  # int32 | int64 | float32


@dataclass(frozen=True, slots=True)
class Vary:
    """A constexpr the two launches may choose differently, from ``values``."""

    values: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Relation:
    kind: str  # equal | index | paged | none
    index: tuple[str, ...] = ()
    page_table: str = ""
    row: str = ""
    page_size: str = ""
    length: str = ""
    layout: str = "slot"  # slot: dim 0 = page*size + offset; page: dims 0, 1 = page, offset


def index_bound(entry: str) -> str | None:
    """The bound ``E`` of an index-relation entry ``"* < E"``, else None.

    ``"*"`` relates every index to the same index in the other launch; ``"* < E"`` only indices
    below ``E`` (evaluated in each launch), e.g. the segments of a split reduction that the
    selected element reads, when the others may hold anything.
    """
    head, sep, bound = entry.partition("<")
    return bound.strip() if sep and head.strip() == "*" else None


@dataclass(frozen=True, slots=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[Dim, ...]
    strides: tuple[Dim, ...]
    relation: Relation
    output: tuple[str, ...] | None = None
    finite: bool = False
    values: tuple[Dim, Dim] | None = None
    distinct: bool = False
    immutable: bool = False  # not written by any launch of the plan (weights): may be read before a PDL wait

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES or self.dtype == "float"


@dataclass(frozen=True, slots=True)
class Each:
    """A premise about every element (or every combination of elements) of integer tensors.

    ``tensors`` lists one or more integer tensors (repeat one for a premise about pairs of its
    elements); ``index`` names one bound index variable per dimension of each, in order. The
    premise ``where`` implies ``holds`` is instantiated for every combination of elements of
    those tensors that occur in a query.
    """

    tensors: tuple[str, ...]
    index: tuple[str, ...]
    where: str
    holds: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Contract:
    kernel: str
    path: Path | None
    summary: str
    grid: tuple[str, ...]
    params: dict[str, ParamSpec]
    constexprs: dict[str, Any]
    groups: dict[str, str]
    symbols: dict[str, str]
    tensors: dict[str, TensorSpec]
    assume: tuple[str, ...] = ()
    same: tuple[str, ...] = ()
    no_overflow: bool = False
    i32_extents: bool = True
    each: tuple[Each, ...] = ()
    raw: dict = field(default_factory=dict)

    @property
    def outputs(self) -> list[TensorSpec]:
        return [t for t in self.tensors.values() if t.output is not None]


def _where(path: Path | None, key: str) -> str:
    return f"{path or '<contract>'}: [{key}]"


def _dim(value: Any, where: str) -> Dim:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ContractError(f"{where}: {value!r} is not an integer or an expression string")
    return value


def _relation(value: Any, where: str) -> Relation:
    if value in ("equal", "none"):
        return Relation(kind=value)
    if isinstance(value, dict) and "index" in value:
        idx = value["index"]
        if not isinstance(idx, list) or not all(isinstance(e, str) for e in idx):
            raise ContractError(f"{where}: relation.index must be a list of expression strings or \"*\"")
        starred = [e for e in idx if e.strip().startswith("*") and e != "*" and not index_bound(e)]
        if starred:
            raise ContractError(f"{where}: relation.index entry {starred[0]!r} is not \"*\" or \"* < <bound>\"")
        return Relation(kind="index", index=tuple(idx))
    if isinstance(value, dict) and "paged" in value:
        missing = [k for k in ("row", "page_size", "length") if k not in value]
        if missing:
            raise ContractError(f"{where}: a paged relation needs {', '.join(missing)}")
        layout = value.get("layout", "slot")
        if layout not in ("slot", "page"):
            raise ContractError(f"{where}: paged layout must be \"slot\" or \"page\", got {layout!r}")
        return Relation(kind="paged", page_table=str(value["paged"]), row=str(value["row"]),
                        page_size=str(value["page_size"]), length=str(value["length"]), layout=layout)
    raise ContractError(f"{where}: relation must be \"equal\", \"none\", {{ index = [...] }} or "
                        f"{{ paged = \"<page table>\", row, page_size, length }}; got {value!r}")


def _tensor(name: str, spec: Any, path: Path | None) -> TensorSpec:
    where = _where(path, f"tensors.{name}")
    if not isinstance(spec, dict):
        raise ContractError(f"{where}: expected a table")
    dtype = spec.get("dtype")
    if dtype not in FLOAT_DTYPES + INT_DTYPES + ("float",):
        raise ContractError(f"{where}: dtype {dtype!r} is not \"float\" (any float type the configuration "
                            f"picks) or one of {', '.join(FLOAT_DTYPES + INT_DTYPES)}")
    shape = tuple(_dim(d, where) for d in spec.get("shape", []))
    strides = tuple(_dim(d, where) for d in spec.get("strides", []))
    if not shape or len(shape) != len(strides):
        raise ContractError(f"{where}: shape and strides must be non-empty lists of equal length")
    output = spec.get("output")
    if output is not None and (not isinstance(output, list) or len(output) != len(shape)):
        raise ContractError(f"{where}: output must list one index expression (or \"*\") per dimension")
    relation = _relation(spec.get("relation", "none"), where)
    if relation.kind == "index" and len(relation.index) != len(shape):
        raise ContractError(f"{where}: relation.index needs one entry per dimension ({len(shape)})")
    values = spec.get("values")
    if values is not None:
        if dtype in FLOAT_DTYPES or not isinstance(values, list) or len(values) != 2:
            raise ContractError(f"{where}: values = [lo, hi) is only for integer tensors")
        values = (_dim(values[0], where), _dim(values[1], where))
    return TensorSpec(name=name, dtype=dtype, shape=shape, strides=strides, relation=relation,
                      output=tuple(output) if output is not None else None, finite=bool(spec.get("finite", False)),
                      values=values, distinct=bool(spec.get("distinct", False)),
                      immutable=bool(spec.get("immutable", False)))


def _param(name: str, value: Any, path: Path | None) -> ParamSpec:
    kind, _, dtype = str(value).partition(":")
    if kind not in ("same", "batch") or dtype not in ("", "int32", "int64", "float", "float32"):
        raise ContractError(f"{_where(path, 'params')}: {name} = {value!r}; use \"same\" or \"batch\", "
                            "optionally with \":int64\" or \":float\"")
    return ParamSpec(kind=kind, dtype={"": "int32", "float": "float32"}.get(dtype, dtype))


def parse_contract(data: dict, path: Path | None = None) -> Contract:
    """Validate a contract's TOML content."""
    known = {"kernel", "summary", "grid", "params", "constexprs", "groups", "symbols", "tensors", "premises"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ContractError(f"{path or '<contract>'}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if not isinstance(data.get("kernel"), str):
        raise ContractError(f"{path or '<contract>'}: missing kernel = \"<jit function name>\"")
    grid = data.get("grid", {}).get("dims")
    if not isinstance(grid, list) or not 1 <= len(grid) <= 3 or not all(isinstance(g, (str, int)) for g in grid):
        raise ContractError(f"{_where(path, 'grid')}: dims must list 1 to 3 expressions")
    constexprs = {}
    for name, value in data.get("constexprs", {}).items():
        if isinstance(value, dict):
            if set(value) != {"vary"} or not isinstance(value["vary"], list) or len(value["vary"]) < 2:
                raise ContractError(f"{_where(path, 'constexprs')}: {name} = {{ vary = [v1, v2, ...] }} needs 2+ values")
            value = Vary(tuple(value["vary"]))
        constexprs[name] = value
    tensors = {name: _tensor(name, spec, path) for name, spec in data.get("tensors", {}).items()}
    if not any(t.output is not None for t in tensors.values()):
        raise ContractError(f"{path or '<contract>'}: no tensor has an output = [...] selection")
    premises = data.get("premises", {})
    for key in ("assume", "same"):
        if not all(isinstance(e, str) for e in premises.get(key, [])):
            raise ContractError(f"{_where(path, 'premises')}: {key} must be a list of expression strings")
    each = []
    for i, e in enumerate(premises.get("each", [])):
        where = _where(path, f"premises.each[{i}]")
        names = e.get("tensor") if isinstance(e, dict) else None
        names = [names] if isinstance(names, str) else names
        if not names or not all(n in tensors and not tensors[n].is_float for n in names) or len(names) > 3:
            raise ContractError(f"{where}: tensor = \"<integer tensor>\" (or a list of up to 3) is required")
        index = e.get("index", ["i"])
        index = [index] if isinstance(index, str) else index
        rank = sum(len(tensors[n].shape) for n in names)
        if len(index) != rank or not isinstance(e.get("holds"), list):
            raise ContractError(f"{where}: index needs one name per dimension of the listed tensors ({rank}) "
                                "and holds a list of expressions")
        each.append(Each(tuple(names), tuple(index), str(e.get("where", "True")), tuple(e["holds"])))
    for t in tensors.values():
        if t.relation.kind == "paged" and t.relation.page_table not in tensors:
            raise ContractError(f"{_where(path, 'tensors.' + t.name)}: page table {t.relation.page_table!r} is not a tensor")
    return Contract(
        kernel=data["kernel"], path=path, summary=str(data.get("summary", "")), grid=tuple(str(g) for g in grid),
        params={n: _param(n, v, path) for n, v in data.get("params", {}).items()}, constexprs=constexprs,
        groups={str(k): str(v) for k, v in data.get("groups", {}).items()},
        symbols={str(k): str(v) for k, v in data.get("symbols", {}).items()}, tensors=tensors,
        assume=tuple(premises.get("assume", [])), same=tuple(premises.get("same", [])),
        no_overflow=bool(premises.get("no_overflow", False)), i32_extents=bool(premises.get("i32_extents", True)),
        each=tuple(each), raw=data)


def load_contract(path: Path) -> Contract:
    """Read and validate a contract file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ContractError(f"cannot read contract {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ContractError(f"{path}: invalid TOML: {exc}") from None
    return parse_contract(data, path)
