"""attn.Reranker on the small random-weight cross-encoders of tests/models/data/hf_encoders (written by
python/reference/rerank_fixtures.py): scores equal to transformers' (the committed fixture, and torch
itself when installed), rank() in the POST /v1/rerank shape, the attention weights equal to
output_attentions, and bad input refused by name."""

import json
import os

import numpy as np
import pytest

import attn

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "models", "data")
FOLDERS = ["bert_cls", "xlmr_cls_bf16_sharded"]


def _ref():
    with open(os.path.join(DATA, "rerank_reference.json"), encoding="utf-8") as f:
        return json.load(f)


def _folder(name):
    return os.path.join(DATA, "hf_encoders", name)


@pytest.mark.parametrize("name", FOLDERS)
def test_predict_equals_the_transformers_fixture(name):
    r = attn.Reranker(_folder(name))
    pairs = _ref()[name]["pairs"]
    logits = r.predict([(p["query"], p["document"]) for p in pairs], raw_scores=True)
    assert logits.dtype == np.float32 and logits.shape == (len(pairs),)
    np.testing.assert_allclose(logits, [p["logits"][0] for p in pairs], atol=2e-5)
    probs = r.predict([(p["query"], p["document"]) for p in pairs])
    np.testing.assert_allclose(probs, 1 / (1 + np.exp(-logits.astype(np.float64))), atol=1e-6)
    assert isinstance(r.predict((pairs[0]["query"], pairs[0]["document"])), float)


def test_rank_orders_by_score_and_cuts_top_n():
    r = attn.Reranker(_folder("xlmr_cls"))
    pairs = _ref()["xlmr_cls"]["pairs"]
    q = pairs[0]["query"]
    docs = [p["document"] for p in pairs if p["query"] == q]
    want = [p["logits"][0] for p in pairs if p["query"] == q]
    full = r.rank(q, docs, raw_scores=True)
    assert [x["index"] for x in full] == sorted(range(len(docs)), key=lambda i: -want[i])
    top = r.rank(q, docs, top_n=2, return_documents=True)
    assert len(top) == 2 and top[0]["index"] == full[0]["index"]
    assert top[0]["document"] == {"text": docs[top[0]["index"]]}
    assert 0.0 < top[1]["relevance_score"] <= top[0]["relevance_score"] < 1.0


def test_attention_equals_output_attentions():
    safetensors = pytest.importorskip("safetensors.numpy", reason="safetensors is not installed")
    want = safetensors.load_file(os.path.join(DATA, "rerank_reference.safetensors"))
    p = _ref()["bert_cls"]["pairs"][0]
    a = attn.Reranker(_folder("bert_cls")).attention(p["query"], p["document"])
    assert len(a["tokens"]) == len(p["ids"])
    for layer, w in enumerate(a["weights"]):
        np.testing.assert_allclose(w, want[f"bert_cls.attn.{layer}"], atol=2e-6)
    assert abs(a["logit"] - p["logits"][0]) < 2e-5


def test_predict_matches_transformers_live():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    m = transformers.BertForSequenceClassification.from_pretrained(_folder("bert_cls_f16"), dtype=torch.float32)
    m.eval()
    p = _ref()["bert_cls_f16"]["pairs"][2]
    with torch.no_grad():
        want = m(input_ids=torch.tensor([p["ids"]]), token_type_ids=torch.tensor([p["type_ids"]])).logits[0, 0]
    got = attn.Reranker(_folder("bert_cls_f16")).predict((p["query"], p["document"]), raw_scores=True)
    assert abs(got - float(want)) < 2e-5


def test_bad_input_is_refused_by_name(tmp_path):
    r = attn.Reranker(_folder("bert_cls"))
    with pytest.raises(TypeError, match="pair 1"):
        r.predict([("q", "d"), ("q", 3)])
    with pytest.raises(ValueError, match="no documents"):
        r.rank("q", [])
    with pytest.raises(ValueError, match="top_n"):
        r.rank("q", ["d"], top_n=0)
    with pytest.raises((OSError, RuntimeError), match="no config.json"):
        attn.Reranker(str(tmp_path))
    with pytest.raises((OSError, RuntimeError), match="XLMRobertaModel"):
        attn.Reranker(_folder("xlmr_model"))
