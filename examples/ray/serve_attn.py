#!/usr/bin/env python3
"""Two replicas of `attn serve` behind one OpenAI-compatible ingress with Ray Serve, on this machine
(docs/scale.md). Needs `pip install 'attn[ray]' openai`, the models (docs/models.md) and the attn
command (on PATH, or ATTN_CLI=build/release/attn).

  python3 examples/ray/serve_attn.py [--replicas 2] [--threads 1] [--port 8000] [--keep]
"""
import argparse
import os

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402
from openai import OpenAI  # noqa: E402
from ray import serve  # noqa: E402

from attn.ray.serve import build_app  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="CPUs (and attn threads) per replica")
    ap.add_argument("--port", type=int, default=8000, help="the ingress's port on 127.0.0.1 (0: any free one)")
    ap.add_argument("--keep", action="store_true", help="keep serving until Ctrl-C")
    a = ap.parse_args()

    if a.port == 0:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            a.port = s.getsockname()[1]
    ray.init(address="local", num_cpus=a.replicas * a.threads + 1, include_dashboard=False)
    serve.start(http_options={"host": "127.0.0.1", "port": a.port})
    serve.run(build_app(["--embed", "minilm", "--generate", "smollm2"], replicas=a.replicas, threads=a.threads))
    client = OpenAI(base_url=f"http://127.0.0.1:{a.port}/v1", api_key="unused")

    texts = ["A man is eating food.", "这个东西质量很好"]
    vecs = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts)
    print("embeddings:", [len(d.embedding) for d in vecs.data])
    system = "You are a helpful assistant of a bookshop. Answer in one sentence. " * 3
    for question in ("When do you open?", "Do you sell maps?", "Can I return a book?"):
        raw = client.chat.completions.with_raw_response.create(
            model="SmolLM2-135M-Instruct", temperature=0, max_tokens=32,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": question}])
        print(f"[replica {raw.headers['x-attn-replica']}] {question} -> {raw.parse().choices[0].message.content!r}")
    print("streamed: ", end="")
    for chunk in client.chat.completions.create(model="SmolLM2-135M-Instruct", max_tokens=32, stream=True,
                                                messages=[{"role": "user", "content": "Say hello."}]):
        if chunk.choices:
            print(chunk.choices[0].delta.content or "", end="", flush=True)
    print()
    if a.keep:
        print(f"serving on http://127.0.0.1:{a.port}/v1 (Ctrl-C to stop)")
        try:
            import time
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
