#!/usr/bin/env python3
"""Writes tests/models/data/gemma3_tiny*.gguf: a tiny random Gemma 3 (architecture `gemma3`, 3 layers,
dim 64, 2 query heads and 1 kv head of 32, ffn 256, sliding window 4 with pattern 3, context 64, a
SentencePiece vocabulary of 3 controls + 256 byte tokens + a few pieces) in Q8_0, Q5_0, Q4_0 and
F32, and bad variants for the loader's errors:
  gemma3_tiny_bad_shape.gguf    blk.1.attn_q.weight stored as [32, 64] (metadata says [64, 64])
  gemma3_tiny_bad_type.gguf     blk.0.ffn_down.weight in Q2_K (not supported)
  gemma3_tiny_bad_window.gguf   gemma3.attention.sliding_window 128 > gemma3.context_length 64
  gemma3_tiny_missing.gguf      no blk.2.post_ffw_norm.weight

Needs: pip install gguf numpy.  Run: python3 python/reference/make_gemma3_test_files.py
"""
import os

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType as T
from gguf.quants import quantize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "models", "data")

C, H, HKV, D, F, LAYERS, CTX, WIN, PAT = 64, 2, 1, 32, 256, 3, 64, 4, 3


def vocab():
    toks, scores, types = ["<pad>", "<eos>", "<bos>"], [0.0, 0.0, 0.0], [3, 3, 3]
    for b in range(256):
        toks.append("<0x%02X>" % b)
        scores.append(0.0)
        types.append(6)
    for i, p in enumerate(["\u2581", "a", "b", "c", "\u2581a", "ab", "\u2581the", "th", "he", "\u4e2d", "\u6587",
                           "\u4e2d\u6587", "\n\n"]):
        toks.append(p)
        scores.append(-1.0 - i)
        types.append(4 if p == "\n\n" else 1)
    return toks, scores, types


def write(name, variant=None):
    rng = np.random.default_rng(5)
    toks, scores, types = vocab()
    V = len(toks)
    path = os.path.join(OUT, name)
    w = GGUFWriter(path + ".tmp", "gemma3")
    w.add_uint32("gemma3.context_length", CTX)
    w.add_uint32("gemma3.embedding_length", C)
    w.add_uint32("gemma3.block_count", LAYERS)
    w.add_uint32("gemma3.feed_forward_length", F)
    w.add_uint32("gemma3.attention.head_count", H)
    w.add_uint32("gemma3.attention.head_count_kv", HKV)
    w.add_uint32("gemma3.attention.key_length", D)
    w.add_uint32("gemma3.attention.value_length", D)
    w.add_float32("gemma3.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32("gemma3.rope.freq_base", 1e6)
    w.add_uint32("gemma3.attention.sliding_window", 128 if variant == "window" else WIN)
    w.add_uint32("gemma3.attention.sliding_window_pattern", PAT)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", toks)
    w.add_array("tokenizer.ggml.scores", scores)
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_uint32("tokenizer.ggml.bos_token_id", 2)
    w.add_uint32("tokenizer.ggml.eos_token_id", 1)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)

    def mat(name, n, k, qt):
        x = (rng.standard_normal((n, k)) * 0.2).astype(np.float32)
        if qt == T.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, quantize(x, qt), raw_dtype=qt)

    def vec(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", V, C, T.Q8_0)
    vec("output_norm.weight", C)
    for l in range(LAYERS):
        p = f"blk.{l}."
        vec(p + "attn_norm.weight", C)
        if variant == "shape" and l == 1:
            mat(p + "attn_q.weight", D, C, T.Q5_0)
        else:
            mat(p + "attn_q.weight", H * D, C, T.Q5_0)
        mat(p + "attn_k.weight", HKV * D, C, T.Q5_0)
        mat(p + "attn_v.weight", HKV * D, C, T.Q8_0)
        vec(p + "attn_q_norm.weight", D)
        vec(p + "attn_k_norm.weight", D)
        mat(p + "attn_output.weight", C, H * D, T.Q4_0)
        vec(p + "post_attention_norm.weight", C)
        vec(p + "ffn_norm.weight", C)
        mat(p + "ffn_gate.weight", F, C, T.Q8_0)
        mat(p + "ffn_up.weight", F, C, T.Q8_0)
        if variant == "type" and l == 0:
            # Q2_K: 84 bytes per 256 values; never read (the type is rejected first)
            w.add_tensor(p + "ffn_down.weight", np.zeros((C, F // 256 * 84), dtype=np.uint8), raw_dtype=T.Q2_K)
        else:
            mat(p + "ffn_down.weight", C, F, T.F32 if l == 2 else T.Q8_0)
        if not (variant == "missing" and l == 2):
            vec(p + "post_ffw_norm.weight", C)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def main():
    os.makedirs(OUT, exist_ok=True)
    write("gemma3_tiny.gguf")
    write("gemma3_tiny_bad_shape.gguf", "shape")
    write("gemma3_tiny_bad_type.gguf", "type")
    write("gemma3_tiny_bad_window.gguf", "window")
    write("gemma3_tiny_missing.gguf", "missing")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
