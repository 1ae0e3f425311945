"""The sealed kernel plan: every (kernel, configuration) a model shape may launch, with its digest.

A :class:`SealedPlan` is derived from a :class:`~kernels.shapes.ModelShape` alone. Each
:class:`PlanEntry` names the Triton function (module-qualified), its source file relative to
the repository root and that file's sha256, every constexpr (block sizes included), the launch
options and the static shape values, plus the CPU implementation that stands in for it off-GPU.
The plan digest is ``digest_of`` the sorted entries: it changes when any source or
configuration changes, and the deployment configuration D names it.

Torch- and Triton-free: sources are digested from the files, never imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from evidence_db.canonical import digest_of, file_digest
from kernels.configs import (LaunchConfig, attention_combine_config, decode_attention_config, decode_matmul_config,
                             embedding_config, gelu_tanh_mul_config, linear_configs, logit_softcap_config,
                             matmul_combine_norm_config, matmul_silu_configs, matmul_splits, paged_attention_config,
                             prefill_attention_config, prefill_combine_heads, prefill_matmul_config, rms_norm_config,
                             rope_store_kv_config, silu_mul_config)
from kernels.shapes import PRESETS, ModelShape, preset

__all__ = ["PlanEntry", "SealedPlan", "plan_for", "preset_plan", "KERNEL_SOURCES", "CPU_SOURCES", "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parent.parent

# kernel -> (module, Triton function, CPU function); the module's file is the entry's source.
KERNEL_SOURCES: dict[str, tuple[str, str, str]] = {
    "embedding": ("kernels.embedding", "embedding_kernel", "kernels.cpu_ops.embedding"),
    "rms_norm": ("kernels.rmsnorm", "rms_norm_kernel", "kernels.cpu_ops.rms_norm"),
    "matmul": ("kernels.matmul", "matmul_kernel", "kernels.cpu_ops.matmul"),
    "matmul_split": ("kernels.matmul_split", "matmul_split_kernel", "kernels.cpu_ops.matmul_split"),
    "matmul_combine": ("kernels.matmul_combine", "matmul_combine_kernel", "kernels.cpu_ops.matmul_combine"),
    "matmul_combine_norm": ("kernels.matmul_combine_norm", "matmul_combine_norm_kernel",
                            "kernels.cpu_ops.matmul_combine_norm"),
    "matmul_silu": ("kernels.matmul_silu", "matmul_silu_kernel", "kernels.cpu_ops.matmul_silu"),
    "rope_store_kv": ("kernels.rope_store_kv", "rope_store_kv_kernel", "kernels.cpu_ops.rope_store_kv"),
    "silu_mul": ("kernels.silu_mul", "silu_mul_kernel", "kernels.cpu_ops.silu_mul"),
    "gelu_tanh_mul": ("kernels.gelu_mul", "gelu_tanh_mul_kernel", "kernels.cpu_ops.gelu_tanh_mul"),
    "logit_softcap": ("kernels.softcap", "logit_softcap_kernel", "kernels.cpu_ops.logit_softcap"),
    "paged_attention": ("kernels.attention", "attention_partial_kernel", "kernels.cpu_attention.attention_partial"),
    "attention_combine": ("kernels.attention_combine", "attention_combine_kernel",
                          "kernels.cpu_attention.attention_combine"),
    "attention_prefill": ("kernels.attention_prefill", "attention_prefill_kernel",
                          "kernels.cpu_attention.attention_prefill"),
}
# Every file the CPU path's arithmetic lives in; one digest covers them all.
CPU_SOURCES = ("kernels/cpu_math.py", "kernels/cpu_ops.py", "kernels/cpu_attention.py")


def _module_file(module: str) -> str:
    return module.replace(".", "/") + ".py"


@lru_cache(maxsize=None)
def _source_digest(relative_path: str) -> str:
    path = REPO_ROOT / relative_path
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {relative_path} not found under {REPO_ROOT}")
    return file_digest(path)


def _cpu_sources_digest() -> str:
    return digest_of({p: _source_digest(p) for p in CPU_SOURCES})


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One sealed (kernel, configuration) with the provenance of its source."""

    kernel: str
    key: str  # DOT-safe, e.g. "matmul.n2048_k2048"
    function: str  # module-qualified Triton function, e.g. "kernels.matmul.matmul_kernel"
    source_file: str  # relative to the repository root
    source_digest: str  # sha256:<hex> of source_file
    constexprs: tuple[tuple[str, Any], ...]
    num_warps: int
    num_stages: int
    static: tuple[tuple[str, Any], ...]
    cpu_function: str
    cpu_source_digest: str  # digest over CPU_SOURCES
    roles: tuple[str, ...] = ()  # which model weights/ops use it, for reports

    @classmethod
    def from_config(cls, config: LaunchConfig, roles: tuple[str, ...] = ()) -> PlanEntry:
        """Seal a launch configuration: attach the kernel's source file and digests."""
        module, function, cpu_function = KERNEL_SOURCES[config.kernel]
        source_file = _module_file(module)
        return cls(kernel=config.kernel, key=config.key, function=f"{module}.{function}",
                   source_file=source_file, source_digest=_source_digest(source_file),
                   constexprs=config.constexprs, num_warps=config.num_warps, num_stages=config.num_stages,
                   static=config.static, cpu_function=cpu_function, cpu_source_digest=_cpu_sources_digest(),
                   roles=tuple(sorted(set(roles))))

    def config(self) -> LaunchConfig:
        """The launch configuration this entry seals."""
        return LaunchConfig(kernel=self.kernel, key=self.key, constexprs=self.constexprs,
                            num_warps=self.num_warps, num_stages=self.num_stages, static=self.static)

    def constexpr_dict(self) -> dict[str, Any]:
        """Constexprs as keyword arguments (dtype-valued ones spelled as strings)."""
        return dict(self.constexprs)

    def static_dict(self) -> dict[str, Any]:
        """Static shape values as a dict."""
        return dict(self.static)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form; the plan digest is computed over these."""
        return {"kernel": self.kernel, "key": self.key, "function": self.function,
                "source_file": self.source_file, "source_digest": self.source_digest,
                "constexprs": self.constexpr_dict(), "num_warps": self.num_warps,
                "num_stages": self.num_stages, "static": self.static_dict(),
                "cpu_function": self.cpu_function, "cpu_source_digest": self.cpu_source_digest,
                "roles": list(self.roles)}

    @property
    def digest(self) -> str:
        """Digest of this entry alone."""
        return digest_of(self.as_dict())


def _lookup_key(kernel: str, constexprs: Mapping[str, Any] | tuple[tuple[str, Any], ...]) -> tuple:
    items = constexprs.items() if isinstance(constexprs, Mapping) else constexprs
    return kernel, tuple(sorted(items))


@dataclass(frozen=True, slots=True)
class SealedPlan:
    """The sealed set of launch configurations for one model shape; entries sorted by key."""

    name: str
    shape: ModelShape
    entries: tuple[PlanEntry, ...]
    digest: str = field(init=False)
    _index: dict = field(init=False, repr=False, compare=False)
    # id(config) -> (config, entry or None): admission answers, computed once per launch
    # configuration (configs are memoised, so a config is one object for the process's life)
    _admitted: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = [e.key for e in self.entries]
        if keys != sorted(keys) or len(set(keys)) != len(keys):
            raise ValueError(f"plan {self.name!r}: entry keys must be unique and sorted")
        index = {_lookup_key(e.kernel, e.constexprs): e for e in self.entries}
        if len(index) != len(self.entries):
            raise ValueError(f"plan {self.name!r}: two entries share a (kernel, constexprs)")
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_admitted", {})
        object.__setattr__(self, "digest", digest_of([e.as_dict() for e in self.entries]))

    def lookup(self, kernel: str, constexprs: Mapping[str, Any] | tuple[tuple[str, Any], ...]) -> PlanEntry | None:
        """The entry for (kernel, constexprs), or None when the plan does not contain it."""
        return self._index.get(_lookup_key(kernel, constexprs))

    def admit(self, config: LaunchConfig) -> PlanEntry | None:
        """The entry that seals ``config`` exactly (key, launch options, static shape), or None."""
        known = self._admitted.get(id(config))
        if known is not None and known[0] is config:  # the config object itself, not a reused id
            return known[1]
        entry = self.lookup(config.kernel, config.constexprs)
        if entry is not None and (entry.key, entry.num_warps, entry.num_stages, entry.static) != \
                (config.key, config.num_warps, config.num_stages, config.static):
            entry = None
        self._admitted[id(config)] = (config, entry)
        return entry

    def entry(self, key: str) -> PlanEntry:
        """The entry with this key; KeyError names the known keys."""
        for e in self.entries:
            if e.key == key:
                return e
        raise KeyError(f"plan {self.name!r} has no entry {key!r}; keys: {', '.join(e.key for e in self.entries)}")

    def keys(self) -> tuple[str, ...]:
        """All entry keys, sorted."""
        return tuple(e.key for e in self.entries)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form of the whole plan."""
        return {"name": self.name, "digest": self.digest, "entries": [e.as_dict() for e in self.entries]}


def _configs_for(shape: ModelShape) -> list[tuple[LaunchConfig, str]]:
    """Every configuration a forward pass of ``shape`` may launch, with the role that needs it."""
    s, dt = shape, shape.dtype
    q_width, kv_width = s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
    bias = s.has_qkv_bias
    weights = [  # (role, N, K, has_bias): fused and separate projections, so either engine layout fits
        ("qkv_proj", q_width + 2 * kv_width, s.hidden_size, bias), ("q_proj", q_width, s.hidden_size, bias),
        ("kv_proj", kv_width, s.hidden_size, bias), ("o_proj", s.hidden_size, q_width, s.has_o_proj_bias),
        ("gate_up_proj", 2 * s.intermediate_size, s.hidden_size, False),
        ("gate_or_up_proj", s.intermediate_size, s.hidden_size, False),
        ("down_proj", s.hidden_size, s.intermediate_size, False),
    ]
    configs = [(embedding_config(vocab_size=s.vocab_size, hidden_size=s.hidden_size, dtype=dt,
                                 scaled=s.embed_scale), "embed_tokens")]
    for has_residual, role in ((False, "rms_norm"), (True, "rms_norm_residual")):
        configs.append((rms_norm_config(hidden_size=s.hidden_size, eps=s.rms_norm_eps,
                                        has_residual=has_residual, dtype=dt, offset=s.norm_offset), role))
    if s.has_qk_norm:  # q and k heads normalised as [T * heads, head_dim] rows
        configs.append((rms_norm_config(hidden_size=s.head_dim, eps=s.rms_norm_eps, has_residual=False,
                                        dtype=dt, offset=s.norm_offset), "qk_norm"))
    weights.append(("lm_head", s.vocab_size, s.hidden_size, False))
    for role, n, k, has_bias in weights:  # one launch, or a fixed split-K pair (kernels/matmul_configs.py)
        out_dtype = "float32" if role == "lm_head" else dt
        configs.extend((c, role) for c in linear_configs(n=n, k=k, dtype=dt, has_bias=has_bias, out_dtype=out_dtype))
        if matmul_splits(n=n, k=k, dtype=dt) == 1:  # the M buckets: <= DECODE_ROWS, >= PREFILL_ROWS rows
            for bucket in (decode_matmul_config, prefill_matmul_config):
                config = bucket(n=n, k=k, dtype=dt, has_bias=has_bias, out_dtype=out_dtype)
                if config is not None:
                    configs.append((config, role))
        # A split residual branch's partials are folded by the residual norm after it (kernels/ops.py);
        # a biased one (o_proj with attention_bias) by its own combine, which adds the bias.
        splits = matmul_splits(n=n, k=k, dtype=dt)
        # With post_norms (Gemma3) a branch is normalised alone before its add: its own combine folds it.
        if role in ("o_proj", "down_proj") and splits > 1 and not has_bias and not s.post_norms:
            configs.append((matmul_combine_norm_config(hidden_size=s.hidden_size, splits=splits, eps=s.rms_norm_eps,
                                                       dtype=dt), f"{role}_fold"))
    configs.append((rope_store_kv_config(num_heads=s.num_heads, num_kv_heads=s.num_kv_heads, head_dim=s.head_dim,
                                         page_size=s.page_size, dtype=dt, check_finite=s.check_finite), "rope_store_kv"))
    if s.activation == "gelu_tanh":
        configs.append((gelu_tanh_mul_config(intermediate_size=s.intermediate_size, dtype=dt), "gelu_tanh_mul"))
    else:  # gate/up with SiLU-and-multiply in its epilogue; the two-launch form stays planned for other layouts
        configs.extend((c, "gate_up_silu") for c in matmul_silu_configs(intermediate_size=s.intermediate_size,
                                                                         k=s.hidden_size, dtype=dt))
        configs.append((silu_mul_config(intermediate_size=s.intermediate_size, dtype=dt), "silu_mul"))
    if s.final_logit_softcap:
        configs.append((logit_softcap_config(vocab_size=s.vocab_size, cap=s.final_logit_softcap), "logit_softcap"))
    for window in s.attention_windows:  # one pair per distinct window (0: the full causal layers)
        attention = paged_attention_config(num_heads=s.num_heads, num_kv_heads=s.num_kv_heads, head_dim=s.head_dim,
                                           page_size=s.page_size, scale=s.attention_scale, dtype=dt, window=window,
                                           softcap=s.attn_softcap)
        configs.append((attention, "attention"))
        decode = decode_attention_config(num_heads=s.num_heads, num_kv_heads=s.num_kv_heads, head_dim=s.head_dim,
                                         page_size=s.page_size, scale=s.attention_scale, dtype=dt, window=window,
                                         softcap=s.attn_softcap)
        if decode is not None:  # the decode bucket's tile (same KV tiles, segments and order)
            configs.append((decode, "attention"))
        for block_h in sorted({1, prefill_combine_heads(s.num_heads)}):  # decode's merge; prefill's, if other
            configs.append((attention_combine_config(num_heads=s.num_heads, head_dim=s.head_dim,
                                                     seg=attention.constexpr_dict()["SEG"], dtype=dt,
                                                     check_finite=s.check_finite, window=window, block_h=block_h),
                            "attention"))
        if not window:  # full causal layers: attention in one kernel (long launches, KV of one segment)
            for is_decode in (False, True):  # decode's tile, if other, as for the pair's walk
                configs.append((prefill_attention_config(num_heads=s.num_heads, num_kv_heads=s.num_kv_heads,
                                                         head_dim=s.head_dim, page_size=s.page_size,
                                                         scale=s.attention_scale, dtype=dt, softcap=s.attn_softcap,
                                                         check_finite=s.check_finite, decode=is_decode),
                                "attention"))
    return configs


def plan_for(shape: ModelShape, *, name: str | None = None) -> SealedPlan:
    """The sealed plan of ``shape``; named after the preset it equals unless ``name`` is given."""
    if name is None:
        name = next((n for n, p in sorted(PRESETS.items()) if p == shape), "custom")
    roles: dict[str, list[str]] = {}
    configs: dict[str, LaunchConfig] = {}
    for config, role in _configs_for(shape):
        if config.key in configs and configs[config.key] != config:
            raise ValueError(f"two configurations share key {config.key!r}")
        configs[config.key] = config
        roles.setdefault(config.key, []).append(role)
    entries = tuple(PlanEntry.from_config(configs[k], tuple(roles[k])) for k in sorted(configs))
    return SealedPlan(name=name, shape=shape, entries=entries)


def preset_plan(name: str) -> SealedPlan:
    """The sealed plan of a named preset shape (kernels/shapes.py)."""
    return plan_for(preset(name), name=name)
