"""N replicas of `attn serve` behind one OpenAI-compatible ingress, with Ray Serve (docs/scale.md).

    from ray import serve
    from attn.ray.serve import build_app
    serve.run(build_app(["--embed", "minilm", "--generate", "smollm2"], replicas=2, threads=1))
    # OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused") works unchanged

Each replica (`AttnReplica`, a Ray actor reserving `threads` CPUs) starts one `attn serve` process on
127.0.0.1 with `--threads` = those CPUs, is ready when its `/health` answers 200 and healthy while it
does; it passes requests through byte for byte (streams as they come). The ingress (`Ingress`, a
FastAPI app) forwards every /v1 request to one replica, chosen by `PrefixRouteRequests`: the replica
that last ran the longest prefix of the prompt (its prefix cache holds those blocks; attn.ray.PrefixRouter)
unless it is overloaded, else the least loaded one. Ray Serve scales the replicas between
min_replicas and max_replicas on queue depth: ongoing requests per replica against
target_ongoing_requests. Every answer names its replica in `x-attn-replica` (and its `attn serve` URL
in `x-attn-upstream`, whose /metrics holds that replica's prefix-cache counters).
"""

import json
import os
import shutil
import subprocess
import threading
import time

from ray import serve
from ray.serve.config import AutoscalingConfig, RequestRouterConfig
from ray.serve.request_router import RequestRouter

from ._batch import worker_threads
from ._routing import PrefixRouter, prompt_text

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response, StreamingResponse
except ImportError as e:  # ray[serve] installs FastAPI
    raise ImportError("attn.ray.serve needs ray[serve] (pip install 'attn[ray]')") from e

__all__ = ["AttnReplica", "Ingress", "PrefixRouteRequests", "build_app", "find_attn"]


def find_attn(binary=None):
    """The `attn` command: binary, $ATTN_CLI, or `attn` on PATH."""
    for c in (binary, os.environ.get("ATTN_CLI"), shutil.which("attn")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise FileNotFoundError("attn.ray.serve: the attn command was not found (pass binary=, set ATTN_CLI, "
                            "or put attn on PATH: docs/install.md)")


class PrefixRouteRequests(RequestRouter):
    """Ray Serve's request router for AttnReplica: prefix affinity (attn.ray.PrefixRouter) over the
    replicas' queue lengths; the chosen replica first, the others by load after it (Ray Serve falls
    back to them when the first is full)."""

    def initialize_state(self, block_chars=64, max_blocks=64, capacity=65536, max_imbalance=4):
        self._prefix = PrefixRouter(block_chars, max_blocks, capacity, max_imbalance)

    async def choose_replicas(self, candidate_replicas, pending_request=None):
        if not candidate_replicas:
            return []
        by_id = {r.replica_id.to_full_id_str(): r for r in candidate_replicas}
        loads = {}
        for rid, r in by_id.items():
            q = self.replica_queue_len_cache.get(r.replica_id)
            loads[rid] = q if q is not None else 0
        text = ""
        if pending_request is not None:
            for arg in list(pending_request.args) + list(pending_request.kwargs.values()):
                if isinstance(arg, dict):
                    text = prompt_text(arg)
                    break
        chosen = self._prefix.choose(text, list(by_id), loads)
        rest = sorted((rid for rid in by_id if rid != chosen), key=lambda rid: loads[rid])
        return [[by_id[chosen]]] + ([[by_id[rid] for rid in rest]] if rest else [])


class AttnReplica:
    """One `attn serve` process (see the module's comment). serve_args: its model options
    (["--generate", "smollm2", "--embed", "minilm", ...]); threads: None = the CPUs Ray gave this
    replica (ray_actor_options num_cpus)."""

    def __init__(self, serve_args, threads=None, binary=None, startup_timeout_s=600):
        import aiohttp  # noqa: F401  (ray[serve] installs it; checked before the process starts)

        self.threads = worker_threads(threads)
        cmd = [find_attn(binary), "serve", "--host", "127.0.0.1", "--port", "0", "--threads", str(self.threads),
               *[str(a) for a in serve_args]]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, text=True)
        self.url = None
        deadline = time.time() + startup_timeout_s
        for line in self.proc.stdout:  # "attn serve: listening on URL" comes at once, before the models load
            if line.startswith("attn serve: listening on "):
                self.url = line.split(" on ", 1)[1].strip().rstrip("/")
                break
        if self.url is None:
            raise RuntimeError(f"attn serve exited ({self.proc.wait()}) before listening: {' '.join(cmd)}")
        threading.Thread(target=self._drain, daemon=True).start()
        while not self._healthy():
            if self.proc.poll() is not None:
                raise RuntimeError(f"attn serve exited with status {self.proc.returncode} while loading")
            if time.time() > deadline:
                raise TimeoutError(f"attn serve at {self.url} was not ready after {startup_timeout_s} s")
            time.sleep(0.2)
        try:
            self.name = serve.get_replica_context().replica_id.unique_id
        except Exception:  # outside Ray Serve (a plain actor)
            self.name = self.url
        self._session = None

    def _drain(self):
        for _ in self.proc.stdout:
            pass

    def _healthy(self):
        import urllib.request

        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    async def _client(self):
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        return self._session

    async def check_health(self):
        """Ray Serve's health check: the process is up and /health answers 200."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"attn serve exited with status {self.proc.returncode}")
        s = await self._client()
        async with s.get(self.url + "/health") as r:
            if r.status != 200:
                raise RuntimeError(f"attn serve /health answered {r.status}")

    def _meta(self, status, headers):
        return dict(status=status, content_type=headers.get("Content-Type", "application/json"),
                    replica=self.name, upstream=self.url)

    @staticmethod
    def _headers(auth):
        h = {"Content-Type": "application/json"}
        if auth:
            h["Authorization"] = auth
        return h

    async def call(self, method, path, body=None, auth=None):
        """One request (auth: the client's Authorization header, for `attn serve --api-key`);
        (meta, body bytes)."""
        s = await self._client()
        data = None if body is None else json.dumps(body).encode("utf-8")
        async with s.request(method, self.url + path, data=data, headers=self._headers(auth)) as r:
            return self._meta(r.status, r.headers), await r.read()

    async def stream(self, path, body, auth=None):
        """A streamed request: first its meta, then the bytes as `attn serve` sends them."""
        s = await self._client()
        async with s.post(self.url + path, data=json.dumps(body).encode("utf-8"), headers=self._headers(auth)) as r:
            yield self._meta(r.status, r.headers)
            async for chunk in r.content.iter_any():
                yield chunk

    def __del__(self):
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()  # attn serve finishes the requests in flight, then exits
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


app = FastAPI(title="attn on Ray Serve")


def _headers(meta):
    return {"x-attn-replica": str(meta["replica"]), "x-attn-upstream": str(meta["upstream"])}


@serve.ingress(app)
class Ingress:
    """The OpenAI-compatible front: /v1/* to a replica (streams streamed), /health 200 while Ray
    Serve has a healthy replica (a replica's /health failing takes it out of the set)."""

    def __init__(self, replicas):
        self.replicas = replicas

    @app.get("/health")
    async def health(self):
        meta, data = await self.replicas.call.remote("GET", "/health")
        return Response(data, status_code=meta["status"], media_type=meta["content_type"], headers=_headers(meta))

    @app.get("/v1/{path:path}")
    async def get(self, path: str, request: Request):
        meta, data = await self.replicas.call.remote("GET", "/v1/" + path, None, request.headers.get("authorization"))
        return Response(data, status_code=meta["status"], media_type=meta["content_type"], headers=_headers(meta))

    @app.post("/v1/{path:path}")
    async def post(self, path: str, request: Request):
        try:
            body = json.loads(await request.body())
        except ValueError as e:
            return JSONResponse({"error": {"message": f"the body is not JSON: {e}", "type": "invalid_request_error",
                                           "param": None, "code": "invalid_json"}}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": {"message": f"the body must be a JSON object; got {type(body).__name__}",
                                           "type": "invalid_request_error", "param": None,
                                           "code": "invalid_request"}}, status_code=400)
        auth = request.headers.get("authorization")  # for `attn serve --api-key`
        if body.get("stream") is True:
            gen = self.replicas.options(stream=True).stream.remote("/v1/" + path, body, auth)
            meta = await gen.__anext__()

            async def rest():
                async for chunk in gen:
                    yield chunk

            return StreamingResponse(rest(), status_code=meta["status"], media_type=meta["content_type"],
                                     headers=_headers(meta))
        meta, data = await self.replicas.call.remote("POST", "/v1/" + path, body, auth)
        return Response(data, status_code=meta["status"], media_type=meta["content_type"], headers=_headers(meta))


def build_app(serve_args, *, replicas=2, max_replicas=None, threads=1, prefix_routing=True,
              target_ongoing_requests=8, max_ongoing_requests=64, binary=None, block_chars=64, max_imbalance=4,
              autoscaling=None):
    """The application for serve.run: `replicas` AttnReplica (each `threads` CPUs and attn threads;
    autoscaled up to max_replicas on ongoing requests per replica when max_replicas > replicas)
    behind one Ingress. prefix_routing=False uses Ray Serve's default router (power of two choices).
    autoscaling: more fields of Ray Serve's AutoscalingConfig (upscale_delay_s, downscale_delay_s,
    metrics_interval_s, look_back_period_s, ...), used when max_replicas > replicas."""
    if int(replicas) < 1 or int(threads) < 1:
        raise ValueError(f"replicas and threads must be at least 1; got replicas={replicas}, threads={threads}")
    options = dict(ray_actor_options={"num_cpus": int(threads)}, max_ongoing_requests=int(max_ongoing_requests),
                   health_check_period_s=5, health_check_timeout_s=30)
    if max_replicas is not None and int(max_replicas) > int(replicas):
        options["autoscaling_config"] = AutoscalingConfig(min_replicas=int(replicas), max_replicas=int(max_replicas),
                                                          target_ongoing_requests=float(target_ongoing_requests),
                                                          **dict(autoscaling or {}))
    else:
        options["num_replicas"] = int(replicas)
    if prefix_routing:
        options["request_router_config"] = RequestRouterConfig(
            request_router_class=PrefixRouteRequests,
            request_router_kwargs=dict(block_chars=int(block_chars), max_imbalance=int(max_imbalance)))
    replica = serve.deployment(AttnReplica, name="AttnReplica", **options)
    ingress = serve.deployment(Ingress, name="Ingress", ray_actor_options={"num_cpus": 0},
                               max_ongoing_requests=1024)
    return ingress.bind(replica.bind(list(serve_args), None, binary))
