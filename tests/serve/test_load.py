#!/usr/bin/env python3
"""A bounded load test of `attn serve` on 127.0.0.1 (ctest label "slow").

Phase 1: 16 concurrent clients send 2,000 embedding requests in all (keep-alive connections) while
8 chat streams run; every answer must be complete and correct (zero errors), the server's RSS stays
bounded, and /metrics counts every request.
Phase 1b (issue 37): 64 chat streams at once (16 in the batch, the rest queued), a third of them
hanging up after a few chunks (chosen at random, seeded): every other stream ends whole with
`data: [DONE]`, zero errors; afterwards no sequence runs and only the prefix cache holds KV blocks
(the pool's reserved bytes equal its cached bytes), and the RSS stays bounded.
Phase 2: clients keep sending embedding requests and 4 streams run while the server gets SIGTERM:
every response that had begun (status line received) must arrive whole (streams end with
`data: [DONE]`, those still waiting for a generation slot included); connections refused or closed
before a response began, and 503 shutting_down answers, are the server no longer accepting, not
losses. The server exits with status 0.

usage: test_load.py ATTN_BINARY   (exits 77, skipped, when a model is not installed)
"""
import http.client
import json
import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import ServeProcess  # noqa: E402

SKIP = 77
ATTN = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ATTN_CLI", "")
CLIENTS, REQUESTS, STREAMS = 16, 2000, 8
RSS_LIMIT_MIB = 2048        # the whole process, models included
RSS_GROWTH_LIMIT_MIB = 512  # from after loading to the end of phase 1
TIME_LIMIT_S = 600

SENTENCES = ["The cat sat on the mat number %d.", "A man is eating food %d times.", "猫が好きです %d",
             "Dynamic batching groups requests that arrive together (%d)."]


def embed_body(i):
    return json.dumps({"input": SENTENCES[i % 4] % i, "model": "all-MiniLM-L6-v2"}).encode()


def chat_body(i, max_tokens):
    return json.dumps({"messages": [{"role": "user", "content": "Tell me a fact about the number %d." % i}],
                       "max_tokens": max_tokens, "temperature": 0.7, "seed": i, "stream": True}).encode()


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = 0
        self.errors = []
        self.not_begun = 0
        self.streams_done = 0

    def add(self, field, n=1):
        with self.lock:
            setattr(self, field, getattr(self, field) + n)

    def error(self, what):
        with self.lock:
            self.errors.append(what)


def check_embedding(data):
    b = json.loads(data)
    v = b["data"][0]["embedding"]
    assert len(v) == 384, len(v)
    n = sum(x * x for x in v)
    assert abs(n - 1) < 1e-3, n


def read_stream(resp):
    """The text of an SSE stream; raises unless it ended with [DONE]."""
    body = resp.read().decode()
    events = [e[len("data: "):] for e in body.split("\n\n") if e.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        raise AssertionError("stream ended without [DONE]: %r" % body[-200:])
    for e in events[:-1]:
        c = json.loads(e)
        if "error" in c:
            raise AssertionError("stream error: %s" % e)
    return events


def embed_client(port, ids, counts, stop_on_refusal=False):
    conn = None
    for i in ids:
        begun = False
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("POST", "/v1/embeddings", body=embed_body(i), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            begun = True
            data = resp.read()
            if resp.status == 503 and stop_on_refusal and b'"shutting_down"' in data:
                counts.add("not_begun")  # refused after SIGTERM, with Retry-After: no work was lost
                return
            if resp.status != 200:
                counts.error("status %d: %s" % (resp.status, data[:200]))
                continue
            check_embedding(data)
            counts.add("ok")
        except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as e:
            if begun or not stop_on_refusal:
                counts.error("request %d: %r" % (i, e))
            else:
                counts.add("not_begun")
            conn = None
            if stop_on_refusal:
                return
        except Exception as e:  # noqa: BLE001 (any other failure is an error of the server)
            counts.error("request %d: %r" % (i, e))
            conn = None


def stream_client(port, seeds, counts, max_tokens, tolerate_refusal=False):
    for i in seeds:
        begun = False
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            conn.request("POST", "/v1/chat/completions", body=chat_body(i, max_tokens),
                         headers={"Content-Type": "application/json", "Connection": "close"})
            resp = conn.getresponse()
            begun = True
            if resp.status != 200:
                counts.error("stream status %d: %s" % (resp.status, resp.read()[:200]))
                continue
            read_stream(resp)
            counts.add("streams_done")
            conn.close()
        except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected) as e:
            if begun or not tolerate_refusal:
                counts.error("stream %d: %r" % (i, e))
            else:
                counts.add("not_begun")
            return
        except Exception as e:  # noqa: BLE001
            counts.error("stream %d: %r" % (i, e))


def main():
    if not ATTN or not os.access(ATTN, os.X_OK):
        print("usage: test_load.py ATTN_BINARY")
        return 2
    try:
        server = ServeProcess(ATTN, ["--embed", "minilm", "--generate", "smollm2", "--parallel", "16",
                                     "--context", "512", "--max-wait-ms", "5"])
    except RuntimeError as e:
        if "not installed" in str(e) or "not found" in str(e):
            print("SKIP: %s" % e)
            return SKIP
        raise
    start = time.time()
    rss0 = server.rss_kib() / 1024
    peak = [rss0]
    sampling = [True]

    def sample():
        while sampling[0]:
            try:
                peak[0] = max(peak[0], server.rss_kib() / 1024)
            except OSError:
                return
            time.sleep(0.1)
    threading.Thread(target=sample, daemon=True).start()

    # ---- phase 1 ---------------------------------------------------------------------------------
    counts = Counts()
    streams = [threading.Thread(target=stream_client, args=(server.port, [s, s + 100], counts, 24))
               for s in range(STREAMS)]
    clients = [threading.Thread(target=embed_client, args=(server.port, range(c, REQUESTS, CLIENTS), counts))
               for c in range(CLIENTS)]
    for t in streams + clients:
        t.start()
    for t in clients + streams:
        t.join(timeout=TIME_LIMIT_S)
        assert not t.is_alive(), "a client hung"
    t1 = time.time() - start
    print("phase 1: %d embedding requests, %d streams in %.1f s; RSS %.0f MiB after loading, peak %.0f MiB"
          % (counts.ok, counts.streams_done, t1, rss0, peak[0]))
    assert not counts.errors, counts.errors[:5]
    assert counts.ok == REQUESTS, counts.ok
    assert counts.streams_done == 2 * STREAMS, counts.streams_done
    assert peak[0] < RSS_LIMIT_MIB, peak[0]
    assert peak[0] - rss0 < RSS_GROWTH_LIMIT_MIB, (rss0, peak[0])
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    c.request("GET", "/metrics")
    metrics = c.getresponse().read().decode()
    c.close()
    line = [m for m in metrics.splitlines() if m.startswith('attn_requests_total{endpoint="/v1/embeddings",status="200"}')]
    assert line and int(line[0].split()[-1]) == REQUESTS, line

    # ---- phase 1b: 64 streams, random disconnects ------------------------------------------------
    rng = random.Random(37)
    leavers = set(rng.sample(range(64), 21))
    counts1b = Counts()

    def leaving_client(i):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
            conn.request("POST", "/v1/chat/completions", body=chat_body(1000 + i, 32),
                         headers={"Content-Type": "application/json", "Connection": "close"})
            resp = conn.getresponse()
            if resp.status != 200:
                counts1b.error("leaver status %d" % resp.status)
                return
            for _ in range(rng.randint(1, 4)):
                resp.readline()
            resp.close()  # hang up mid-stream (Connection: close: the response holds the socket)
            conn.close()
            counts1b.add("not_begun")
        except Exception as e:  # noqa: BLE001
            counts1b.error("leaver %d: %r" % (i, e))

    threads = [threading.Thread(target=leaving_client, args=(i,)) if i in leavers else
               threading.Thread(target=stream_client, args=(server.port, [1000 + i], counts1b, 32))
               for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=TIME_LIMIT_S)
        assert not t.is_alive(), "a stream hung"
    assert not counts1b.errors, counts1b.errors[:5]
    assert counts1b.streams_done == 64 - len(leavers), counts1b.streams_done
    deadline = time.time() + 30
    while True:
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        c.request("GET", "/metrics")
        m = dict(line.rsplit(" ", 1) for line in c.getresponse().read().decode().splitlines()
                 if line and not line.startswith("#"))
        c.close()
        if float(m['attn_generate_sequences{state="running"}']) == 0 or time.time() > deadline:
            break
        time.sleep(0.2)
    assert float(m['attn_generate_sequences{state="running"}']) == 0, m
    assert m['attn_kv_cache_bytes{state="reserved"}'] == m['attn_kv_cache_bytes{state="cached"}'], m
    print("phase 1b: %d of 64 streams whole, %d hung up; %s steps, %s preemptions; RSS peak %.0f MiB"
          % (counts1b.streams_done, len(leavers), m["attn_generate_steps_total"], m["attn_preemptions_total"],
             peak[0]))
    assert peak[0] < RSS_LIMIT_MIB, peak[0]

    # ---- phase 2: SIGTERM in the middle -----------------------------------------------------------
    counts2 = Counts()
    streams = [threading.Thread(target=stream_client, args=(server.port, [s], counts2, 48, True)) for s in range(4)]
    clients = [threading.Thread(target=embed_client,
                                args=(server.port, range(c, 10 ** 6, 8), counts2, True)) for c in range(8)]
    for t in streams + clients:
        t.start()
    time.sleep(1.0)
    server.proc.send_signal(signal.SIGTERM)
    for t in clients + streams:
        t.join(timeout=TIME_LIMIT_S)
        assert not t.is_alive(), "a client hung after SIGTERM"
    status = server.stop()
    sampling[0] = False
    print("phase 2: %d embedding responses whole, %d streams whole, %d requests not begun (refused after "
          "SIGTERM); exit status %d" % (counts2.ok, counts2.streams_done, counts2.not_begun, status))
    assert not counts2.errors, counts2.errors[:5]
    assert counts2.ok > 0 and counts2.streams_done == 4, (counts2.ok, counts2.streams_done)
    assert status == 0, "".join(server.stderr_lines)
    print("ok in %.1f s" % (time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
