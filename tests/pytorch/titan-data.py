#!/usr/bin/env python3
"""titan-data.py — the assets torchtitan's trainer needs and its wheel does
not ship: a small tokenizer and a text set, made here, the same every time.

    titan-data.py DIR

writes DIR/tokenizer/tokenizer.json (+ tokenizer_config.json), for
`--hf-assets-path DIR/tokenizer`, and DIR/text/train.jsonl, JSON lines with a
`text` field, for `--dataloader.dataset-path DIR/text`.

The tokenizer is a word-level one made with the `tokenizers` package (it
comes with torchtitan): 512 made-up words, an unknown token and the
begin/end-of-text tokens, far fewer than the debug model's 2,048 entries.
The text is a seeded Markov chain over those words (each word has a few
likely successors), so that a few steps of training lower the loss.
Run with the Python that has torchtitan.
"""

import json
import os
import random
import sys

SPECIAL = ["<unk>", "<|begin_of_text|>", "<|end_of_text|>"]
N_WORDS = 512
N_DOCS = 400


def words():
    """512 distinct pronounceable words, from consonant-vowel syllables."""
    cons, vows = "bdfgklmnprstvz", "aeiou"
    syl = [c + v for c in cons for v in vows]   # 70 syllables
    rng = random.Random(7)
    out = []
    seen = set()
    while len(out) < N_WORDS:
        w = "".join(rng.choice(syl) for _ in range(rng.randint(1, 3)))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


def make_tokenizer(folder, vocab_words):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    vocab = {t: i for i, t in enumerate(SPECIAL + vocab_words)}
    tok = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = WhitespaceSplit()
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                   "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": True}, f)


def make_text(folder, vocab_words):
    rng = random.Random(11)
    succ = {w: rng.sample(vocab_words, 4) for w in vocab_words}
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "train.jsonl"), "w") as f:
        for _ in range(N_DOCS):
            w = rng.choice(vocab_words)
            doc = []
            for _ in range(rng.randint(40, 120)):
                doc.append(w)
                w = rng.choice(succ[w]) if rng.random() < 0.9 else rng.choice(vocab_words)
            f.write(json.dumps({"text": " ".join(doc)}) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: titan-data.py DIR")
    out = sys.argv[1]
    w = words()
    make_tokenizer(os.path.join(out, "tokenizer"), w)
    make_text(os.path.join(out, "text"), w)


if __name__ == "__main__":
    main()
