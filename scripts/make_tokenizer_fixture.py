#!/usr/bin/env python3
"""Make the fixture of tests/apps/tokenizer/tokenizers_fixture_test.cpp: byte-level BPE
tokenizer.json files and, in cases.json, the ids and the decoded text that Hugging Face's
`tokenizers` package gives for texts chosen to exercise the pre-tokenizers' rules (ASCII,
Unicode letters, digits, contractions, whitespace runs, newlines, emoji, special tokens).

Usage, on a machine with the tokenizers package (the GPU machine; nothing is downloaded):
    python3 scripts/make_tokenizer_fixture.py --out tests/data/tokenizer
    python3 scripts/make_tokenizer_fixture.py --out tests/data/tokenizer --tokenizer HF_DIR/tokenizer.json
then commit tests/data/tokenizer/ and run tokenizer_tests (ctest -R tokenizer) anywhere.

It trains two small byte-level BPE tokenizers on a short text held in this script:
  tokenizer.json      GPT-2's layout: ByteLevel pre-tokenizer (GPT-2's regex), ByteLevel
                      decoder, the special token <|endoftext|>.
  llama3_style.json   Llama 3's layout: Split by Llama 3's regex (Isolated), then ByteLevel
                      without its own regex; model.ignore_merges; a TemplateProcessing
                      post-processor putting <|begin_of_text|> before a sequence.
Each --tokenizer FILE (e.g. the tokenizer.json of an imported GPT-2 or Llama 3 folder) is
copied in as extra_<n>.json and checked on the same texts.
cases.json: {"command", "tokenizers_version", "sets": [{"tokenizer": FILE, "bos_ids": [...],
"cases": [{"text", "ids", "decoded"}]}]}; ids from encode(text, add_special_tokens=False),
decoded from decode(ids, skip_special_tokens=False).
"""
import argparse
import json
import os
import shutil
import sys

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Training text: enough repeats of words, numbers, accents and emoji that merges form
# across multi-byte characters too.
TRAINING_TEXT = """
The quick brown fox jumps over the lazy dog. It's the fox's den; they're sure we'll see it.
I'm here, you've been there, he'd go. THE END? No: the end is 2024, or 1234567 or 3.14159.
Café crème, naïve résumé, Ünïcödé façade. Привет, как дела? 你好，世界。こんにちは。
Emoji: 👋 🎉 👍🏽 ❤️ 🇫🇷 — and tabs\tand  double  spaces   and newlines

  indented lines, <b>markup</b>, snake_case and camelCase, foo_bar(42), x += 1;
"""

TEXTS = [
    "Hello world",
    "the cat sat on the mat",
    " leading space",
    "trailing spaces   ",
    "a   b",
    "tabs\tand\t\tmore\t",
    "line one\nline two\n\n\nline five\r\n",
    "  \n  indented\n",
    "I'm it's they're we'll you've he'd don't",
    "IT'S WE'LL I'M",
    "1234567 and 3.14159 and 42",
    "2024-12-07 12:30:45",
    "Café crème, naïve résumé",
    "Привет, как дела?",
    "你好，世界。こんにちは。",
    "👋 👍🏽 ❤️ 🇫🇷 👨‍👩‍👧",
    "Emoji🎉inside words",
    "<|endoftext|>The end<|endoftext|>",
    "foo_bar(42) += x;",
    "!!!??? ... ---",
    "",
]


def train(layout):
    tok = Tokenizer(models.BPE())
    special = "<|endoftext|>" if layout == "gpt2" else "<|begin_of_text|>"
    if layout == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, special_tokens=[special],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([TRAINING_TEXT] * 20, trainer)
    if layout == "llama3":
        bos = tok.token_to_id(special)
        tok.post_processor = processors.TemplateProcessing(single=f"{special} $A", special_tokens=[(special, bos)])
        spec = json.loads(tok.to_str())
        spec["model"]["ignore_merges"] = True  # Llama 3's; tokenizers >= 0.19 reads it
        try:
            tok = Tokenizer.from_str(json.dumps(spec))
        except Exception as e:  # an older tokenizers: the fixture goes without it, and says so
            print(f"make_tokenizer_fixture: this tokenizers does not take ignore_merges ({e})", file=sys.stderr)
    return tok


def cases_of(tok):
    out = []
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        out.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tests/data/tokenizer", help="folder to write (created)")
    ap.add_argument("--tokenizer", action="append", default=[], help="an existing tokenizer.json to check too")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sets = []
    for layout, name in (("gpt2", "tokenizer.json"), ("llama3", "llama3_style.json")):
        tok = train(layout)
        tok.save(os.path.join(args.out, name), pretty=True)
        # Read back as conveyor will read it: the saved file, not the object in memory.
        tok = Tokenizer.from_file(os.path.join(args.out, name))
        sets.append({"tokenizer": name, "bos_ids": tok.encode("", add_special_tokens=True).ids,
                     "cases": cases_of(tok)})
    for n, path in enumerate(args.tokenizer):
        name = f"extra_{n}.json"
        shutil.copyfile(path, os.path.join(args.out, name))
        tok = Tokenizer.from_file(os.path.join(args.out, name))
        sets.append({"tokenizer": name, "source": path, "bos_ids": tok.encode("", add_special_tokens=True).ids,
                     "cases": cases_of(tok)})
    fixture = {"command": "python3 scripts/make_tokenizer_fixture.py " + " ".join(sys.argv[1:]),
               "tokenizers_version": tokenizers.__version__, "sets": sets}
    with open(os.path.join(args.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {', '.join(s['tokenizer'] for s in sets)} and cases.json "
          f"({sum(len(s['cases']) for s in sets)} texts, tokenizers {tokenizers.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
