"""Checkpoints: deterministic preset writing, sharded loading, digests, and clear loader errors."""

import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from engine.checkpoint import make_checkpoint, preset_config
from engine.loader import CheckpointError, read_checkpoint, weights_digest
from engine.model_config import ModelConfigError, read_model_spec


def digest(directory):
    return weights_digest(read_checkpoint(directory, read_model_spec(directory)))


def test_a_seed_always_writes_the_same_checkpoint(tmp_path, tiny_dir):
    again = make_checkpoint("tiny", tmp_path / "again", seed=0)
    assert (again / "model.safetensors").read_bytes() == (tiny_dir / "model.safetensors").read_bytes()
    assert digest(make_checkpoint("tiny", tmp_path / "other", seed=1)) != digest(tiny_dir)


def test_sharded_checkpoints_load_with_the_same_digest(tmp_path, tiny_dir):
    sharded = make_checkpoint("tiny", tmp_path / "sharded", seed=0, max_shard_bytes=40_000)
    assert len(list(sharded.glob("*.safetensors"))) > 2 and (sharded / "model.safetensors.index.json").exists()
    assert digest(sharded) == digest(tiny_dir)


def test_preset_configs_follow_the_hugging_face_layouts():
    llama = preset_config("llama-1b")
    assert llama["architectures"] == ["LlamaForCausalLM"] and llama["tie_word_embeddings"] is True
    assert llama["rope_scaling"]["rope_type"] == "llama3" and llama["rope_scaling"]["factor"] == 32.0
    assert (llama["hidden_size"], llama["num_hidden_layers"], llama["num_key_value_heads"]) == (2048, 16, 8)
    assert llama["torch_dtype"] == "bfloat16" and llama["vocab_size"] == 128256
    assert preset_config("small")["architectures"] == ["Qwen2ForCausalLM"]


def test_bfloat16_checkpoints(tmp_path):
    directory = make_checkpoint("tiny", tmp_path / "bf16", dtype="bfloat16")
    spec = read_model_spec(directory)
    assert spec.checkpoint_dtype == "bfloat16" and spec.serving_dtype(None) == "bfloat16"
    assert str(next(iter(load_file(directory / "model.safetensors").values())).dtype) == "torch.bfloat16"


def copy_of(src, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    return dst


def edit_tensors(directory, edit):
    tensors = load_file(directory / "model.safetensors")
    edit(tensors)
    save_file(tensors, directory / "model.safetensors")


def test_a_missing_tensor_is_named(tmp_path, tiny_dir):
    directory = copy_of(tiny_dir, tmp_path)
    edit_tensors(directory, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"missing tensor\(s\) model\.layers\.1\.mlp\.up_proj\.weight"):
        digest(directory)


def test_a_wrong_shape_is_named(tmp_path, tiny_dir):
    directory = copy_of(tiny_dir, tmp_path)
    edit_tensors(directory, lambda t: t.update({"model.norm.weight": t["model.norm.weight"][:10].clone()}))
    with pytest.raises(CheckpointError, match=r"'model\.norm\.weight' has shape \(10,\), config.json implies \(64,\)"):
        digest(directory)


def test_an_unexpected_tensor_is_named(tmp_path, tiny_dir):
    directory = copy_of(tiny_dir, tmp_path)
    edit_tensors(directory, lambda t: t.update({"model.layers.0.self_attn.q_norm.weight": t["model.norm.weight"]
                                                .clone()}))
    with pytest.raises(CheckpointError, match="unexpected tensor.*q_norm"):
        digest(directory)


@pytest.mark.parametrize("change, message", [
    ({"architectures": ["MixtralForCausalLM"]}, "architecture.*MixtralForCausalLM.*not supported"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling type 'yarn'"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"attention_bias": "yes"}, "'attention_bias' must be true or false"),
    ({"num_key_value_heads": 3}, "not a multiple"),
    ({"hidden_size": "64"}, "hidden_size"),
])
def test_unsupported_configs_are_named(tmp_path, tiny_dir, change, message):
    directory = copy_of(tiny_dir, tmp_path)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ModelConfigError, match=message):
        read_model_spec(directory)


@pytest.mark.parametrize("field, text, shown", [
    ("rope_theta", "NaN", "nan"), ("rms_norm_eps", "-Infinity", "-inf"), ("rope_theta", "1e999", "inf"),
    ("rope_scaling", '{"rope_type": "llama3", "factor": NaN}', "nan"),
])
def test_a_non_finite_number_is_named_with_its_field(tmp_path, tiny_dir, field, text, shown):
    directory = copy_of(tiny_dir, tmp_path)
    config = json.loads((directory / "config.json").read_text())
    config[field] = "@@"
    (directory / "config.json").write_text(json.dumps(config).replace('"@@"', text))
    name = "rope_scaling.factor" if field == "rope_scaling" else field
    with pytest.raises(ModelConfigError, match=rf"config\.json: field '{name}' is {shown}, which is not a JSON number"):
        read_model_spec(directory)


def test_a_directory_without_a_checkpoint(tmp_path):
    with pytest.raises(ModelConfigError, match="does not exist"):
        read_model_spec(tmp_path / "nothing")
    with pytest.raises(ModelConfigError, match="no config.json"):
        read_model_spec(tmp_path)
