"""The two scales of the protocol: ``ci`` (tiny model, short prompts, CPU) and ``full`` (8K prompts, GPU).

Both scales have the same structure and the same counts; only lengths, budgets and output lengths
differ. Torch-free. Lengths sit on page and chunk-budget boundaries (``k*page - 1``, ``k*page``,
``k*page + 1``) because that is where an engine's layout and chunking decisions change.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import EngineConfig

__all__ = ["ScaleSpec", "SCALES", "scale_spec"]


def _around(bases: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x for b in bases for x in (b - 1, b, b + 1))


@dataclass(frozen=True, slots=True)
class ScaleSpec:
    """Every length, budget and limit of one scale."""

    name: str
    # EngineConfig fields of the deployment D the scale runs under (the rest are EngineConfig
    # defaults); every candidate starts from them and a suite varies only what it tests.
    deployment: tuple[tuple[str, object], ...]
    # batch/order suite
    batch_prompt_lengths: tuple[int, ...]
    batch_max_tokens: int
    # chunked-prefill suite
    chunk_budgets: tuple[int, ...]
    chunk_prompt_lengths: tuple[int, ...]
    chunk_max_tokens: int
    # prefill/decode suite
    pd_prompt_lengths: tuple[int, ...]
    pd_positions: int
    # prefix-reuse suite
    prefix_donor_lengths: tuple[int, ...]
    prefix_full_hit_lengths: tuple[int, ...]
    prefix_shared_length: int
    prefix_suffix_length: int
    prefix_generated_prompt_length: int
    prefix_generated_tokens: int
    prefix_max_tokens: int
    # schedule-stress suite
    schedule_prompt_lengths: tuple[int, ...]
    schedule_max_tokens: int
    schedule_arrival_steps: tuple[int, ...]
    schedule_cancel_steps: tuple[tuple[int, int], ...]  # (prompt index, step at which it is cancelled)
    schedule_small_pool_pages: int
    schedule_small_pool_max_model_len: int
    # fidelity
    fidelity_prompt_lengths: tuple[int, ...]

    def __post_init__(self) -> None:
        config = self.engine_config()
        expect = {"batch_prompt_lengths": 32, "chunk_budgets": 5, "chunk_prompt_lengths": 18,
                  "pd_prompt_lengths": 3, "prefix_donor_lengths": 10, "prefix_full_hit_lengths": 2,
                  "schedule_prompt_lengths": 8, "schedule_arrival_steps": 8, "fidelity_prompt_lengths": 6}
        for name, count in expect.items():
            if len(getattr(self, name)) != count:
                raise ValueError(f"scale {self.name}: {name} needs {count} entries, has {len(getattr(self, name))}")
        if self.pd_positions != 128:
            raise ValueError(f"scale {self.name}: pd_positions must be 128, got {self.pd_positions}")
        if len(set(self.batch_prompt_lengths)) != 32:
            raise ValueError(f"scale {self.name}: batch prompt lengths must be distinct")
        if min(self.chunk_prompt_lengths) <= max(self.chunk_budgets):
            raise ValueError(f"scale {self.name}: every chunk prompt must exceed every budget so each "
                             "of the 90 comparisons is witnessed as chunked")
        if any(b % config.page_size for b in self.chunk_budgets):
            raise ValueError(f"scale {self.name}: chunk budgets must be page multiples")
        if any(d < config.page_size for d in self.prefix_donor_lengths):
            raise ValueError(f"scale {self.name}: a donor shorter than a page can publish no page")
        longest = max(max(self.batch_prompt_lengths) + self.batch_max_tokens,
                      max(self.chunk_prompt_lengths) + self.chunk_max_tokens,
                      max(self.pd_prompt_lengths) + self.pd_positions,
                      max(self.schedule_prompt_lengths) + self.schedule_max_tokens)
        if longest > config.max_model_len:
            raise ValueError(f"scale {self.name}: max_model_len {config.max_model_len} < longest request {longest}")
        if max(self.schedule_prompt_lengths) + self.schedule_max_tokens > self.schedule_small_pool_max_model_len:
            raise ValueError(f"scale {self.name}: the small-pool max_model_len cannot hold a schedule request")

    def engine_config(self, **overrides: object) -> EngineConfig:
        """D's engine configuration at this scale, with ``overrides``."""
        return EngineConfig.from_kwargs(**{**dict(self.deployment), **overrides})

    @property
    def page_size(self) -> int:
        return self.engine_config().page_size

    @property
    def max_model_len(self) -> int:
        """Positions the deployment serves (the checkpoint must support at least as many)."""
        return self.engine_config().max_model_len


SCALES: dict[str, ScaleSpec] = {
    "ci": ScaleSpec(
        name="ci", deployment=(),  # EngineConfig defaults: the D `bitcase assure` evaluates on CPU
        batch_prompt_lengths=(1, 2) + _around(tuple(16 * k for k in range(1, 11))),
        batch_max_tokens=4,
        chunk_budgets=(16, 32, 48, 64, 80),
        chunk_prompt_lengths=_around((96, 128, 144, 160, 192, 240)),
        chunk_max_tokens=2,
        pd_prompt_lengths=(17, 64, 129), pd_positions=128,
        prefix_donor_lengths=(16, 17, 31, 32, 33, 63, 64, 65, 127, 128),
        prefix_full_hit_lengths=(33, 65),
        prefix_shared_length=64, prefix_suffix_length=17,
        prefix_generated_prompt_length=20, prefix_generated_tokens=32, prefix_max_tokens=4,
        schedule_prompt_lengths=(17, 31, 32, 33, 63, 65, 97, 129),
        schedule_max_tokens=8,
        schedule_arrival_steps=(0, 0, 1, 2, 4, 6, 8, 10),
        schedule_cancel_steps=((1, 3), (4, 5), (6, 7)),
        schedule_small_pool_pages=20, schedule_small_pool_max_model_len=160,
        fidelity_prompt_lengths=(1, 16, 17, 33, 64, 100),
    ),
    "full": ScaleSpec(
        name="full",
        # The served GPU configuration: decode steps replayed from CUDA graphs, as bench/engine_gpu.py
        # times it, so the configuration assured is the one measured fast.
        deployment=(("max_model_len", 8448), ("max_num_batched_tokens", 2048), ("max_num_seqs", 16),
                    ("num_pages", 8192), ("cuda_graphs", True)),
        batch_prompt_lengths=(1, 2, 15, 16, 17) + _around(tuple(2 ** k for k in range(5, 14))),
        batch_max_tokens=16,
        chunk_budgets=(64, 128, 256, 512, 1024),
        chunk_prompt_lengths=_around((2048, 3072, 4096, 5120, 6144, 8192)),
        chunk_max_tokens=8,
        pd_prompt_lengths=(257, 2048, 8192), pd_positions=128,
        prefix_donor_lengths=(16, 17, 127, 128, 129, 1023, 1024, 1025, 8191, 8192),
        prefix_full_hit_lengths=(129, 1025),
        prefix_shared_length=1024, prefix_suffix_length=128,
        prefix_generated_prompt_length=100, prefix_generated_tokens=64, prefix_max_tokens=16,
        schedule_prompt_lengths=(17, 63, 64, 65, 127, 129, 257, 385),
        schedule_max_tokens=16,
        schedule_arrival_steps=(0, 0, 2, 4, 8, 12, 16, 20),
        schedule_cancel_steps=((1, 4), (4, 8), (6, 12)),
        # The six shortest schedule prompts take 32 pages at admission and three of them need a new
        # page within their first decode steps, so with 33 pages decode growth must preempt
        # (tests/compare/test_full_scale_witnesses.py runs these scenarios on the CPU).
        schedule_small_pool_pages=33, schedule_small_pool_max_model_len=416,
        fidelity_prompt_lengths=(1, 16, 17, 129, 257, 513),  # the CPU float64 fallback stays tractable
    ),
}


def scale_spec(name: str) -> ScaleSpec:
    """The named scale; a clear error lists the known names."""
    try:
        return SCALES[name]
    except KeyError:
        raise ValueError(f"unknown scale {name!r}; choose one of: {', '.join(SCALES)}") from None
