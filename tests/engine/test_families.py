"""Qwen3 and Mistral checkpoints: presets, config.json fields read as transformers reads them, refusals, D."""

import json
import shutil
from dataclasses import replace

import pytest
from safetensors.torch import load_file

from engine.checkpoint import PRESET_FAMILIES, make_checkpoint, preset_config
from engine.deployment import current_deployment
from engine.loader import CheckpointError, expected_shapes, read_checkpoint
from engine.model_config import ModelConfigError, read_model_spec
from kernels.plan import plan_for, preset_plan
from kernels.shapes import PRESETS


def with_config(src, tmp_path, change=None, drop=()):
    """A copy of checkpoint ``src`` whose config.json has ``change`` applied and ``drop`` removed."""
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    config = {**json.loads((dst / "config.json").read_text()), **(change or {})}
    for name in drop:
        config.pop(name)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def test_every_preset_names_its_family():
    assert sorted(PRESET_FAMILIES) == sorted(PRESETS)
    for name in PRESETS:
        config = preset_config(name)
        assert config["model_type"] == PRESET_FAMILIES[name]
        assert config["architectures"][0].lower().startswith(PRESET_FAMILIES[name].removesuffix("_text"))


def test_real_shape_presets_follow_qwen3_0_6b_and_mistral_7b_v0_3():
    qwen = preset_config("qwen3-0.6b")
    assert qwen["architectures"] == ["Qwen3ForCausalLM"] and qwen["torch_dtype"] == "bfloat16"
    assert (qwen["hidden_size"], qwen["num_hidden_layers"], qwen["num_attention_heads"], qwen["num_key_value_heads"],
            qwen["head_dim"], qwen["intermediate_size"], qwen["vocab_size"]) == (1024, 28, 16, 8, 128, 3072, 151936)
    assert qwen["tie_word_embeddings"] is True and qwen["rope_theta"] == 1e6 and qwen["attention_bias"] is False
    assert qwen["use_sliding_window"] is False and qwen["sliding_window"] is None
    mistral = preset_config("mistral-7b")
    assert mistral["architectures"] == ["MistralForCausalLM"] and mistral["sliding_window"] is None
    assert (mistral["hidden_size"], mistral["num_hidden_layers"], mistral["num_attention_heads"],
            mistral["num_key_value_heads"], mistral["intermediate_size"], mistral["vocab_size"]) == \
        (4096, 32, 32, 8, 14336, 32768)
    assert mistral["tie_word_embeddings"] is False and mistral["rope_theta"] == 1e6


def test_qwen3_spec_and_tensors(qwen3_tiny_dir):
    spec = read_model_spec(qwen3_tiny_dir)
    assert spec.architecture == "Qwen3ForCausalLM" and spec.has_qk_norm and spec.tie_word_embeddings
    assert (spec.head_dim, spec.hidden_size // spec.num_heads) == (32, 16)  # explicit head_dim wins
    assert not spec.has_qkv_bias and not spec.has_o_proj_bias
    shapes = expected_shapes(spec)
    assert shapes["model.layers.1.self_attn.q_norm.weight"] == shapes["model.layers.1.self_attn.k_norm.weight"] == (32,)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (128, 64) and "lm_head.weight" not in shapes
    assert set(read_checkpoint(qwen3_tiny_dir, spec)) == set(shapes)


def test_the_qk_norm_and_o_proj_bias_entries_are_in_the_plan(qwen3_tiny_dir):
    plan = preset_plan("qwen3-tiny")
    assert plan.entry("rms_norm.h32").roles == ("qk_norm",)
    assert "rms_norm.h16" not in preset_plan("mistral-tiny").keys()
    without = plan_for(replace(PRESETS["qwen3-tiny"], has_qk_norm=False))
    assert set(plan.keys()) - set(without.keys()) == {"rms_norm.h32"} and without.digest != plan.digest
    biased = plan_for(replace(PRESETS["qwen3-tiny"], has_o_proj_bias=True))
    # o_proj is a split-K pair here: biased, its own combine adds the bias; unbiased, the norm after it folds it
    assert "o_proj" in biased.entry("matmul_combine.n64_s4_bias").roles
    assert biased.entry("matmul_combine_norm.h64_s4").roles == ("down_proj_fold",)
    assert set(plan.entry("matmul_combine_norm.h64_s4").roles) == {"o_proj_fold", "down_proj_fold"}
    spec = read_model_spec(qwen3_tiny_dir)
    assert spec.shape(page_size=16, dtype="float32") == PRESETS["qwen3-tiny"]


def test_q_k_norms_are_required_by_qwen3_and_refused_elsewhere(tmp_path, qwen3_tiny_dir, mistral_tiny_dir):
    directory = with_config(qwen3_tiny_dir, tmp_path, {"architectures": ["MistralForCausalLM"]})
    with pytest.raises(CheckpointError, match="unexpected tensor.*k_norm"):
        read_checkpoint(directory, read_model_spec(directory))
    shutil.rmtree(directory)
    directory = with_config(mistral_tiny_dir, tmp_path, {**preset_config("mistral-tiny"),
                                                         "architectures": ["Qwen3ForCausalLM"]})
    with pytest.raises(CheckpointError, match=r"missing tensor\(s\) model\.layers\.0\.self_attn\.k_norm\.weight"):
        read_checkpoint(directory, read_model_spec(directory))


def test_qwen3_head_dim_defaults_to_128_as_in_transformers(tmp_path, qwen3_tiny_dir):
    directory = with_config(qwen3_tiny_dir, tmp_path, drop=["head_dim"])
    spec = read_model_spec(directory)
    assert spec.head_dim == 128
    with pytest.raises(CheckpointError, match=r"q_proj\.weight' has shape \(128, 64\), config.json implies \(512"):
        read_checkpoint(directory, spec)


def test_attention_bias_puts_biases_on_q_k_v_and_o_proj(tmp_path, qwen3_tiny_dir):
    directory = with_config(qwen3_tiny_dir, tmp_path, {"attention_bias": True})
    spec = read_model_spec(directory)
    assert spec.has_qkv_bias and spec.has_o_proj_bias
    assert expected_shapes(spec)["model.layers.0.self_attn.o_proj.bias"] == (64,)
    with pytest.raises(CheckpointError, match=r"missing tensor\(s\) model\.layers\.0\.self_attn\.k_proj\.bias"):
        read_checkpoint(directory, spec)


def test_mistral_spec(tmp_path, mistral_tiny_dir):
    spec = read_model_spec(mistral_tiny_dir)
    assert spec.architecture == "MistralForCausalLM" and not spec.has_qk_norm and not spec.has_qkv_bias
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.rope_theta) == (4, 1, 16, 1e6)
    assert spec.shape(page_size=16, dtype="float32") == PRESETS["mistral-tiny"]
    # transformers' Mistral has no attention_bias field, so a stray one changes nothing
    stray = read_model_spec(with_config(mistral_tiny_dir, tmp_path, {"attention_bias": True}))
    assert not stray.has_qkv_bias and not stray.has_o_proj_bias and stray.config_digest != spec.config_digest


@pytest.mark.parametrize("window", [2048, 4096])
def test_a_mistral_window_no_prompt_can_reach_is_full_attention(tmp_path, mistral_tiny_dir, window):
    directory = with_config(mistral_tiny_dir, tmp_path, {"sliding_window": window})  # max_position_embeddings 2048
    assert read_model_spec(directory).architecture == "MistralForCausalLM"


@pytest.mark.parametrize("change, drop, windows", [
    ({"sliding_window": 1024}, (), (1024, 1024)),
    ({"max_position_embeddings": 32768}, ["sliding_window"], (4096, 4096)),  # transformers' default 4096
])
def test_a_mistral_window_below_the_positions_windows_every_layer(tmp_path, mistral_tiny_dir, change, drop, windows):
    spec = read_model_spec(with_config(mistral_tiny_dir, tmp_path, change, drop))
    assert spec.layer_windows == windows and spec.sliding_rope_theta is None
    assert spec.shape(page_size=16, dtype="float32").attention_windows == (windows[0],)
    assert spec.layer_rope(1) == (1e6, None)  # the windowed layers keep Mistral's RoPE


@pytest.mark.parametrize("family_dir, change, drop, message", [
    ("mistral", {"sliding_window": 0}, (), "'sliding_window' must be a positive integer or null"),
    ("mistral", {"sliding_window": "4096"}, (), "'sliding_window' must be a positive integer or null"),
    ("qwen3", {"use_sliding_window": True, "sliding_window": 64}, (), "use_sliding_window=true is not supported"),
    ("qwen3", {"layer_types": ["full_attention", "sliding_attention"]}, (),
     "layer_types has 'sliding_attention'; Qwen3ForCausalLM layers must all be 'full_attention'"),
    ("qwen3", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, (), "rope_scaling type 'yarn' is not supported"),
    ("qwen3", {"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e6}}, (),
     "rope_parameters type 'dynamic' is not supported"),
    ("qwen3", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e6, "factor": 8.0, "low_freq_factor": 4.0,
                                   "high_freq_factor": 1.0, "original_max_position_embeddings": 64}}, (),
     "rope_parameters needs high_freq_factor > low_freq_factor"),
    ("qwen3", {"attention_bias": 1}, (), "'attention_bias' must be true or false"),
    ("qwen3", {"head_dim": 31}, (), "head_dim 31 must be even"),
    ("qwen3", {"hidden_act": "gelu_pytorch_tanh"}, (), "hidden_act 'gelu_pytorch_tanh' is not supported"),
    ("qwen3", {"architectures": ["Qwen3MoeForCausalLM"]}, (), "architecture.*Qwen3MoeForCausalLM.*not supported"),
])
def test_what_the_engine_would_compute_differently_is_refused(tmp_path, request, family_dir, change, drop, message):
    source = request.getfixturevalue(f"{family_dir}_tiny_dir")
    with pytest.raises(ModelConfigError, match=message):
        read_model_spec(with_config(source, tmp_path, change, drop))


def test_transformers_5_rope_parameters_and_dtype_keys(tmp_path, qwen3_tiny_dir):
    directory = with_config(qwen3_tiny_dir, tmp_path, {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5},
                                                       "dtype": "bfloat16"}, drop=["rope_theta", "torch_dtype"])
    spec = read_model_spec(directory)
    assert spec.rope_theta == 5e5 and spec.rope_scaling is None and spec.checkpoint_dtype == "bfloat16"


@pytest.mark.parametrize("name, architecture", [("qwen3-tiny", "Qwen3ForCausalLM"),
                                                ("mistral-tiny", "MistralForCausalLM")])
def test_d_names_the_architecture_and_the_family_plan(tmp_path, name, architecture):
    directory = make_checkpoint(name, tmp_path / name, seed=0, tokenizer=False)
    fields = current_deployment(directory).fields
    assert fields["model"]["architecture"] == architecture
    assert fields["kernel_plan"]["name"] == name and fields["kernel_plan"]["digest"] == preset_plan(name).digest


def test_preset_checkpoints_carry_a_tokenizer_of_their_vocabulary(qwen3_tiny_dir, mistral_tiny_dir):
    from engine.tokenizer import Tokenizer

    for directory in (qwen3_tiny_dir, mistral_tiny_dir):
        tokenizer = Tokenizer.from_dir(directory)
        assert tokenizer.vocab_size == read_model_spec(directory).vocab_size
        assert tokenizer.decode(tokenizer.encode("Hello, world")).endswith("Hello, world")
        assert len(load_file(directory / "model.safetensors")) == len(expected_shapes(read_model_spec(directory)))


def test_model_make_lists_and_writes_the_family_presets(tmp_path):
    from typer.testing import CliRunner

    from assurance.cli.main import app

    runner = CliRunner()
    # wide enough that rich does not cut the choices; the width itself is tests/test_terminal_width.py's
    shown = " ".join(runner.invoke(app, ["model", "make", "--help"], env={"COLUMNS": "300"}).stdout.split())
    assert all(name in shown for name in PRESETS), shown
    made = runner.invoke(app, ["model", "make", str(tmp_path / "q"), "--preset", "qwen3-tiny"])
    assert made.exit_code == 0, made.output
    info = json.loads(runner.invoke(app, ["model", "info", str(tmp_path / "q"), "--json"]).stdout)
    assert info["architecture"] == "Qwen3ForCausalLM" and info["has_qk_norm"] is True and info["head_dim"] == 32
    assert made.stdout.strip().split("\t")[1] == info["weights_digest"]
