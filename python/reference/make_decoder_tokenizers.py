#!/usr/bin/env python3
"""Writes small but faithful decoder tokenizers and their expected ids (tests/text/data/decoder_tok/).

The real tokenizer files of Qwen2.5, Llama 3, Mistral and Phi-3 cannot be downloaded here, so each
family's tokenizer is rebuilt in miniature with Hugging Face `tokenizers`: a BPE trained on the small
corpus below (written for this script; no third-party text) with the family's exact normalizer,
pre-tokenizer, model options, added tokens, post-processor and decoder. For each family:

  <family>/tokenizer.json   the tokenizer.json (tokenizers' own serialisation; gpt2's merges rewritten
                       to the older "a b" string form, the others keep the ["a", "b"] list form)
  <family>/tokenizer_config.json   bos_token / eos_token (/ unk_token) as the family's real file names them
  <family>/tokenizer.gguf   the same vocabulary as GGUF metadata (tokenizer.ggml.*), no tensors, written by
                       the `gguf` package: byte-level families as model "gpt2" with tokenizer.ggml.pre,
                       the SentencePiece-style ones as model "llama" with scores (-id of the merged piece)
  decoder_tok_ids.json every fixture text with `tokenizers`' ids (encode with add_special_tokens=True)
                       and decode(ids, skip_special_tokens=False), per family

Families (pre-tokenizer / normalizer as in the real files):
  gpt2    ByteLevel(use_regex) alone                        (GPT-2; merges as "a b" strings)
  smollm  Digits(individual) + ByteLevel(use_regex)         (SmolLM / SmolLM2)
  llama3  Split(Llama 3 regex) + ByteLevel, ignore_merges, <|begin_of_text|> via TemplateProcessing
  qwen2   NFC normalizer, Split(Qwen2 regex) + ByteLevel    (Qwen2 / Qwen2.5 / Qwen3)
  llama2  Prepend(▁) + Replace(" ", ▁) normalizers, byte fallback, <s> prefix (Llama 2, Mistral v0.1)
  mistral Metaspace(prepend_scheme first, split false), byte fallback, <s> prefix (newer Mistral files)
  phi3    as llama2 plus Phi-3's added tokens (<|assistant|> ... with rstrip)
  gemma   Replace(" ", ▁) normalizer, Split(" ", MergedWithPrevious) (a no-op after it), no prefix,
          byte fallback, <bos> prefix, no Strip decoder (Gemma 2 / 3, as transformers' GemmaConverter)

Needs: pip install tokenizers gguf numpy.   Run: python3 python/reference/make_decoder_tokenizers.py
"""
import json
import os

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers, Regex, AddedToken
import gguf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "text", "data", "decoder_tok")

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = """The quick brown fox jumps over the lazy dog. It's a dog's life, isn't it? We'll see; they've gone.
I'm sure you'd like the tokenizer: it splits text into pieces, then merges the pieces by rank.
Attention weights tell which tokens a model looks at when it predicts the next one.
def attention(q, k, v):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    return softmax(scores, axis=-1) @ v
for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }
if __name__ == "__main__":
\tprint("hello, world")  # 2024-06-01 12:34:56
The year 1984 had 366 days? No: 1984 was a leap year with 366 days, and 2023 had 365.
Prices: $19.99, €5, ¥120, 3.14159, 1,000,000 and 42%.
我们今天学习注意力机制。模型在预测下一个词的时候，会看前面所有的词。
这本书很好看，我很喜欢。天气不错，我们去公园散步吧！
北京是中国的首都，上海是最大的城市。你好，世界！
机器学习和深度学习的区别是什么？请用简单的话解释一下。
日本語の文章も少しあります。これはテストです。カタカナとひらがな。
한국어 문장도 있습니다. 안녕하세요, 세계!
Привет, мир! Это небольшой тест на русском языке.
Γειά σου κόσμε. Ελληνικά γράμματα: α β γ δ.
مرحبا بالعالم. هذا اختبار صغير.
नमस्ते दुनिया। यह एक छोटा परीक्षण है।
Café, naïve, résumé, façade, coöperate, Zürich, São Paulo, Ångström.
Emoji: 😀 😂 👍 🎉 ❤️ 👨‍👩‍👧 🇨🇳 — and a dash, “quotes” and ‘single quotes’…
<html><body><p class="x">Hello &amp; welcome</p></body></html>
{"name": "attn", "version": "0.1.0", "tags": ["nlp", "attention"]}
SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;
    indented line with four spaces
\t\ttwo tabs then text
line one\r\nline two\r\n\r\nline four
"""

TEXTS = [
    "",
    "Hello world",
    "Hello, world! How's it going? I'M FINE, YOU'LL SEE. She'd've known.",
    " leading space",
    "   three leading spaces and trailing   ",
    "multiple    spaces\tand\ttabs\n\nand\n\n\nnewlines\r\n",
    "\n",
    "   ",
    "digits 1 12 123 1234 12345 1234567890 3.14159 x1y22z333",
    "phone: +86 138-0013-8000, year ２０２４ (fullwidth) and ①②③",
    "我们今天学习注意力机制。",
    "中文和English混合，还有数字123和标点！",
    "未登录的汉字：龘靐齉",
    "日本語とカタカナ、한국어와 русский, ελληνικά, العربية, हिन्दी",
    "Emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇨🇳 heart ❤️",
    "e\u0301 cafe\u0301 (decomposed) vs café (composed); \u1100\u1161 jamo",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "<html><p class=\"x\">&lt;tag&gt;</p></html>",
    "don't won't can't it's we're they've I'm you'll he'd 'tis",
    "A's B'S C'Re D'VE",
    "!!!??? ... --- ***",
    "a\u00a0b\u3000c\u2003d",
    "trailing newline\n",
    "\u200bzero width\u200d joiner",
    "🤖🤖🤖",
    "ǅ ǈ ǋ ǲ Ⅻ ⅻ",
]

SPECIAL_TEXTS = {
    "gpt2": ["a <|endoftext|> b", "<|endoftext|><|endoftext|>x"],
    "smollm": ["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "x<|endoftext|>y"],
    "llama3": ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
               "text <|eot_id|> more"],
    "qwen2": ["<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n你好<|im_end|>\n",
              "a<|endoftext|>b"],
    "llama2": ["<s>hello</s>", "hi <s> there", "[INST] hi [/INST]"],
    "mistral": ["<s>hello</s>", "hi <s> there", "[INST] hi [/INST]"],
    "phi3": ["<|user|>\nhi<|end|>\n<|assistant|>\nhello<|end|>", "<|system|>  spaced  <|end|>  x",
             "x <|endoftext|> y"],
    "gemma": ["<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "a <eos> b"],
}


def random_texts(n=150, seed=38):
    """Seeded random strings over the characters where pre-tokenizers disagree: contractions in both
    cases, digits of several scripts, every kind of whitespace, marks, emoji, CJK, specials."""
    import random
    rng = random.Random(seed)
    pool = (list("abcXYZ sStTdDmM'\"'") + ["'s", "'S", "'ll", "'LL", "'ve", "'Re", "'d", "\u017f"] +
            list("0123456789") + ["\u0663", "\uff12", "\u0969", "\u2167", "\u00bd"] +
            [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b"] +
            list(".,;:!?()[]{}<>-_=+*/\\|@#$%^&~`") + ["\u0301", "\u0308", "\u200d", "\ufe0f"] +
            ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F1E8\U0001F1F3", "\u2764"] +
            list("注意力机制模型你好，。！") + list("日本語カタ한국어") + list("Приветαβγ") + list("مرحبا") +
            ["e\u0301", "\u1100\u1161", "\u00e9", "<|", "|>", "<s", "</s>", "<|im_start|>", "<|endoftext|>",
             "<|eot_id|>", "<s>"])
    out = []
    for _ in range(n):
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 14))))
    return out


PATTERNS = {"gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
            "llama3": LLAMA3_RE, "qwen2": QWEN2_RE}


def corpus_lines():
    return [l for l in CORPUS.split("\n") if l] * 3


def byte_level(family):
    specials = {"gpt2": ["<|endoftext|>"],
                "smollm": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                           "<|eot_id|>"],
                "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]}[family]
    tok = Tokenizer(models.BPE(ignore_merges=(family == "llama3")))
    if family == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif family == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                              use_regex=True)])
    else:
        pattern = LLAMA3_RE if family == "llama3" else QWEN2_RE
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=(family == "llama3"), use_regex=False)])
    if family == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus_lines(), trainer)
    if family == "llama3":
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                          special_tokens=[(bos, tok.token_to_id(bos))])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    if family == "qwen2":  # a non-special added token, as Qwen's <tool_call> markers
        tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False)])
    return tok


SPM_SPECIALS = {"llama2": ["<unk>", "<s>", "</s>"], "mistral": ["<unk>", "<s>", "</s>"],
                "phi3": ["<unk>", "<s>", "</s>"],
                "gemma": ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]}


def spm_bpe(family):
    """SentencePiece-style BPE: trained over ▁-words, then laid out as Llama 2's tokenizer.json has it:
    <unk> <s> </s>, the 256 byte tokens, the learned pieces; merges completed as transformers'
    SentencePieceExtractor writes them (every split of a piece into two pieces, by the piece's rank)."""
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=900, min_frequency=2, show_progress=False)
    t.train_from_iterator(corpus_lines(), trainer)
    learned = sorted(t.get_vocab().items(), key=lambda kv: kv[1])
    fixed = SPM_SPECIALS[family]
    pieces = fixed + ["<0x%02X>" % b for b in range(256)]
    pieces += [p for p, _ in learned if p not in pieces]
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for piece, pid in vocab.items():
        if pid < len(fixed) + 256:
            continue
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges += [(a, b, pid) for a, b in local]
    merges.sort(key=lambda m: m[2])
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for a, b, _ in merges], unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    if family == "gemma":  # transformers' GemmaConverter: spaces replaced, no prefix, no Strip
        tok.normalizer = normalizers.Replace(" ", "▁")
        tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    elif family == "mistral":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in fixed])
    if family == "phi3":
        tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False, rstrip=True) for s in
                                ["<|assistant|>", "<|end|>", "<|system|>", "<|user|>"]])
    bos = "<bos>" if family == "gemma" else "<s>"
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                       special_tokens=[(bos, vocab[bos])])
    return tok


CONFIG = {
    "gpt2": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"},
    "smollm": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen2": {"bos_token": None, "eos_token": "<|im_end|>"},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"},
    "gemma": {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
}


def write_gguf(path, family, tok, j):
    w = gguf.GGUFWriter(path + ".tmp", "llama")
    n = tok.get_vocab_size(with_added_tokens=True)
    inv = {i: p for p, i in tok.get_vocab(with_added_tokens=True).items()}
    tokens = [inv[i] for i in range(n)]
    added = {a["id"]: a for a in j["added_tokens"]}
    types = []
    for i, p in enumerate(tokens):
        if i in added:
            types.append(3 if added[i]["special"] else 4)
        elif p.startswith("<0x") and len(p) == 6 and family in SPM_SPECIALS:
            types.append(6)
        else:
            types.append(1)
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", types)
    if family in SPM_SPECIALS:
        fixed = len(SPM_SPECIALS[family]) + 256
        w.add_string("tokenizer.ggml.model", "llama")
        w.add_array("tokenizer.ggml.scores", [0.0 if i < fixed else -float(i) for i in range(n)])
        w.add_uint32("tokenizer.ggml.bos_token_id", tok.token_to_id(CONFIG[family]["bos_token"]))
        w.add_uint32("tokenizer.ggml.eos_token_id", tok.token_to_id(CONFIG[family]["eos_token"]))
        w.add_uint32("tokenizer.ggml.unknown_token_id", tok.token_to_id(CONFIG[family]["unk_token"]))
        w.add_bool("tokenizer.ggml.add_bos_token", True)
        w.add_bool("tokenizer.ggml.add_space_prefix", family != "gemma")
    else:
        w.add_string("tokenizer.ggml.model", "gpt2")
        w.add_string("tokenizer.ggml.pre", {"gpt2": "gpt2", "smollm": "smollm", "llama3": "llama-bpe",
                                           "qwen2": "qwen2"}[family])
        merges = j["model"]["merges"]
        w.add_array("tokenizer.ggml.merges", [m if isinstance(m, str) else " ".join(m) for m in merges])
        w.add_uint32("tokenizer.ggml.eos_token_id", tok.token_to_id(CONFIG[family]["eos_token"]))
        if CONFIG[family]["bos_token"]:
            w.add_uint32("tokenizer.ggml.bos_token_id", tok.token_to_id(CONFIG[family]["bos_token"]))
        w.add_bool("tokenizer.ggml.add_bos_token", family == "llama3")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def main():
    os.makedirs(OUT, exist_ok=True)
    rand = random_texts()
    fixtures = {"generator": "python/reference/make_decoder_tokenizers.py", "random_texts": rand, "families": {},
                "pre_tokenizers": {}}
    # The pre-tokenizers alone: `tokenizers`' Split on each fixture and random text (no NFC, no bytes).
    for name, pattern in PATTERNS.items():
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
        fixtures["pre_tokenizers"][name] = [[w for w, _ in split.pre_tokenize_str(t)]
                                            for t in TEXTS + rand]
    for family in ["gpt2", "smollm", "llama3", "qwen2", "llama2", "mistral", "phi3", "gemma"]:
        tok = byte_level(family) if family in ("gpt2", "smollm", "llama3", "qwen2") else spm_bpe(family)
        j = json.loads(tok.to_str())
        if family == "gpt2":
            j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
        os.makedirs(os.path.join(OUT, family), exist_ok=True)
        path = os.path.join(OUT, family, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        with open(os.path.join(OUT, family, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(CONFIG[family], f, indent=1)
            f.write("\n")
        tok = Tokenizer.from_file(path)  # the ids come from the file as written
        write_gguf(os.path.join(OUT, family, "tokenizer.gguf"), family, tok, j)
        cases = []
        for text in TEXTS + SPECIAL_TEXTS[family]:
            ids = tok.encode(text, add_special_tokens=True).ids
            cases.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
        cfg = CONFIG[family]
        fixtures["families"][family] = {
            "vocab_size": tok.get_vocab_size(with_added_tokens=True),
            "bos_id": tok.token_to_id(cfg["bos_token"]) if cfg["bos_token"] else -1,
            "eos_id": tok.token_to_id(cfg["eos_token"]),
            "cases": cases,
            "random_ids": [tok.encode(t, add_special_tokens=True).ids for t in rand]}
    with open(os.path.join(OUT, "decoder_tok_ids.json"), "w", encoding="utf-8") as f:
        json.dump(fixtures, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
