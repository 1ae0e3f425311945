"""`bitcase generate` with text, and `bitcase model tokenizer`: text in, text out, token ids unchanged."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app
from engine.checkpoint import make_checkpoint
from engine.llm_engine import LLM
from engine.sampling_params import SamplingParams
from engine.tokenizer import Tokenizer

runner = CliRunner()
ENGINE = dict(page_size=16, num_pages=32, max_model_len=64)
ENGINE_ARGS = [arg for name, value in ENGINE.items() for arg in (f"--{name.replace('_', '-')}", str(value))]
TOKENIZER_FILES = ("generation_config.json", "tokenizer.json", "tokenizer_config.json")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def err(result) -> str:
    return " ".join(result.stderr.split())


@pytest.fixture(scope="module")
def ids_only_dir(tmp_path_factory):
    """A checkpoint written without a tokenizer, as bitcase wrote them before it had one."""
    return make_checkpoint("tiny", tmp_path_factory.mktemp("ids_only"), seed=0, tokenizer=False)


def test_generate_encodes_text_and_prints_the_decoded_text(tiny_dir):
    result = invoke("generate", "--model", tiny_dir, "--prompt", "Hello, world", "--prompt", "日本 😀",
                    "--max-tokens", "5", "--ignore-eos", *ENGINE_ARGS)
    assert result.exit_code == 0, result.output
    tok = Tokenizer.from_dir(tiny_dir)
    prompts = [tok.encode("Hello, world"), tok.encode("日本 😀")]
    assert prompts[0][0] == tok.bos_token_id
    expected = LLM(tiny_dir, **ENGINE).generate(prompts, SamplingParams(max_tokens=5, ignore_eos=True))
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    for n, (line, out) in enumerate(zip(lines, expected)):
        index, ids, reason, text = line.split("\t")
        assert (int(index), ids, reason) == (n, ",".join(map(str, out.token_ids)), "length")
        assert json.loads(text) == tok.decode(out.token_ids)


def test_text_and_ids_prompts_file_with_json_text(tmp_path, tiny_dir):
    tok = Tokenizer.from_dir(tiny_dir)
    ids = tok.encode("Once upon a time")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(json.dumps({"prompt": "Once upon a time", "max_tokens": 3}) + "\n"
                       + ",".join(map(str, ids)) + "\n" + json.dumps({"token_ids": ids, "max_tokens": 3}) + "\n")
    result = invoke("generate", "--model", tiny_dir, "--prompts-file", prompts, "--max-tokens", "3",
                    "--ignore-eos", "--json", *ENGINE_ARGS)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [d["prompt_token_ids"] for d in data] == [ids, ids, ids]
    assert data[0]["token_ids"] == data[1]["token_ids"] == data[2]["token_ids"]
    assert [d["text"] for d in data] == [tok.decode(data[0]["token_ids"])] * 3


@pytest.mark.parametrize("line, message", [
    ('{"prompt": "hi", "token_ids": [1]}', "line 1: give exactly one of token_ids"),
    ('{"prompt": [1, 2]}', "line 1: prompt must be text"),
    ('{"max_tokens": 2}', "line 1: give exactly one of token_ids"),
])
def test_prompts_file_text_errors_name_the_line(tmp_path, tiny_dir, line, message):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(line + "\n")
    result = invoke("generate", "--model", tiny_dir, "--prompts-file", prompts, *ENGINE_ARGS)
    assert result.exit_code == 2 and message in err(result), result.stderr
    assert result.stdout == ""


def test_a_checkpoint_without_tokenizer_keeps_working_with_ids(ids_only_dir, tiny_dir):
    result = invoke("generate", "--model", ids_only_dir, "--prompt-ids", "1,2,3", "--max-tokens", "3",
                    "--ignore-eos", "--json", *ENGINE_ARGS)
    assert result.exit_code == 0, result.output
    with_tokenizer = invoke("generate", "--model", tiny_dir, "--prompt-ids", "1,2,3", "--max-tokens", "3",
                            "--ignore-eos", "--json", *ENGINE_ARGS)
    data, other = json.loads(result.stdout)[0], json.loads(with_tokenizer.stdout)[0]
    assert data["text"] is None and data["token_ids"] == other["token_ids"]
    # D does not depend on the tokenizer: the same weights and config.json give the same deployment digest.
    assert err(result).split("deployment ")[1].split()[0] == err(with_tokenizer).split("deployment ")[1].split()[0]
    plain = invoke("generate", "--model", ids_only_dir, "--prompt-ids", "1,2,3", "--max-tokens", "2", *ENGINE_ARGS)
    assert plain.exit_code == 0 and len(plain.stdout.splitlines()[0].split("\t")) == 3


def test_text_without_a_tokenizer_names_the_file_and_the_fix(tmp_path, ids_only_dir):
    result = invoke("generate", "--model", ids_only_dir, "--prompt", "hello", *ENGINE_ARGS)
    assert result.exit_code == 2 and result.stdout == ""
    assert "has no tokenizer.json" in err(result) and "bitcase model tokenizer" in err(result)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text('1,2\n{"prompt": "hello"}\n')
    result = invoke("generate", "--model", ids_only_dir, "--prompts-file", prompts, *ENGINE_ARGS)
    assert result.exit_code == 2 and "line 2: " in err(result) and "has no tokenizer.json" in err(result)


def test_a_broken_tokenizer_warns_and_ids_still_work(tmp_path, tiny_dir):
    model = tmp_path / "m"
    shutil.copytree(tiny_dir, model)
    (model / "tokenizer.json").write_text("{broken")
    result = invoke("generate", "--model", model, "--prompt-ids", "1,2", "--max-tokens", "2", *ENGINE_ARGS)
    assert result.exit_code == 0 and "warning: no text output" in err(result)
    result = invoke("generate", "--model", model, "--prompt", "hi", *ENGINE_ARGS)
    assert result.exit_code == 2 and "tokenizer.json: not a tokenizer" in err(result)


def test_generate_refuses_two_prompt_sources(tiny_dir):
    result = invoke("generate", "--model", tiny_dir, "--prompt", "a", "--prompt-ids", "1", *ENGINE_ARGS)
    assert result.exit_code == 2 and "exactly one of --prompt, --prompt-ids or --prompts-file" in err(result)


def test_model_tokenizer_adds_a_tokenizer_to_an_existing_checkpoint(tmp_path, ids_only_dir, tiny_dir):
    model = tmp_path / "m"
    shutil.copytree(ids_only_dir, model)
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    result = invoke("model", "tokenizer", model)
    assert result.exit_code == 0, result.output
    path, digest = result.stdout.strip().split("\t")
    assert digest == Tokenizer.from_dir(tiny_dir).digest
    for name in TOKENIZER_FILES:  # the same bytes as `model make` writes
        assert (model / name).read_bytes() == (tiny_dir / name).read_bytes()
    assert all((model / name).read_bytes() == data for name, data in before.items())
    again = invoke("model", "tokenizer", model)
    assert again.exit_code == 2 and "--force" in err(again)
    assert invoke("model", "tokenizer", model, "--force").exit_code == 0
    info = json.loads(invoke("model", "info", model, "--json").stdout)
    assert info["tokenizer_digest"] == digest and info["tokenizer_vocab_size"] == 256 and info["has_chat_template"]
    assert json.loads(invoke("model", "info", ids_only_dir, "--json").stdout)["tokenizer_digest"] is None


def test_model_tokenizer_errors(tmp_path):
    result = invoke("model", "tokenizer", tmp_path)
    assert result.exit_code == 2 and "has no config.json" in err(result)
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 100, "bos_token_id": 1, "eos_token_id": 2}))
    result = invoke("model", "tokenizer", tmp_path)
    assert result.exit_code == 2 and "needs at least 243" in err(result)


def test_model_make_writes_the_same_tokenizer_bytes_twice(tmp_path):
    for name in ("a", "b"):
        assert invoke("model", "make", tmp_path / name, "--preset", "tiny").exit_code == 0
    for name in TOKENIZER_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
