"""`bitcase model` and `bitcase generate`: output on stdout, diagnostics on stderr, exit codes 0 and 2."""

import json

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app
from engine.llm_engine import LLM
from engine.sampling_params import SamplingParams
from engine.tokenizer import Tokenizer

runner = CliRunner()
ENGINE = dict(page_size=16, num_pages=32, max_model_len=64)
ENGINE_ARGS = [arg for name, value in ENGINE.items() for arg in (f"--{name.replace('_', '-')}", str(value))]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def err(result) -> str:
    """stderr with the console's line wrapping undone."""
    return " ".join(result.stderr.split())


def test_model_make_writes_a_deterministic_checkpoint(tmp_path, tiny_dir):
    result = invoke("model", "make", tmp_path / "m", "--preset", "tiny", "--seed", "0")
    assert result.exit_code == 0, result.output
    path, digest = result.stdout.strip().split("\t")
    info = json.loads(invoke("model", "info", tiny_dir, "--json").stdout)
    assert digest == info["weights_digest"] and info["architecture"] == "LlamaForCausalLM"
    again = invoke("model", "make", tmp_path / "m", "--preset", "tiny")
    assert again.exit_code == 2 and "--force" in again.stderr
    forced = invoke("model", "make", tmp_path / "m", "--preset", "tiny", "--seed", "3", "--force")
    assert forced.exit_code == 0 and forced.stdout.split("\t")[1] != digest


@pytest.mark.parametrize("args, message", [
    (["--preset", "huge"], "'huge' is not one of 'tiny'"), (["--dtype", "float16"], "float16"),
])
def test_model_make_refuses_bad_options(tmp_path, args, message):
    result = invoke("model", "make", tmp_path / "m", *args)
    assert result.exit_code == 2 and message in err(result)


def test_model_info_of_a_missing_checkpoint(tmp_path):
    result = invoke("model", "info", tmp_path)
    assert result.exit_code == 2 and "no config.json" in err(result)


def test_a_nan_in_config_json_names_the_file_and_field(tmp_path, tiny_dir):
    import shutil

    shutil.copytree(tiny_dir, tmp_path / "m")
    config = tmp_path / "m" / "config.json"
    config.write_text(config.read_text().replace('"rope_theta": 10000.0', '"rope_theta": NaN'))
    for args in (["model", "info", tmp_path / "m"],
                 ["compare", "--model", tmp_path / "m", "--out", tmp_path / "x.jsonl"]):
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert f"{config}: field 'rope_theta' is nan, which is not a JSON number" in err(result)
        assert "Traceback" not in result.output and "not JSON compliant" not in result.output
    assert not (tmp_path / "x.jsonl").exists()


def test_generate_prints_the_engines_tokens(tiny_dir):
    result = invoke("generate", "--model", tiny_dir, "--prompt-ids", "1,2,3", "--max-tokens", "4", "--ignore-eos",
                    *ENGINE_ARGS)
    assert result.exit_code == 0, result.output
    expected = LLM(tiny_dir, **ENGINE).generate(
        [[1, 2, 3]], SamplingParams(max_tokens=4, ignore_eos=True))[0]
    text = json.dumps(Tokenizer.from_dir(tiny_dir).decode(expected.token_ids), ensure_ascii=False)
    assert result.stdout == f"0\t{','.join(map(str, expected.token_ids))}\tlength\t{text}\n"
    assert "deployment sha256:" in err(result)


def test_generate_with_padded_decode_overlapped_or_not_prints_the_same_tokens(tiny_dir):
    outputs = []
    for flag in ("--overlap-decode", "--no-overlap-decode"):
        result = invoke("generate", "--model", tiny_dir, "--prompt-ids", "1,2,3", "--max-tokens", "6", "--ignore-eos",
                        "--cuda-graphs", flag, "--json", *ENGINE_ARGS)
        assert result.exit_code == 0, result.output
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1] and len(outputs[0][0]["token_ids"]) == 6


def test_generate_reads_a_prompts_file_and_prints_json_in_input_order(tmp_path, tiny_dir):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text('5,6,7,8,9\n\n{"token_ids": [1, 2], "temperature": 0.8, "seed": 9, "max_tokens": 2}\n3\n')
    result = invoke("generate", "--model", tiny_dir, "--prompts-file", prompts, "--max-tokens", "3",
                    "--ignore-eos", "--json", *ENGINE_ARGS)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [d["index"] for d in data] == [0, 1, 2]
    assert [d["prompt_token_ids"] for d in data] == [[5, 6, 7, 8, 9], [1, 2], [3]]
    assert [len(d["token_ids"]) for d in data] == [3, 2, 3]
    assert data[1]["sampler_state"] == {"seed": 9, "counter": 2}


@pytest.mark.parametrize("content, message", [
    ("1,2,x\n", "line 1: 'x' is not an integer"),
    ('1,2\n{"token_ids": [1], "temprature": 1}\n', "line 2: unknown field(s) temprature"),
    ('{"token_ids": [1], "top_p": 2}\n', "line 1: top_p must be in (0, 1]"),
    ("{not json\n", "line 1: not valid JSON"),
    ("1,2\n300\n", "request 2: prompt token 0 is 300"),
    ("\n", "no requests"),
])
def test_generate_names_the_bad_line(tmp_path, tiny_dir, content, message):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(content)
    result = invoke("generate", "--model", tiny_dir, "--prompts-file", prompts, *ENGINE_ARGS)
    assert result.exit_code == 2 and message in err(result), result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("args, message", [
    ([], "exactly one of --prompt, --prompt-ids or --prompts-file"),
    (["--prompt-ids", ""], "no token ids"),
    (["--prompt-ids", "1", "--max-tokens", "100"], "needs 101 positions"),
    (["--prompt-ids", "1", "--temperature", "-1"], "temperature"),
    (["--prompt-ids", "1", "--page-size", "0"], "page_size"),
    (["--prompt-ids", "1", "--expect-deployment", "sha256:00"], "refusing to serve"),
])
def test_generate_refuses_bad_input(tiny_dir, args, message):
    result = invoke("generate", "--model", tiny_dir, *ENGINE_ARGS, *args)
    assert result.exit_code == 2 and message in err(result), result.stderr


def test_generate_without_a_checkpoint(tmp_path):
    result = invoke("generate", "--model", tmp_path, "--prompt-ids", "1")
    assert result.exit_code == 2 and "bitcase model make" in err(result)
