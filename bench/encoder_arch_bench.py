#!/usr/bin/env python3
"""A bge-small-zh-shaped sentence encoder and reranker against ONNX Runtime (issue 38's benchmark).

Writes two Hugging Face folders with seeded random weights (std 0.02) in bge-small-zh-v1.5's shape
(BERT, hidden 512, 4 layers, 8 heads, FFN 2048, vocabulary 21,128, 512 positions), once, into a cache
folder:
  embed/   BertModel + CLS pooling (1_Pooling), as bge-small-zh-v1.5
  rerank/  BertForSequenceClassification with one label (a cross-encoder of the same shape)
and exports each to ONNX twice (torch.onnx.export of the same weights): as exported, and after
onnxruntime.transformers' BERT optimizer (fused attention, LayerNorm and GELU), the form ORT recommends
for BERT on CPU. Then times, on the same token ids and thread count:
  attn   build/release/bench/encoder_bench (SentenceEncoder::embed_ids: CLS pooled, normalised vectors;
         CrossEncoder::logits: one logit per pair)
  ort    ONNX Runtime on the plain export (CLS pooling and normalisation in numpy)
  ort-opt  ONNX Runtime on the optimizer's graph
for a batch of 32 sequences (throughput) and one sequence (latency), R rounds alternated, best of each.
attn's ratio is to the faster ORT form. Goals (issue 38): >= 1.2x throughput at batch 32, >= 1.0x
latency for one pair.

  python3 bench/encoder_arch_bench.py [--threads 2] [--batch 32] [--seq 128] [--latency-seq 64]
                                     [--rounds 3] [--min-time 2] [--cache DIR] [--clock wall|thread]

--clock thread (with --threads 1): each engine's calling thread's CPU time, which other processes on a
busy machine do not inflate. Each round also checks that attn's outputs (the first vector, every pair's
logit) equal ORT's to 1e-3 of their size, so a wrongly loaded folder is not timed.

Needs torch, transformers, onnx, onnxruntime (pip; never a build or test dependency of attn).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = dict(vocab_size=21128, hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
             intermediate_size=2048, max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
             layer_norm_eps=1e-12, initializer_range=0.02)
QUERY = 16  # query tokens of a pair (encoder_bench --query)


def word(i, j, vocab):
    return 1000 + (i * 7919 + j * 104729) % (vocab - 1000)


def sentence_ids(batch, seq, vocab):
    """encoder_bench.cc's sentence_ids(): [CLS] w_1 .. w_{seq-2} [SEP]."""
    out = np.empty((batch, seq), dtype=np.int64)
    for i in range(batch):
        out[i] = [101] + [word(i, j, vocab) for j in range(1, seq - 1)] + [102]
    return out, np.zeros_like(out)


def pair_ids(batch, seq, vocab):
    """encoder_bench.cc's pair_ids(): [CLS] q [SEP] d [SEP], token types 0 .. 0 1 .. 1."""
    ids = np.empty((batch, seq), dtype=np.int64)
    types = np.zeros((batch, seq), dtype=np.int64)
    for i in range(batch):
        row = [101]
        for j in range(1, seq - 2):
            row.append(word(i, j, vocab))
            if j == QUERY:
                row.append(102)
        row.append(102)
        ids[i] = row
        types[i, QUERY + 2:] = 1
    return ids, types


def write_vocab(path, size):
    # BERT's layout: [PAD] 0, [unused*], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, then pieces.
    words = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    cjk = 0x4E00
    while len(words) < size:
        n = len(words)
        words.append(chr(cjk + n) if n % 3 else f"##{chr(cjk + n)}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(words[:size]) + "\n")


def make_folder(path, kind):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    if os.path.exists(os.path.join(path, "model.safetensors")):
        return
    os.makedirs(path, exist_ok=True)
    torch.manual_seed(38 if kind == "embed" else 39)
    if kind == "embed":
        model = BertModel(BertConfig(**SHAPE), add_pooling_layer=False)
    else:
        model = BertForSequenceClassification(BertConfig(num_labels=1, **SHAPE))
    model.eval().save_pretrained(path, safe_serialization=True)
    write_vocab(os.path.join(path, "vocab.txt"), SHAPE["vocab_size"])
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "model_max_length": 512, "tokenizer_class": "BertTokenizer"}, f)
    if kind == "embed":
        os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
        with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
            json.dump({"word_embedding_dimension": SHAPE["hidden_size"], "pooling_mode_cls_token": True,
                       "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
                       "pooling_mode_mean_sqrt_len_tokens": False}, f)


def export_onnx(folder, kind, out):
    import torch
    from transformers import BertForSequenceClassification, BertModel

    if os.path.exists(out):
        return
    cls = BertModel if kind == "embed" else BertForSequenceClassification
    model = cls.from_pretrained(folder, attn_implementation="eager").eval()

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            r = self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return r.last_hidden_state if kind == "embed" else r.logits

    ids = torch.ones(2, 16, dtype=torch.int64)
    axes = {0: "batch", 1: "seq"}
    kwargs = dict(input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["out"],
                  dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                "out": {0: "batch"} if kind == "rerank" else axes},
                  opset_version=17)
    with torch.no_grad():
        try:
            torch.onnx.export(Wrap(model), (ids, ids, torch.zeros_like(ids)), out, dynamo=False, **kwargs)
        except TypeError:  # older torch without the dynamo flag
            torch.onnx.export(Wrap(model), (ids, ids, torch.zeros_like(ids)), out, **kwargs)


def optimize_onnx(src, out):
    if os.path.exists(out):
        return
    from onnxruntime.transformers import optimizer

    m = optimizer.optimize_model(src, model_type="bert", num_heads=SHAPE["num_attention_heads"],
                                 hidden_size=SHAPE["hidden_size"], opt_level=1)
    m.save_model_to_file(out)


def ort_runner(path, kind, threads):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def run(ids, types):
        r = sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": types})[0]
        if kind == "rerank":
            return r[:, 0]
        e = r[:, 0]
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    return run, f"onnxruntime {ort.__version__}"


CLOCK = time.perf_counter


def time_median(fn, min_time, min_reps):
    fn()
    ts = []
    start = time.perf_counter()
    while len(ts) < min_reps or time.perf_counter() - start < min_time:
        t = CLOCK()
        fn()
        ts.append(CLOCK() - t)
        if len(ts) >= 1000:
            break
    return statistics.median(ts)


def run_attn(a, folder):
    cmd = [a.bench, "--model", folder, "--threads", str(a.threads), "--batch", str(a.batch), "--seq",
           str(a.seq), "--latency-seqs", str(a.latency_seq), "--query", str(QUERY), "--min-time", str(a.min_time)]
    if a.clock == "thread":
        cmd += ["--clock", "thread"]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    values = np.array(next(r["values"] for r in rows if r["case"] == "values"), dtype=np.float64)
    PEAK[0] = max(PEAK[0], next(r["fma_peak_gflops"] for r in rows if r["case"] == "peak"))
    return {r["case"]: r["seconds"] for r in rows if r["case"] in ("throughput", "latency")}, values


def run_ort(a, path, kind):
    run, version = ort_runner(path, kind, a.threads)
    make = sentence_ids if kind == "embed" else pair_ids
    big, one = make(a.batch, a.seq, SHAPE["vocab_size"]), make(1, a.latency_seq, SHAPE["vocab_size"])
    out = run(*big)
    values = out if kind == "rerank" else out[0]
    return {"throughput": time_median(lambda: run(*big), a.min_time, 3),
            "latency": time_median(lambda: run(*one), a.min_time / 2, 5)}, version, values


PEAK = [0.0]  # the best FMA peak (GFLOP/s) encoder_bench measured on the threads


def model_gflop(seq):
    """One sequence's forward in the usual count (every token through every layer: 2 FLOP per
    multiply-add of the four products and of the two attention products), whatever an engine skips."""
    c, f, n = SHAPE["hidden_size"], SHAPE["intermediate_size"], SHAPE["num_hidden_layers"]
    return n * (2 * seq * (4 * c * c + 2 * c * f) + 4 * seq * seq * c) / 1e9


def cpu_name():
    name, flags = platform.processor(), []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    flags = [x for x in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16") if x in have]
                    break
    except OSError:
        pass
    return f"{name} ({' '.join(flags) or 'no AVX2'})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--latency-seq", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--kinds", default="embed,rerank")
    ap.add_argument("--clock", default="wall", choices=["wall", "thread"])
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "attn", "arch-bench",
                                                    "bge-small-zh"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "release", "bench", "encoder_bench"))
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    for kind in kinds:
        folder = os.path.join(a.cache, kind)
        make_folder(folder, kind)
        export_onnx(folder, kind, os.path.join(a.cache, f"{kind}.onnx"))
        optimize_onnx(os.path.join(a.cache, f"{kind}.onnx"), os.path.join(a.cache, f"{kind}.opt.onnx"))
    global CLOCK
    if a.clock == "thread":
        if a.threads != 1:
            sys.exit("--clock thread needs --threads 1 (each engine then computes on its calling thread)")
        CLOCK = time.thread_time
    best, version, max_diff = {}, "?", {}
    for r in range(a.rounds):
        for kind in kinds:
            rows, values = {}, {}
            rows["attn"], values["attn"] = run_attn(a, os.path.join(a.cache, kind))
            rows["ort"], version, values["ort"] = run_ort(a, os.path.join(a.cache, f"{kind}.onnx"), kind)
            rows["ort-opt"], _, values["ort-opt"] = run_ort(a, os.path.join(a.cache, f"{kind}.opt.onnx"), kind)
            for e in ("ort", "ort-opt"):  # the same function: outputs agree to f32 rounding
                diff = float(np.max(np.abs(values["attn"] - values[e])))
                scale = float(np.max(np.abs(values[e])))
                if not diff <= 1e-3 * max(scale, 1e-3):
                    sys.exit(f"{kind}: attn's outputs differ from {e}'s by {diff:.3g} (largest |value| "
                             f"{scale:.3g}); the engines do not compute the same function")
                max_diff[(kind, e)] = max(max_diff.get((kind, e), 0.0), diff)
            for engine, cases in rows.items():
                for case, s in cases.items():
                    key = (kind, case, engine)
                    best[key] = min(best.get(key, float("inf")), s)
            print(f"round {r + 1}, {kind}: " + ", ".join(
                f"{e} {c['throughput'] * 1e3:.1f} / {c['latency'] * 1e3:.2f} ms" for e, c in rows.items()),
                file=sys.stderr, flush=True)
    print(f"bge-small-zh-shaped BERT (random weights), {a.threads} threads, {a.clock} clock, best of {a.rounds} "
          f"alternated rounds; CPU: {cpu_name()}; peer: {version}; largest |attn - ORT| on the outputs: " +
          ", ".join(f"{k} {e} {d:.2g}" for (k, e), d in max_diff.items()) +
          f"; measured FMA peak {PEAK[0]:.0f} GFLOP/s on {a.threads} thread(s); '% peak': the model's usual "
          f"FLOP count (every token through every layer) / time / peak")
    print()
    print("| model | case | attn | ORT (export) | ORT (BERT optimizer) | attn / faster ORT | goal | attn % peak |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for kind in kinds:
        name = "encoder (CLS, normalised)" if kind == "embed" else "reranker (one logit per pair)"
        for case in ("throughput", "latency"):
            t = {e: best[(kind, case, e)] for e in ("attn", "ort", "ort-opt")}
            peer = min(t["ort"], t["ort-opt"])
            if case == "throughput":
                fmt = lambda s: f"{a.batch / s:.1f} seq/s"
                label, goal, gflop = f"batch {a.batch} × {a.seq} tokens", "1.2×", a.batch * model_gflop(a.seq)
            else:
                fmt = lambda s: f"{s * 1e3:.2f} ms"
                label, goal, gflop = f"1 × {a.latency_seq} tokens", "1.0×", model_gflop(a.latency_seq)
            print(f"| {name} | {label} | {fmt(t['attn'])} | {fmt(t['ort'])} | {fmt(t['ort-opt'])} | "
                  f"**{peer / t['attn']:.2f}×** | {goal} | {100 * gflop / t['attn'] / PEAK[0]:.0f}% |")


if __name__ == "__main__":
    main()
