"""Writing a small real tokenizer for a checkpoint: byte-level BPE trained on the text bitcase ships.

The vocabulary has exactly config.json's ``vocab_size`` entries, laid out as Llama 3 lays out
its own: a block of special tokens starting at config.json's ``bos_token_id`` (``<|begin_of_text|>``,
``<|end_of_text|>``, ..., ``<|start_header_id|>``, ``<|end_header_id|>``, ``<|eot_id|>``, ...: Llama 3's
256-token block when it ends the vocabulary as there, else its first 11 entries), and byte-level
BPE tokens in every other id: the 243 bytes that UTF-8 text can contain (0xC0, 0xC1 and
0xF5-0xFF never occur in it), then merges learned on ``tokenizer_corpus.txt``. When the corpus
yields fewer merges than there are ids (a 128,256-token vocabulary needs far more text than
bitcase ships), the remaining ids are filled with ``<|reserved_special_token_N|>``, as Llama 3
reserves its unused ids: special tokens that ordinary text never encodes to.

The corpus is a short multilingual text written for bitcase followed by the first 240 KB of
"tiny Shakespeare" (plays by William Shakespeare, in the public domain). Training is
deterministic (the BPE trainer breaks ties by pair order) and writes the same bytes every time
for the same ``tokenizers`` version. It also writes tokenizer_config.json (a Llama-3-style chat
template, bos/eos matching config.json) and generation_config.json (generation also stops at
``<|eot_id|>``, the end of a chat turn).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from engine.byte_pieces import byte_level_chars

__all__ = ["write_tokenizer", "special_tokens_layout", "CHAT_TEMPLATE", "UTF8_BYTES"]

LLAMA3_SPECIAL_HEAD = ("<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                       "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                       "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>")
LLAMA3_BLOCK_SIZE = 256
# Llama 3's pre-tokenizer split: contractions, letter runs, up to 3 digits, punctuation, spaces.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
UTF8_BYTES = tuple(b for b in range(256) if b not in (0xC0, 0xC1) and b < 0xF5)
CHAT_TEMPLATE = (
    "{%- for message in messages -%}\n"
    "{%- if loop.first -%}{{ bos_token }}{%- endif -%}\n"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + (message['content'] | trim)"
    " + '<|eot_id|>' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif -%}\n")
_MIN_PAIR_COUNT = 2  # a pair seen once is noise, not a token


def special_tokens_layout(*, vocab_size: int, bos_token_id: int, eos_token_id: int) -> dict[int, str]:
    """Id -> special token text: Llama 3's block, starting at ``bos_token_id`` (see the module docstring)."""
    if eos_token_id != bos_token_id + 1:
        raise ValueError(f"eos_token_id {eos_token_id} must follow bos_token_id {bos_token_id} "
                         "(<|end_of_text|> follows <|begin_of_text|> in the Llama 3 layout)")
    size = LLAMA3_BLOCK_SIZE if bos_token_id + LLAMA3_BLOCK_SIZE == vocab_size else len(LLAMA3_SPECIAL_HEAD)
    reserved = (f"<|reserved_special_token_{n}|>" for n in range(3, 3 + size - len(LLAMA3_SPECIAL_HEAD)))
    names = [*LLAMA3_SPECIAL_HEAD, *reserved]
    if bos_token_id < 0 or bos_token_id + size > vocab_size:
        raise ValueError(f"the {size} special tokens from bos_token_id {bos_token_id} do not fit a vocabulary "
                         f"of {vocab_size}")
    if vocab_size - size < len(UTF8_BYTES):
        raise ValueError(f"vocab_size {vocab_size} leaves {vocab_size - size} ids beside {size} special tokens; "
                         f"a byte-level tokenizer needs at least {len(UTF8_BYTES)}")
    return {bos_token_id + k: name for k, name in enumerate(names)}


def _corpus() -> str:
    return resources.files("engine").joinpath("tokenizer_corpus.txt").read_text(encoding="utf-8")


def _train(num_tokens: int) -> tuple[list[str], list[list[str]]]:
    """Byte-level BPE pieces (in trained id order) and merges, at most ``num_tokens`` pieces."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = _pre_tokenizer(pre_tokenizers, Regex)
    alphabet = [byte_level_chars()[b] for b in UTF8_BYTES]
    trainer = trainers.BpeTrainer(vocab_size=num_tokens, min_frequency=_MIN_PAIR_COUNT, show_progress=False,
                                  initial_alphabet=alphabet, special_tokens=[])
    tokenizer.train_from_iterator([_corpus()], trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    pieces = sorted(model["vocab"], key=model["vocab"].__getitem__)
    merges = [m.split(" ") if isinstance(m, str) else list(m) for m in model["merges"]]
    return pieces, merges


def _pre_tokenizer(pre_tokenizers: Any, regex: Any) -> Any:
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])


def _config_ids(config: dict[str, Any], model_dir: Path) -> tuple[int, int, int]:
    values = []
    for name in ("vocab_size", "bos_token_id", "eos_token_id"):
        value = config.get(name)
        if isinstance(value, list) and value:
            value = value[0]  # several end ids: the first is <|end_of_text|>
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{model_dir / 'config.json'}: {name} must be an integer to lay out a tokenizer, "
                             f"got {value!r}")
        values.append(value)
    return values[0], values[1], values[2]


def write_tokenizer(model_dir: Path) -> list[Path]:
    """Write tokenizer.json, tokenizer_config.json and generation_config.json matching ``model_dir/config.json``."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    vocab_size, bos_id, eos_id = _config_ids(config, model_dir)
    specials = special_tokens_layout(vocab_size=vocab_size, bos_token_id=bos_id, eos_token_id=eos_id)
    pieces, merges = _train(vocab_size - len(specials))
    regular = iter(pieces)
    padding = (f"<|reserved_special_token_{n}|>" for n in range(3 + len(specials) - len(LLAMA3_SPECIAL_HEAD), vocab_size))
    vocab: dict[str, int] = {}
    special_ids = dict(specials)
    for token_id in range(vocab_size):
        if token_id not in specials:
            piece = next(regular, None)
            if piece is None:
                piece = special_ids[token_id] = next(padding)
            vocab[piece] = token_id
        else:
            vocab[specials[token_id]] = token_id
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in merges], fuse_unk=False))
    tokenizer.pre_tokenizer = _pre_tokenizer(pre_tokenizers, Regex)
    tokenizer.decoder = decoders.ByteLevel()
    bos, eos = specials[bos_id], specials[eos_id]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, bos_id)])
    # Special tokens are already in the model vocabulary, so each keeps the id the layout gave it.
    tokenizer.add_special_tokens([AddedToken(special_ids[i], special=True, normalized=False)
                                  for i in sorted(special_ids)])
    wrong = [i for i in sorted(special_ids) if tokenizer.token_to_id(special_ids[i]) != i]
    if wrong or tokenizer.get_vocab_size(with_added_tokens=True) != vocab_size:
        raise RuntimeError(f"tokenizer layout broken at ids {wrong[:5]}; "
                           f"{tokenizer.get_vocab_size(with_added_tokens=True)} != {vocab_size} entries")
    eot_id = bos_id + LLAMA3_SPECIAL_HEAD.index("<|eot_id|>")
    files = {
        "tokenizer.json": tokenizer.to_str(pretty=False) + "\n",
        "tokenizer_config.json": _json({
            "bos_token": bos, "eos_token": eos, "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": config.get("max_position_embeddings"), "tokenizer_class": "PreTrainedTokenizerFast"}),
        "generation_config.json": _json({"bos_token_id": bos_id, "eos_token_id": [eos_id, eot_id],
                                         "transformers_version": config.get("transformers_version")}),
    }
    written = []
    for name, text in files.items():
        path = model_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
