"""Start and stop `attn serve` as a process on an ephemeral loopback port (the Python tests of
tests/serve, the browser test of the page at / and bench/serve_bench.py use it)."""
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request


class ServeProcess:
    """`attn serve --port 0 ARGS...`: reads the URL it prints, waits for /health, stops with SIGTERM."""

    def __init__(self, attn, args, env=None, ready_timeout=120):
        self.attn = attn
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen([attn, "serve", "--host", "127.0.0.1", "--port", "0"] + list(args),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, text=True)
        self.stderr_lines = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        line = self.proc.stdout.readline()
        if not line.startswith("attn serve: listening on "):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("attn serve did not start: %r %s" % (line, "".join(self.stderr_lines)))
        self.url = line.strip().rsplit(" ", 1)[1]
        self.port = int(self.url.rsplit(":", 1)[1])
        threading.Thread(target=self._drain_stdout, daemon=True).start()
        deadline = time.time() + ready_timeout
        while True:
            status = self.health()
            if status == 200:
                break
            if self.proc.poll() is not None or time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("attn serve never became ready: %s" % "".join(self.stderr_lines))
            time.sleep(0.05)

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def _drain_stdout(self):
        for _ in self.proc.stdout:
            pass

    def health(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def post(self, path, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self, timeout=60):
        """SIGTERM, then the exit status (0 expected)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("attn serve did not stop within %d s after SIGTERM" % timeout)
