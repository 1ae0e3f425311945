"""Gemma3 checkpoints: config.json read with transformers' keys and defaults (both RoPE layouts,
layer_types or sliding_window_pattern), refusals naming the field, presets, tensors, plan and D."""

import json

import pytest

from engine.checkpoint import make_checkpoint, preset_config
from engine.deployment import current_deployment
from engine.loader import CheckpointError, expected_shapes, read_checkpoint
from engine.model_config import ModelConfigError, read_model_spec
from kernels.plan import preset_plan
from kernels.shapes import PRESETS
from tests.engine.test_families import with_config

# the transformers 4 layout of gemma3-tiny's RoPE (the preset writes the transformers 5 one)
V4_ROPE = {"rope_theta": 1e6, "rope_local_base_freq": 1e4, "rope_scaling": None}


def test_gemma3_tiny_spec_and_shape(gemma3_tiny_dir):
    spec = read_model_spec(gemma3_tiny_dir)
    assert spec.architecture == "Gemma3ForCausalLM" and spec.is_gemma3 and spec.has_qk_norm and spec.tie_word_embeddings
    assert spec.layer_windows == (32, 32, 32, 0) and spec.query_pre_attn_scalar == 64.0
    assert spec.layer_rope(0) == (1e4, None) and spec.layer_rope(3) == (1e6, None)
    assert spec.shape(page_size=16, dtype="float32") == PRESETS["gemma3-tiny"]
    shapes = expected_shapes(spec)
    assert shapes["model.layers.3.pre_feedforward_layernorm.weight"] == (64,)
    assert shapes["model.layers.3.post_feedforward_layernorm.weight"] == (64,)
    assert shapes["model.layers.0.self_attn.q_norm.weight"] == (32,) and "lm_head.weight" not in shapes
    assert set(read_checkpoint(gemma3_tiny_dir, spec)) == set(shapes)


def test_the_older_layout_reads_the_same(tmp_path, gemma3_tiny_dir):
    """sliding_window_pattern and rope_theta / rope_local_base_freq, as Gemma3-1B's own config.json."""
    directory = with_config(gemma3_tiny_dir, tmp_path, {**V4_ROPE, "sliding_window_pattern": 4},
                            drop=["layer_types", "rope_parameters"])
    spec, new = read_model_spec(directory), read_model_spec(gemma3_tiny_dir)
    assert (spec.layer_windows, spec.layer_rope(0), spec.layer_rope(3)) == \
        (new.layer_windows, new.layer_rope(0), new.layer_rope(3))
    assert spec.config_digest != new.config_digest  # D still tells the two files apart


def test_transformers_defaults_fill_what_the_config_leaves_out(tmp_path, gemma3_tiny_dir):
    directory = with_config(gemma3_tiny_dir, tmp_path, {"num_hidden_layers": 12},
                            drop=["layer_types", "rope_parameters", "sliding_window", "query_pre_attn_scalar",
                                  "tie_word_embeddings", "hidden_activation", "final_logit_softcapping"])
    spec = read_model_spec(directory)
    # pattern 6: layers 5 and 11 full; window 4096; RoPE bases 1e4 (local) and 1e6 (global); scalar 256
    assert spec.layer_windows == tuple(0 if i in (5, 11) else 4096 for i in range(12))
    assert spec.layer_rope(0) == (1e4, None) and spec.layer_rope(5) == (1e6, None)
    assert spec.query_pre_attn_scalar == 256.0 and spec.tie_word_embeddings and spec.final_logit_softcap == 0.0
    assert spec.shape(page_size=16, dtype="float32").attention_scale == 256 ** -0.5


def test_linear_rope_scaling_applies_to_the_full_layers_in_either_layout(tmp_path, gemma3_tiny_dir):
    old = with_config(gemma3_tiny_dir, tmp_path / "old", {**V4_ROPE, "rope_scaling": {"rope_type": "linear",
                                                                                       "factor": 8.0}},
                      drop=["rope_parameters"])
    new = with_config(gemma3_tiny_dir, tmp_path / "new", {"rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}})
    for directory in (old, new):
        spec = read_model_spec(directory)
        assert spec.layer_rope(3) == (1e6, {"factor": 8.0, "rope_type": "linear"})
        assert spec.layer_rope(0) == (1e4, None)


def test_final_logit_softcapping_is_read_into_the_plan(tmp_path, gemma3_tiny_dir):
    spec = read_model_spec(with_config(gemma3_tiny_dir, tmp_path, {"final_logit_softcapping": 30.0}))
    assert spec.final_logit_softcap == 30.0
    assert spec.shape(page_size=16, dtype="float32").final_logit_softcap == 30.0


@pytest.mark.parametrize("change, drop, message", [
    ({"attn_logit_softcapping": 50.0}, (), "attn_logit_softcapping 50.0 is not supported for Gemma3: transformers' "
                                           "Gemma3 attention ignores it"),
    ({"hidden_activation": "gelu"}, (), "hidden_activation 'gelu' is not supported for Gemma3"),
    ({"use_bidirectional_attention": True}, (), "use_bidirectional_attention=true is not supported"),
    ({"layer_types": ["sliding_attention"] * 3}, (), r"layer_types must be a list of num_hidden_layers \(4\)"),
    ({"layer_types": ["sliding_attention"] * 3 + ["chunked_attention"]}, (), "layer_types has 'chunked_attention'"),
    ({"sliding_window": None}, (), "sliding_window is null but layer_types has 'sliding_attention'"),
    ({"sliding_window": 0}, (), "'sliding_window' must be a positive integer"),
    ({"sliding_window_pattern": 0}, ["layer_types"], "'sliding_window_pattern' must be a positive integer"),
    ({"query_pre_attn_scalar": -1}, (), "'query_pre_attn_scalar' must be a positive number"),
    ({"final_logit_softcapping": 0}, (), "'final_logit_softcapping' must be a positive number"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}, (),
     "rope_parameters must be an object keyed by full_attention and sliding_attention"),
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 4.0}}}, (),
     "rope_parameters.full_attention type 'yarn' is not supported"),
    ({**V4_ROPE, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, ["rope_parameters"],
     "rope_scaling type 'dynamic' is not supported"),
    ({**V4_ROPE, "rope_local_base_freq": 0}, ["rope_parameters"], "'rope_local_base_freq' must be a positive number"),
    ({"architectures": ["Gemma3ForConditionalGeneration"]}, (), "Gemma3ForConditionalGeneration.*not supported"),
])
def test_what_the_engine_would_compute_differently_is_refused(tmp_path, gemma3_tiny_dir, change, drop, message):
    with pytest.raises(ModelConfigError, match=message):
        read_model_spec(with_config(gemma3_tiny_dir, tmp_path, change, drop))


def test_the_gemma_norms_are_required(tmp_path, gemma3_tiny_dir):
    directory = with_config(gemma3_tiny_dir, tmp_path, {"architectures": ["Qwen3ForCausalLM"], "hidden_act": "silu",
                                                        "rope_theta": 1e6}, drop=["layer_types", "rope_parameters"])
    with pytest.raises(CheckpointError, match="unexpected tensor.*feedforward_layernorm"):
        read_checkpoint(directory, read_model_spec(directory))


def test_gemma3_1b_preset_follows_the_real_config():
    config = preset_config("gemma3-1b")
    assert config["architectures"] == ["Gemma3ForCausalLM"] and config["model_type"] == "gemma3_text"
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["head_dim"], config["intermediate_size"], config["vocab_size"]) == \
        (1152, 26, 4, 1, 256, 6912, 262144)
    assert (config["sliding_window"], config["sliding_window_pattern"], config["rope_theta"],
            config["rope_local_base_freq"], config["query_pre_attn_scalar"], config["rms_norm_eps"],
            config["max_position_embeddings"], config["torch_dtype"]) == \
        (512, 6, 1e6, 1e4, 256, 1e-6, 32768, "bfloat16")
    assert "hidden_act" not in config and config["hidden_activation"] == "gelu_pytorch_tanh"


def test_gemma3_1b_shape_and_plan():
    shape = PRESETS["gemma3-1b"]
    assert shape.attention_windows == (0, 512) and shape.attention_scale == 256 ** -0.5
    keys = preset_plan("gemma3-1b").keys()
    assert "embedding.v262144_h1152_scaled" in keys and "gelu_tanh_mul.i6912" in keys
    assert {"rms_norm.h1152_offset", "rms_norm.h1152_residual_offset", "rms_norm.h256_offset"} <= set(keys)
    assert not any(k.startswith(("silu_mul", "matmul_combine_norm", "logit_softcap")) for k in keys)
    # the full layers' walk and the window's, each with its decode bucket's
    assert sum(k.startswith("paged_attention.") for k in keys) == 4


def test_d_names_gemma3_and_its_plan(tmp_path):
    directory = make_checkpoint("gemma3-tiny", tmp_path / "g", seed=0, tokenizer=False)
    fields = current_deployment(directory).fields
    assert fields["model"]["architecture"] == "Gemma3ForCausalLM"
    assert fields["kernel_plan"]["name"] == "gemma3-tiny"
    assert fields["kernel_plan"]["digest"] == preset_plan("gemma3-tiny").digest
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "sliding_window": 48}))
    changed = current_deployment(directory).fields
    assert changed["model"]["config_digest"] != fields["model"]["config_digest"]
    assert changed["kernel_plan"]["digest"] != fields["kernel_plan"]["digest"]  # a _w48 entry, not _w32


def test_gemma3_1b_config_reads_back_as_its_shape(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(preset_config("gemma3-1b")))
    spec = read_model_spec(tmp_path)
    assert spec.shape(page_size=16, dtype="bfloat16") == PRESETS["gemma3-1b"]
    assert spec.layer_windows == tuple(0 if (i + 1) % 6 == 0 else 512 for i in range(26))
    assert spec.layer_rope(0) == (1e4, None) and spec.layer_rope(5) == (1e6, None)
