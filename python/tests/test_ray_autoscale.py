"""Scaling on queue depth (issue 39, docs/scale.md): attn serve behind Ray Serve with one replica and
room for two. Concurrent chat requests keep more requests in flight per replica than the target, so
the autoscaler starts the second replica; when the load stops it goes back to one. Every request is
answered. Slow (a Ray instance, up to two servers, about a minute): scripts/test-python.sh --slow."""

import concurrent.futures
import json
import os
import socket
import time
import urllib.request

import pytest

import attn

pytestmark = pytest.mark.slow
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# the replicas and handles report their queues every half second (Ray's default is 10 s); read by the
# processes this test's Ray instance starts
os.environ.setdefault("RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S", "0.5")
os.environ.setdefault("RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S", "0.5")
ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'attn[ray]')")
serve = pytest.importorskip("ray.serve", reason="ray[serve] is not installed")


def _cli():
    from test_models import _cli as find

    return find()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _running_replicas():
    app = serve.status().applications.get("attn")
    if app is None or "AttnReplica" not in app.deployments:
        return 0
    return int(app.deployments["AttnReplica"].replica_states.get("RUNNING", 0))


def _wait_for(what, predicate, timeout_s):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout_s} s: {_running_replicas()} replicas running")


def _chat(url, i):
    body = json.dumps({"model": "smollm2", "max_tokens": 48, "temperature": 0,
                       "messages": [{"role": "user", "content": f"Tell me a story about the number {i}."}]})
    req = urllib.request.Request(url + "/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=240) as r:
        return r.status, json.loads(r.read())


def test_replicas_follow_the_queue_depth():
    from attn.ray.serve import build_app

    cli = _cli()
    try:
        attn.Generator("smollm2", max_context=64)
    except OSError as e:
        pytest.skip(f"the models are not installed (docs/models.md): {e}")
    ray.init(address="local", num_cpus=2, _node_ip_address="127.0.0.1", include_dashboard=False,
             log_to_driver=False)
    port = _free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        args = ["--generate", "smollm2", "--parallel", "4", "--context", "256"]
        fast = dict(look_back_period_s=2.0, upscale_delay_s=1.0, downscale_delay_s=4.0)
        serve.run(build_app(args, replicas=1, max_replicas=2, threads=1, target_ongoing_requests=1,
                            binary=cli, autoscaling=fast), name="attn", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        assert _running_replicas() == 1
        # 24 requests, 6 in flight at a time: 6 per replica against a target of 1 until a second one runs
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = [pool.submit(_chat, url, i) for i in range(24)]
            _wait_for("a second replica under load", lambda: _running_replicas() == 2, 120)
            results = [a.result() for a in answers]
        assert all(status == 200 for status, _ in results)
        assert all(r["choices"][0]["message"]["content"] for _, r in results)
        _wait_for("back to one replica without load", lambda: _running_replicas() == 1, 120)
    finally:
        serve.shutdown()
        ray.shutdown()
