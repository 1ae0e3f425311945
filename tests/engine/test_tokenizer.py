"""The Hugging Face tokenizer: round trips, special tokens, token pieces, chat template, errors."""

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st

from engine.checkpoint import preset_config
from engine.detokenize import DetokenizeStream
from engine.tokenizer import ChatMessage, Tokenizer, TokenizerError
from engine.tokenizer_make import write_tokenizer

TEXTS = ["", "Hello, world!", "  leading and trailing  ", "line\nbreaks\r\nand\ttabs",
         "naïve café — “quotes”", "日本語のテキスト", "emoji 😀👍🏽 and a family 👨‍👩‍👧‍👦",
         "non-BMP 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠜎 𝄞", "\x00\x01 control \x7f", "numbers 1234567 3.14159"]


def _tokenizer_dir(root: Path, preset: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(preset_config(preset)), encoding="utf-8")
    write_tokenizer(root)
    return root


@pytest.fixture(scope="module")
def tiny_tok_dir(tmp_path_factory) -> Path:
    return _tokenizer_dir(tmp_path_factory.mktemp("tok") / "tiny", "tiny")


@pytest.fixture(scope="module")
def small_tok_dir(tmp_path_factory) -> Path:
    return _tokenizer_dir(tmp_path_factory.mktemp("tok") / "small", "small")


@pytest.fixture(scope="module", params=["tiny", "small"])
def tok(request, tiny_tok_dir, small_tok_dir) -> Tokenizer:
    return Tokenizer.from_dir(tiny_tok_dir if request.param == "tiny" else small_tok_dir)


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(tok, text):
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    assert b"".join(tok.token_bytes(i) for i in ids) == text.encode("utf-8")


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=60))
@example("say <|python_tag|> then <|eot_id|>")
@settings(max_examples=150, deadline=None)
def test_any_text_round_trips(tiny_tok_dir, text):
    """Any text comes back from its ids. A special token written in the text (``<|eot_id|>``) is read as
    that token, as transformers and vLLM read it, so skipping special tokens drops exactly those ids."""
    tok = Tokenizer.from_dir(tiny_tok_dir)
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=False) == text
    assert tok.decode(ids) == tok.decode([i for i in ids if i not in tok.special_token_ids],
                                         skip_special_tokens=False)


def test_vocabulary_and_special_ids_match_config(tok):
    config = json.loads((tok.model_dir / "config.json").read_text())
    assert tok.vocab_size == config["vocab_size"]
    assert tok.bos_token_id == config["bos_token_id"] == 1
    assert tok.eos_token_ids[0] == config["eos_token_id"]
    eot = tok.encode("<|eot_id|>", add_special_tokens=False)
    assert len(eot) == 1 and eot[0] in tok.eos_token_ids and eot[0] in tok.special_token_ids


def test_special_tokens_added_and_skipped(tok):
    ids = tok.encode("hi")
    assert ids[0] == tok.bos_token_id and ids[1:] == tok.encode("hi", add_special_tokens=False)
    assert tok.decode(ids) == "hi"
    assert tok.decode(ids, skip_special_tokens=False) == "<|begin_of_text|>hi"
    assert tok.token_text(tok.bos_token_id) == "<|begin_of_text|>"


def test_special_token_text_in_input_is_the_special_token(tok):
    # As in tokenizers and transformers: text spelling a special token encodes to that token.
    ids = tok.encode("<|begin_of_text|> typed", add_special_tokens=False)
    assert ids[0] == tok.bos_token_id
    assert tok.decode(ids, skip_special_tokens=False) == "<|begin_of_text|> typed"
    assert tok.decode(ids) == " typed"


def test_token_pieces_of_a_split_character(tiny_tok_dir):
    tok = Tokenizer.from_dir(tiny_tok_dir)
    ids = tok.encode("€", add_special_tokens=False)  # E2 82 AC: three byte tokens in the tiny vocabulary
    assert [tok.token_bytes(i) for i in ids] == [b"\xe2", b"\x82", b"\xac"]
    assert [tok.token_text(i) for i in ids] == ["bytes:\\xe2", "bytes:\\x82", "bytes:\\xac"]
    assert tok.decode(ids[:1]) == "\ufffd"
    space = tok.encode(" ", add_special_tokens=False)
    assert [tok.token_text(i) for i in space] == [" "]


def test_chat_template_renders_llama3_format(tok):
    messages = [ChatMessage("system", "Be brief."), ChatMessage("user", "  What is 2+2? \n")]
    expected = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert tok.has_chat_template
    assert tok.apply_chat_template(messages) == expected
    without_prompt = expected.rsplit("<|start_header_id|>", 1)[0]
    assert tok.apply_chat_template(messages, add_generation_prompt=False) == without_prompt
    ids = tok.encode(expected, add_special_tokens=False)
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1


@given(st.lists(st.integers(min_value=0, max_value=255), max_size=40))
@settings(max_examples=200, deadline=None)
def test_stream_deltas_concatenate_to_decode(tiny_tok_dir, ids):
    tok = Tokenizer.from_dir(tiny_tok_dir)
    for skip in (True, False):
        stream = DetokenizeStream(tok, skip_special_tokens=skip)
        deltas = [stream.push(i) for i in ids]
        assert "".join(deltas) + stream.finish() == tok.decode(ids, skip_special_tokens=skip)


def test_stream_holds_back_incomplete_characters(tiny_tok_dir):
    tok = Tokenizer.from_dir(tiny_tok_dir)
    stream = DetokenizeStream(tok)
    ids = tok.encode("a😀b", add_special_tokens=False)
    deltas = [stream.push(i) for i in ids]
    assert deltas == ["a", "", "", "", "😀", "b"] and stream.finish() == ""


def test_missing_tokenizer_names_the_file_and_the_fix(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(preset_config("tiny")))
    with pytest.raises(TokenizerError, match=r"has no tokenizer\.json.*bitcase model tokenizer"):
        Tokenizer.from_dir(tmp_path)
    with pytest.raises(TokenizerError, match="does not exist"):
        Tokenizer.from_dir(tmp_path / "nowhere")


def test_broken_files_are_clear_errors(tmp_path, tiny_tok_dir):
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(TokenizerError, match=r"tokenizer\.json: not a tokenizer"):
        Tokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer.json").write_bytes((tiny_tok_dir / "tokenizer.json").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text("[1, 2]")
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json: the top level must be a JSON object"):
        Tokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("{}")
    tok = Tokenizer.from_dir(tmp_path)
    assert not tok.has_chat_template
    with pytest.raises(TokenizerError, match="has no chat_template"):
        tok.apply_chat_template([ChatMessage("user", "hi")])


def test_bad_ids_and_text_are_clear_errors(tok):
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.decode([0, tok.vocab_size])
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.token_text(-1)
    with pytest.raises(TokenizerError, match="lone surrogate"):
        tok.encode("a\ud800b")


def test_digest_covers_the_tokenizer_files(tmp_path, tiny_tok_dir):
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        (tmp_path / name).write_bytes((tiny_tok_dir / name).read_bytes())
    before = Tokenizer.from_dir(tmp_path).digest
    assert before == Tokenizer.from_dir(tiny_tok_dir).digest and before.startswith("sha256:")
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = "{{ messages[0]['content'] }}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert Tokenizer.from_dir(tmp_path).digest != before


def test_make_writes_the_same_bytes_twice(tmp_path):
    first = _tokenizer_dir(tmp_path / "a", "small")
    second = _tokenizer_dir(tmp_path / "b", "small")
    names = sorted(p.name for p in first.iterdir())
    assert names == ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_llama_1b_has_llama_3s_special_token_ids(tmp_path):
    tok = Tokenizer.from_dir(_tokenizer_dir(tmp_path / "llama", "llama-1b"))
    assert tok.vocab_size == 128256 and tok.bos_token_id == 128000 and tok.eos_token_ids == (128001, 128009)
    named = {"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001, "<|finetune_right_pad_id|>": 128004,
             "<|start_header_id|>": 128006, "<|end_header_id|>": 128007, "<|eom_id|>": 128008,
             "<|eot_id|>": 128009, "<|python_tag|>": 128010, "<|reserved_special_token_3|>": 128011,
             "<|reserved_special_token_247|>": 128255}
    assert {text: tok.encode(text, add_special_tokens=False) for text in named} == {t: [i] for t, i in named.items()}
    # Ids the corpus cannot fill are reserved special tokens, numbered on after Llama 3's last one.
    last_regular = max(set(range(128000)) - tok.special_token_ids)
    assert tok.token_text(last_regular + 1) == "<|reserved_special_token_248|>"
    assert tok.token_text(127999) == f"<|reserved_special_token_{248 + 127999 - last_regular - 1}|>"
    assert set(range(last_regular + 1, 128256)) <= tok.special_token_ids and 5000 < last_regular < 128000
    text = "Deterministic inference, 決定論的 😀"
    assert tok.decode(tok.encode(text)) == text and max(tok.encode(text, add_special_tokens=False)) <= last_regular


def test_chat_templates_get_what_transformers_gives_them(tmp_path, tiny_tok_dir):
    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((tiny_tok_dir / name).read_bytes())
    template = ("{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
                "{% if loop.index > 2 %}{% break %}{% endif %}{{ bos_token ~ (m | tojson) }}\n{% endfor %}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": {"content": "<|begin_of_text|>"},
                                                                "chat_template": template}))
    tok = Tokenizer.from_dir(tmp_path)
    turns = [ChatMessage("user", "é"), ChatMessage("assistant", "b"), ChatMessage("user", "c")]
    # trim_blocks drops the newline after a block tag; tojson keeps non-ASCII text; {% break %} works.
    assert tok.apply_chat_template(turns) == ('<|begin_of_text|>{"role": "user", "content": "é"}\n'
                                              '<|begin_of_text|>{"role": "assistant", "content": "b"}\n')
    with pytest.raises(TokenizerError, match="refused the messages: no tools"):
        tok.apply_chat_template([ChatMessage("tool", "x")])
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[0]['content'] + 1 }}"}))
    with pytest.raises(TokenizerError, match="failed while rendering"):
        Tokenizer.from_dir(tmp_path).apply_chat_template(turns)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{% for %}"}))
    with pytest.raises(TokenizerError, match="does not compile"):
        Tokenizer.from_dir(tmp_path).apply_chat_template(turns)
