#!/usr/bin/env python3
"""`attn serve` through the official `openai` Python client, and raw HTTP for every bad input.

Starts the built binary on an ephemeral loopback port (all-MiniLM-L6-v2 and SmolLM2) and stops it
with SIGTERM (exit status 0). Embeddings are compared with `attn embed` on the same texts.

usage: test_openai_client.py ATTN_BINARY    (or env ATTN_CLI); runs pytest on itself.
Exits 77 (ctest: skipped) when pytest, numpy or openai is not installed.
"""
import base64
import http.client
import json
import os
import subprocess
import sys

SKIP = 77
if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.environ["ATTN_CLI"] = sys.argv[1]
    import importlib.util
    missing = [m for m in ("pytest", "numpy", "openai") if importlib.util.find_spec(m) is None]
    if missing:
        print("SKIP: the attn serve client tests need the Python packages: " + ", ".join(missing) +
              " (pip install " + " ".join(missing) + ")")
        sys.exit(SKIP)
    import pytest
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))

import numpy as np  # noqa: E402
import openai  # noqa: E402
import pytest  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import ServeProcess  # noqa: E402

ATTN = os.environ.get("ATTN_CLI", "")
TEXTS = ["A man is eating food.", "A man is riding a horse.", "猫が好きです", "x"]
MAX_BODY = 65536


@pytest.fixture(scope="module")
def server():
    if not ATTN or not os.access(ATTN, os.X_OK):
        pytest.skip("set ATTN_CLI to the attn binary")
    try:
        s = ServeProcess(ATTN, ["--embed", "minilm", "--generate", "smollm2", "--context", "1024",
                                "--max-tokens", "64", "--max-inputs", "64", "--max-queued-inputs", "50",
                                "--max-body-bytes", str(MAX_BODY)])
    except RuntimeError as e:
        if "not installed" in str(e) or "not found" in str(e):
            pytest.skip("a model is missing: %s" % e)
        raise
    yield s
    assert s.stop() == 0, "".join(s.stderr_lines)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def attn_embed(texts):
    out = subprocess.run([ATTN, "embed"] + texts, capture_output=True, text=True, check=True).stdout
    return np.array([item["embedding"] for item in json.loads(out)["items"]], dtype=np.float32)


def test_models_lists_both(client):
    ids = {m.id for m in client.models.list()}
    assert {"all-MiniLM-L6-v2", "SmolLM2-135M-Instruct"} <= ids


def test_embeddings_float_equal_attn_embed(client):
    r = client.embeddings.create(model="all-MiniLM-L6-v2", input=TEXTS, encoding_format="float")
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    assert [d.index for d in r.data] == list(range(len(TEXTS)))
    np.testing.assert_allclose(got, attn_embed(TEXTS), atol=2e-5)
    assert r.usage.prompt_tokens == r.usage.total_tokens > len(TEXTS)


def test_embeddings_base64_equal_attn_embed(client):
    # Explicit base64: the client hands back the strings (little-endian float32).
    r = client.embeddings.create(model="all-MiniLM-L6-v2", input=TEXTS, encoding_format="base64")
    got = np.stack([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in r.data])
    np.testing.assert_allclose(got, attn_embed(TEXTS), atol=2e-5)
    # No format: the client asks for base64 itself and decodes it.
    r = client.embeddings.create(model="all-MiniLM-L6-v2", input=TEXTS[0])
    np.testing.assert_allclose(np.array(r.data[0].embedding, dtype=np.float32), attn_embed(TEXTS[:1])[0], atol=2e-5)


def test_chat_with_and_without_streaming(client):
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model="SmolLM2-135M-Instruct", messages=msgs, temperature=0, max_tokens=16)
    text = r.choices[0].message.content
    assert r.choices[0].message.role == "assistant"
    assert text and r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 16
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    pieces, finish = [], None
    stream = client.chat.completions.create(model="SmolLM2-135M-Instruct", messages=msgs, temperature=0,
                                            max_tokens=16, stream=True, stream_options={"include_usage": True})
    usage = None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    assert "".join(pieces) == text
    assert finish == r.choices[0].finish_reason
    assert len(pieces) > 1
    assert usage.completion_tokens == r.usage.completion_tokens


def test_completions_and_stop(client):
    r = client.completions.create(model="SmolLM2-135M-Instruct", prompt="The capital of France is",
                                  max_tokens=8, temperature=0)
    text = r.choices[0].text
    assert text
    cut = text[len(text) // 2:][:2]
    if cut.strip():
        s = client.completions.create(model="SmolLM2-135M-Instruct", prompt="The capital of France is",
                                      max_tokens=8, temperature=0, stop=[cut])
        assert s.choices[0].text == text[:text.index(cut)]
        assert s.choices[0].finish_reason == "stop"


def test_unknown_model_through_the_client(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.embeddings.create(model="text-embedding-3-small", input="a", encoding_format="float")
    assert "text-embedding-3-small" in str(e.value)


# ---- raw HTTP: every bad input --------------------------------------------------------------------

def raw(server, method, path, body=b"", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def expect_error(server, path, body, status, code, words):
    st, headers, data = raw(server, "POST", path, body if isinstance(body, bytes) else body.encode())
    assert st == status, data
    err = json.loads(data)["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == code, err
    for w in words:
        assert w in err["message"], err
    return headers


@pytest.mark.parametrize("body,status,code,words", [
    ('{"input": ', 400, "invalid_json", ["not valid JSON"]),
    (b'{"input": "\xff"}', 400, "invalid_utf8", ["UTF-8"]),
    ('"just a string"', 400, "invalid_json", ["JSON object"]),
    ('{"input": "a", "model": "nope"}', 404, "model_not_found", ["nope"]),
    ('{"input": [%s]}' % ",".join(['"a"'] * 65), 400, "too_many_inputs", ["65", "--max-inputs"]),
    ('{"input": "%s"}' % ("word " * 300), 400, "context_length_exceeded", ["256 tokens"]),
    ('{"input": [1, -4]}', 400, "invalid_token", ["-4"]),
    ('{"input": "a", "encoding_format": "int8"}', 400, "invalid_value", ["encoding_format"]),
    ('{"input": 3}', 400, "invalid_type", ["'input'"]),
])
def test_bad_embedding_requests(server, body, status, code, words):
    expect_error(server, "/v1/embeddings", body, status, code, words)


@pytest.mark.parametrize("body,status,code,words", [
    ('{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 65}', 400, "invalid_value", ["--max-tokens"]),
    ('{"messages": [{"role": "user", "content": "%s"}], "max_tokens": 8}' % ("cat " * 1100), 400,
     "context_length_exceeded", ["--context"]),
    ('{"messages": "hi"}', 400, "missing_messages", ["messages"]),
    ('{"messages": [{"role": "user", "content": "hi"}], "model": "gpt-4o"}', 404, "model_not_found", ["gpt-4o"]),
    ('{"messages": [{"role": "user", "content": "hi"}], "top_p": 0}', 400, "invalid_value", ["top_p"]),
    ('{"messages": [{"role": "user", "content": "hi"}], "stop": [1]}', 400, "invalid_value", ["stop"]),
])
def test_bad_chat_requests(server, body, status, code, words):
    expect_error(server, "/v1/chat/completions", body, status, code, words)


def test_body_too_large_is_413(server):
    expect_error(server, "/v1/embeddings", '{"input": "%s"}' % ("a" * MAX_BODY), 413, "body_too_large",
                 [str(MAX_BODY)])


def test_queue_full_is_429_with_retry_after(server):
    headers = expect_error(server, "/v1/embeddings", '{"input": [%s]}' % ",".join(['"a"'] * 60), 429,
                           "queue_full", ["--max-queued-inputs"])
    assert headers.get("Retry-After") == "1"


def test_unknown_path_is_404(server):
    st, _, data = raw(server, "GET", "/v2/everything")
    assert st == 404 and json.loads(data)["error"]["code"] == "unknown_url"


def test_metrics_count_requests(server):
    st, headers, data = raw(server, "GET", "/metrics")
    text = data.decode()
    assert st == 200 and headers["Content-Type"].startswith("text/plain")
    for name in ("attn_requests_total{endpoint=\"/v1/embeddings\",status=\"200\"}",
                 "attn_request_duration_seconds_bucket", "attn_tokens_total{kind=\"completion\"}",
                 "attn_batch_inputs_bucket", "attn_queue_depth", "attn_ready 1"):
        assert name in text, name


def test_api_key_through_the_client():
    """--api-key: the openai client with the key works; without it, or with another, 401."""
    if not ATTN or not os.access(ATTN, os.X_OK):
        pytest.skip("set ATTN_CLI to the attn binary")
    key = "test-key-0123456789"
    try:
        s = ServeProcess(ATTN, ["--embed", "minilm"], env={"ATTN_API_KEY": key})
    except RuntimeError as e:
        if "not installed" in str(e) or "not found" in str(e):
            pytest.skip("a model is missing: %s" % e)
        raise
    try:
        good = openai.OpenAI(base_url=s.url + "/v1", api_key=key, max_retries=0)
        vecs = good.embeddings.create(model="all-MiniLM-L6-v2", input=["a cat"], encoding_format="float").data
        assert len(vecs) == 1 and len(vecs[0].embedding) == 384
        for wrong in ("none", key + "x"):
            bad = openai.OpenAI(base_url=s.url + "/v1", api_key=wrong, max_retries=0)
            with pytest.raises(openai.AuthenticationError) as err:
                bad.embeddings.create(model="all-MiniLM-L6-v2", input=["a cat"])
            assert err.value.status_code == 401
            assert err.value.body["code"] == "invalid_api_key"
        assert s.health() == 200  # /health needs no key
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        conn.request("GET", "/metrics")
        assert conn.getresponse().status == 401
        conn.close()
    finally:
        assert s.stop() == 0, "".join(s.stderr_lines)
