#!/usr/bin/env python3
"""`attn serve` as a hostile client meets it: the table of docs/serve.md ("tried / refused / crashed").

Starts the built binary on an ephemeral loopback port (all-MiniLM-L6-v2, and SmolLM2 when installed),
sends each kind of hostile input a bounded number of times over raw sockets, and prints per kind how
many were tried, how many got the expected refusal (or answer), how many got something else, whether
the server was still up afterwards, and how much its RSS grew. Everything goes to 127.0.0.1 only; the
whole run is bounded (about a minute). Exit status 1 when the server died or any answer was unexpected.

  python3 bench/serve/hostile_clients.py [--build build/release] [--seed 1]
"""
import argparse
import json
import os
import random
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
from serve_process import ServeProcess  # noqa: E402

MAX_BODY = 1 << 20


def raw(port, data, shut=False, timeout=15, chunks=None):
    """Sends bytes (or a generator of byte chunks), reads until close; the responses' bytes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        if chunks is not None:
            for c in chunks:
                try:
                    s.sendall(c)
                except OSError:
                    break
        else:
            s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def head(port, extra=b""):
    return b"Host: 127.0.0.1:%d\r\n" % port + extra


class Table:
    def __init__(self, server):
        self.server = server
        self.rows = []
        self.failed = False

    def kind(self, name, expected, tries):
        """tries: a list of callables returning a status (or True/False for custom checks)."""
        rss0 = self.server.rss_kib()
        ok = bad = 0
        examples = []
        for t in tries:
            got = t()
            good = got in expected if not isinstance(got, bool) else got
            ok += good
            bad += not good
            if not good and len(examples) < 3:
                examples.append(got)
        alive = self.server.proc.poll() is None and self.server.health() == 200
        grew = (self.server.rss_kib() - rss0) / 1024
        self.failed |= bad > 0 or not alive
        self.rows.append((name, len(tries), ok, bad, "up" if alive else "DEAD", grew,
                          ", ".join(str(e) for e in examples)))
        print("%-52s tried %4d  as expected %4d  other %3d  %s  RSS %+7.1f MiB %s" % self.rows[-1], flush=True)

    def markdown(self):
        lines = ["| hostile input | tried | refused or answered as expected | other | server after | RSS growth |",
                 "|---|---|---|---|---|---|"]
        for name, n, ok, bad, alive, grew, _ in self.rows:
            lines.append("| %s | %d | %d | %d | %s | %+.1f MiB |" % (name, n, ok, bad, alive, grew))
        return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    attn = os.path.join(args.build, "attn")
    server_args = ["--embed", "minilm", "--max-body-bytes", str(MAX_BODY), "--header-timeout", "2",
                   "--http-threads", "8"]
    have_chat = True
    try:
        s = ServeProcess(attn, server_args + ["--generate", "smollm2", "--context", "1024"])
    except RuntimeError:
        have_chat = False
        s = ServeProcess(attn, server_args)
    port = s.port
    t = Table(s)
    get = lambda path: status_of(raw(port, b"GET " + path + b" HTTP/1.1\r\n" + head(port) + b"Connection: close\r\n\r\n"))

    def bad_path():
        n = rng.randint(1, 300)
        kind = rng.randrange(3)
        if kind == 0:
            p = b"/" + b"".join(b"%%%02X" % rng.randrange(128, 256) for _ in range(n))
        elif kind == 1:
            p = b"/" + bytes(rng.randrange(128, 256) for _ in range(n))
        else:
            p = b"/" + ("猫" * n).encode()
        return get(p)
    t.kind("paths not UTF-8, or up to 900 bytes of CJK", {404}, [bad_path] * 60)

    post = b"POST /v1/embeddings HTTP/1.1\r\n" + head(port)

    def chunked_flood():
        chunk = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
        return status_of(raw(port, None, chunks=[post + b"Transfer-Encoding: chunked\r\n\r\n"] + [chunk] * 64))
    t.kind("chunked body of 4 MiB over a 1 MiB limit", {413}, [chunked_flood] * 5)
    t.kind("Content-Length 10^23, -1, 1e3, two different", {400, 413}, [
        lambda v=v: status_of(raw(port, post + v + b"\r\n")) for v in
        (b"Content-Length: 100000000000000000000000\r\n", b"Content-Length: -1\r\n", b"Content-Length: 1e3\r\n",
         b"Content-Length: 2\r\nContent-Length: 3\r\n")] * 5)
    t.kind("POST without a length, body until EOF", {411},
           [lambda: status_of(raw(port, post + b"\r\n" + b"{\"input\": \"x\"}" * 1000, shut=True))] * 10)
    t.kind("Content-Encoding: gzip", {415}, [
        lambda: status_of(raw(port, post + b"Content-Encoding: gzip\r\nContent-Length: 10\r\n\r\n" + os.urandom(10)))] * 10)
    t.kind("Content-Length with Transfer-Encoding; gzip, chunked", {400, 501}, [
        lambda: status_of(raw(port, post + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")),
        lambda: status_of(raw(port, post + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"))] * 5)

    def header_flood(n):
        lines = b"".join(b"X-%d: v\r\n" % i for i in range(1000))
        return status_of(raw(port, None, chunks=[b"GET /health HTTP/1.1\r\n" + head(port)] + [lines] * (n // 1000)))
    t.kind("1,000,000 headers (13.9 MB)", {431}, [lambda: header_flood(1000000)] * 2)
    t.kind("one 100 KB header", {431}, [lambda: status_of(raw(port, b"GET /health HTTP/1.1\r\n" + head(port) +
                                                                 b"X-Big: " + b"v" * 100000 + b"\r\n\r\n"))] * 5)
    t.kind("request line of 20 KB", {414}, [lambda: get(b"/" + b"a" * 20000)] * 5)
    t.kind("no Host, no colon, folded header, HTTP/2.0", {400, 505}, [
        lambda: status_of(raw(port, b"GET /health HTTP/1.1\r\n\r\n")),
        lambda: status_of(raw(port, b"GET /health HTTP/1.1\r\n" + head(port) + b"nocolon\r\n\r\n")),
        lambda: status_of(raw(port, b"GET /health HTTP/1.1\r\n" + head(port) + b"A: b\r\n c\r\n\r\n")),
        lambda: status_of(raw(port, b"GET /health HTTP/2.0\r\n\r\n"))] * 5)

    def random_bytes():
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 2000)))
        st = status_of(raw(port, data, shut=True, timeout=5))
        return st is None or 400 <= st < 600  # closed without an answer (an empty request) or refused
    t.kind("random bytes (1 to 2,000)", {True}, [random_bytes] * 100)

    # Slow loris: 32 sockets sending a byte every 0.5 s, while normal requests keep coming.
    def slowloris():
        socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(32)]
        msg = b"GET /health HTTP/1.1\r\n" + head(port) + b"X-Slow: " + b"a" * 1000
        t0 = time.time()
        worst = 0
        i = 0
        while time.time() - t0 < 4:
            for so in socks:
                try:
                    so.send(msg[i:i + 1])
                except OSError:
                    pass
            i += 1
            a = time.time()
            st = s.health()
            worst = max(worst, time.time() - a)
            if st != 200:
                return False
            time.sleep(0.5)
        statuses = [status_of(raw_read(so)) for so in socks]
        for so in socks:
            so.close()
        return worst < 1.0 and all(x == 408 for x in statuses)

    def raw_read(so):
        out = b""
        try:
            while True:
                b = so.recv(4096)
                if not b:
                    break
                out += b
        except OSError:
            pass
        return out
    t.kind("32 slow-loris sockets, 1 byte / 0.5 s (8 threads)", {True}, [slowloris])

    def pipelined():
        n = 20
        reqs = b"".join(b"GET /health HTTP/1.1\r\n" + head(port) + b"X-N: %d\r\n\r\n" % i for i in range(n - 1))
        reqs += b"GET /v1/models HTTP/1.1\r\n" + head(port) + b"Connection: close\r\n\r\n"
        out = raw(port, reqs)
        return out.count(b"HTTP/1.1 200") == n and out.rfind(b"\"object\":\"list\"") > out.rfind(b"\"status\"")
    t.kind("20 pipelined requests in one write", {True}, [pipelined] * 5)
    t.kind("400 overlapping ranges on /v1/models", {True}, [
        lambda: b"multipart" not in raw(port, b"GET /v1/models HTTP/1.1\r\n" + head(port) + b"Range: bytes=" +
                                        b",".join([b"0-100"] * 400) + b"\r\nConnection: close\r\n\r\n")] * 5)
    t.kind("Host: evil.example (DNS rebinding)", {403}, [
        lambda: status_of(raw(port, b"GET /v1/models HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"))] * 5)
    def with_body(extra, body):
        return status_of(raw(port, post + extra + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body))
    t.kind("cross-site text/plain POST", {403}, [
        lambda: with_body(b"Origin: http://evil.example\r\nContent-Type: text/plain\r\n", b"{\"input\": \"x\"}")] * 5)
    t.kind("JSON with curl's form type, 20 KB", {200}, [
        lambda: with_body(b"Content-Type: application/x-www-form-urlencoded\r\n",
                          b"{\"truncate\": true, \"input\": \"" + b"a " * 10000 + b"\"}")] * 3)

    def error_has_code(body):
        out = raw(port, post + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        try:
            e = json.loads(out.split(b"\r\n\r\n", 1)[1])["error"]
            return e["code"] is not None and len(out) < 4096
        except (ValueError, KeyError, IndexError):
            return False
    t.kind("bad JSON bodies: error has a code, under 4 KB", {True}, [
        lambda b=b: error_has_code(b) for b in (b"{", b"[]", b"{\"input\": 1" + b"9" * 100000 + b"}", b"\xff\xfe",
                                                  b"{\"input\": [" + b"[" * 100 + b"]}", b"{\"input\": null}")] * 3)
    def attention_bomb():
        body = json.dumps({"input": "the cat sat on the mat " * 40,
                           "attention": {"layers": [0] * 64, "heads": [0] * 64}}).encode()
        out = raw(port, post + b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                  % len(body) + body)
        return status_of(out) == 400 and b"duplicate_index" in out
    t.kind("attention with 64 x 64 repeated indices (1.7 KB)", {True}, [attention_bomb] * 5)
    if have_chat:
        def chat(seed):
            body = json.dumps({"messages": [{"role": "user", "content": "写一首关于猫的诗，用很多表情符号 🐱🎉"}],
                               "max_tokens": 64, "temperature": 2, "seed": seed}).encode()
            out = raw(port, b"POST /v1/chat/completions HTTP/1.1\r\n" + head(port) +
                      b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body,
                      timeout=120)
            try:
                out.split(b"\r\n\r\n", 1)[1].decode("utf-8")
            except (UnicodeDecodeError, IndexError):
                return False
            return status_of(out) == 200
        t.kind("chat at temperature 2, emoji prompt (30 seeds)", {True}, [lambda i=i: chat(i) for i in range(30)])
    print()
    print(t.markdown())
    rc = s.stop()
    print("\nexit status after SIGTERM: %d" % rc)
    return 1 if t.failed or rc != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
