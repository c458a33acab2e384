"""attn serve replicated with Ray Serve (issue 39, docs/scale.md): two replicas behind one
OpenAI-compatible ingress on 127.0.0.1; the official openai client's embeddings and chat (streamed
and not) through it; requests sharing a prompt prefix land on one replica, whose /metrics counts
the prefix-cache hits. Slow (a Ray instance and two servers): scripts/test-python.sh --slow."""

import json
import os
import socket
import urllib.request

import numpy as np
import pytest

import attn

pytestmark = pytest.mark.slow
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on 127.0.0.1 (see test_ray.py)
os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'attn[ray]')")
serve = pytest.importorskip("ray.serve", reason="ray[serve] is not installed")
openai = pytest.importorskip("openai", reason="the openai client is not installed")

KEY = "test-key-39"
SYSTEM = ("You are the assistant of a small bookshop in Lisbon. You answer questions about opening hours, "
          "orders, returns and book recommendations, briefly and politely, in the customer's language. ") * 2


def _cli():
    from test_models import _cli as find

    return find()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ingress():
    from attn.ray.serve import build_app

    cli = _cli()
    try:
        attn.SentenceEncoder("minilm")
        attn.Generator("smollm2", max_context=64)
    except OSError as e:
        pytest.skip(f"the models are not installed (docs/models.md): {e}")
    ray.init(address="local", num_cpus=3, _node_ip_address="127.0.0.1", include_dashboard=False,
             log_to_driver=False)
    port = _free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        args = ["--embed", "minilm", "--generate", "smollm2", "--parallel", "8", "--context", "512",
                "--api-key", KEY, "--public-metrics"]
        serve.run(build_app(args, replicas=2, threads=1, binary=cli), name="attn", route_prefix="/")
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.fixture(scope="module")
def client(ingress):
    return openai.OpenAI(base_url=ingress + "/v1", api_key=KEY, max_retries=0, timeout=120)


def _metric(url, name, labels):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{labels} is not in {url}/metrics")


def test_health_and_models_through_the_ingress(ingress):
    with urllib.request.urlopen(ingress + "/health", timeout=30) as r:
        assert r.status == 200 and b"ok" in r.read()
    models = urllib.request.Request(ingress + "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(models, timeout=30) as r:
        ids = [m["id"] for m in json.loads(r.read())["data"]]
    assert any("MiniLM" in i for i in ids) and any("SmolLM2" in i for i in ids)
    # The replicas check the key the client sent.
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=ingress + "/v1", api_key="wrong", max_retries=0).models.list()


def test_embeddings_through_the_ingress_equal_the_encoder(client):
    texts = ["这个东西质量很好", "A man is eating food.", "退货很麻烦"]
    data = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts).data
    got = np.array([d.embedding for d in sorted(data, key=lambda d: d.index)], np.float32)
    np.testing.assert_allclose(got, attn.SentenceEncoder("minilm").encode(texts), rtol=0, atol=1e-6)


def test_chat_streamed_and_not_through_the_ingress(client):
    messages = [{"role": "user", "content": "Name three colours."}]
    raw = client.chat.completions.with_raw_response.create(model="SmolLM2-135M-Instruct", messages=messages,
                                                           temperature=0, max_tokens=24)
    reply = raw.parse()
    text = reply.choices[0].message.content
    assert text and reply.choices[0].finish_reason in ("stop", "length") and reply.usage.completion_tokens > 0
    # The same request straight to the replica that answered gives the same greedy text.
    direct = openai.OpenAI(base_url=raw.headers["x-attn-upstream"] + "/v1", api_key=KEY, max_retries=0)
    assert direct.chat.completions.create(model="SmolLM2-135M-Instruct", messages=messages, temperature=0,
                                          max_tokens=24).choices[0].message.content == text
    pieces = []
    for chunk in client.chat.completions.create(model="SmolLM2-135M-Instruct", messages=messages, temperature=0,
                                                max_tokens=24, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    assert len(pieces) > 1 and "".join(pieces) == text


def test_shared_prefix_lands_on_one_replica(client):
    def chat(system, user):
        raw = client.chat.completions.with_raw_response.create(
            model="SmolLM2-135M-Instruct", temperature=0, max_tokens=4,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}])
        raw.parse()
        return raw.headers["x-attn-replica"], raw.headers["x-attn-upstream"]

    # Prompts with nothing in common spread over both replicas; note each replica's URL.
    upstream = {}
    for i in range(16):
        replica, url = chat(f"{i} " + "unrelated system text " * 4, "hi")
        upstream[replica] = url
    assert len(upstream) == 2, upstream
    hits = {r: _metric(u, "attn_prefix_cache_tokens_total", {"result": "hit"}) for r, u in upstream.items()}
    chosen = {chat(SYSTEM, f"Question {i}: when do you open on day {i}?")[0] for i in range(6)}
    assert len(chosen) == 1
    owner = chosen.pop()
    other = next(r for r in upstream if r != owner)
    gained = {r: _metric(u, "attn_prefix_cache_tokens_total", {"result": "hit"}) - hits[r] for r, u in upstream.items()}
    # Five of the six found the system prompt's blocks in the owner's prefix cache; the other replica
    # never saw the prompt.
    assert gained[owner] >= 5 * 32 and gained[other] == 0, gained
