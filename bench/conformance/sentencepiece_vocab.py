"""Train a SentencePiece BPE model whose vocabulary has exactly a checkpoint's vocab_size pieces.

llama.cpp's converter recognises a SentencePiece ``tokenizer.model`` for Llama-shaped checkpoints
without further configuration (a byte-level ``tokenizer.json`` needs its pre-tokenizer listed in
the converter). The probe sends token ids, so the pieces only have to exist and number exactly
vocab_size: they are trained on the ASCII lines of the corpus bitcase ships, which keeps the
required characters under a 256-piece budget. ids 0, 1, 2 are <unk>, <s>, </s> (config.json's
bos 1 and eos 2).

    python bench/conformance/sentencepiece_vocab.py CHECKPOINT_DIR OUT_DIR

Writes OUT_DIR/tokenizer.model (and nothing else).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def main(checkpoint: Path, out_dir: Path) -> None:
    """Train and write ``out_dir/tokenizer.model`` for the checkpoint's vocab_size."""
    import sentencepiece as spm

    vocab_size = json.loads((checkpoint / "config.json").read_text())["vocab_size"]
    corpus = Path(__file__).resolve().parents[2] / "engine" / "tokenizer_corpus.txt"
    lines = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip() and line.isascii()]
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "corpus.txt"
        text.write_text("\n".join(lines) + "\n", encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(out_dir / "tokenizer"), model_type="bpe",
                                       vocab_size=vocab_size, character_coverage=1.0, hard_vocab_limit=True,
                                       unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1,
                                       minloglevel=2)
    (out_dir / "tokenizer.vocab").unlink()
    pieces = spm.SentencePieceProcessor(model_file=str(out_dir / "tokenizer.model")).get_piece_size()
    if pieces != vocab_size:
        sys.exit(f"trained {pieces} pieces, not the checkpoint's {vocab_size}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
