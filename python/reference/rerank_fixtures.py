#!/usr/bin/env python3
"""Writes small random-weight Hugging Face encoder folders and transformers' outputs on them
(tests/models/data/hf_encoders/), for the C++ parity tests of BERT / XLM-R encoders and
cross-encoders (tests/models/rerank_test.cc, tests/serve, python/tests).

Folders (each: config.json, safetensors, a tokenizer, tokenizer_config.json):
  bert_cls/               BertForSequenceClassification (num_labels 1), f32, tokenizer.json only
                          (WordPiece, BertNormalizer, [CLS] A [SEP] B [SEP] with type ids)
  bert_cls_f16/           the same weights stored as F16, vocab.txt instead of tokenizer.json
  xlmr_cls/               XLMRobertaForSequenceClassification (num_labels 1), f32, a tiny unigram
                          tokenizer.json (trained with sentencepiece on a few sentences, its
                          normalization a small custom rule table, written in XLM-R's form)
  xlmr_cls_bf16_sharded/  the same weights as BF16 in 3 shards with model.safetensors.index.json
  xlmr_model/             XLMRobertaModel (bge-m3 style sentence encoder: CLS pooling in 1_Pooling)

rerank_reference.json holds, per model folder: the query/document pairs, the ids and type ids of
`tokenizers` (longest_first truncation at the tokenizer's model_max_length), transformers' logits
(f32 forward over the weights as stored, f16/bf16 widened), and for the encoder the texts, ids and
CLS vectors. rerank_reference.safetensors holds float32 attention weights (output_attentions, eager)
of pair 0 per layer: "<folder>.attn.<layer>" [H, L, L], and "<folder>.hidden" [L, C] (last layer).

Needs torch, transformers, tokenizers, safetensors, and sentencepiece (only to build the unigram
tokenizer). Deterministic: seeded weights; rerun and commit the outputs.

  python3 python/reference/rerank_fixtures.py
"""
import json
import os
import shutil
import tempfile

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "models", "data", "hf_encoders")
MAX_LEN = 40  # tokenizer_config.json model_max_length: short, so the long documents truncate

QUERY = "what is attention in a transformer?"
DOCS = [
    "Attention lets every token look at every other token and mix their values.",
    "The weather today is sunny with a light breeze.",
    "A transformer stacks layers of self-attention and feed-forward blocks.",
    "Café crème, naïve résumé: accents are normalised.",
    "",
    " ".join(f"token {i} attends to token {i * 7 % 13}." for i in range(30)),
]
PAIRS = [(QUERY, d) for d in DOCS] + [(" ".join(["long query words"] * 20), "short doc"), ("q", "d")]
TEXTS = ["hello world", "attention is all you need", "Café  naïve", "", "a " * 60]

CORPUS = DOCS[:4] + [QUERY, "hello world", "attention is all you need", "long query words short doc",
                     "the cat sat on the mat", "every layer has heads", "q d token attends to"]


def bert_tokenizer():
    words = sorted({w for t in CORPUS for w in t.lower().replace("?", " ").replace(".", " ")
                    .replace(",", " ").replace(":", " ").split()})
    chars = sorted({c for t in CORPUS for c in t.lower()} - {" "})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars if c.isalnum()]
    vocab += [w for w in words if w not in vocab and w.isascii()][:60]
    vocab += ["##ing", "##s", "##ed", "att", "##ention"]
    seen, ordered = set(), []
    for v in vocab:
        if v not in seen:
            seen.add(v)
            ordered.append(v)
    tok = Tokenizer(models.WordPiece({v: i for i, v in enumerate(ordered)}, unk_token="[UNK]",
                                     max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = ordered.index("[CLS]"), ordered.index("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return tok, ordered


def unigram_tokenizer(tmp):
    import sentencepiece as spm  # noqa: PLC0415 (only this builder needs it)
    from sentencepiece import sentencepiece_model_pb2 as pb  # noqa: PLC0415
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for _ in range(20):
            for t in CORPUS:
                f.write(t + "\n")
    rules = os.path.join(tmp, "rules.tsv")
    with open(rules, "w", encoding="utf-8") as f:
        # A few NFKC-like rules (code points as hex): full-width A and a, e + combining acute -> é.
        f.write("FF21\t41\nFF41\t61\n65 301\tE9\n")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(tmp, "spm"), vocab_size=160,
                                   model_type="unigram", normalization_rule_tsv=rules, character_coverage=1.0,
                                   bos_id=1, eos_id=2, unk_id=0, pad_id=-1, hard_vocab_limit=False)
    proto = pb.ModelProto()
    with open(os.path.join(tmp, "spm.model"), "rb") as f:
        proto.ParseFromString(f.read())
    charsmap = proto.normalizer_spec.precompiled_charsmap
    # XLM-R's (fairseq) order: <s> <pad> </s> <unk>, the pieces after spm's 3 specials, then <mask>.
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(p.piece, p.score) for p in proto.pieces[3:]] + [("<mask>", 0.0)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    return tok, len(vocab)


def write_folder(name, model, tok, tok_config, dtype=None, shard=None, vocab_txt=None, pooling=None):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    m = model if dtype is None else model.to(dtype)
    kw = {"max_shard_size": shard} if shard else {}
    m.save_pretrained(d, **kw)
    model.to(torch.float32)
    if tok is not None:
        tok.no_truncation()  # as a model's own file has it: the limit is tokenizer_config.json's
        tok.save(os.path.join(d, "tokenizer.json"))
    if vocab_txt is not None:
        with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(vocab_txt) + "\n")
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tok_config, f, indent=1)
    if pooling:
        os.makedirs(os.path.join(d, "1_Pooling"))
        with open(os.path.join(d, "1_Pooling", "config.json"), "w") as f:
            json.dump({"word_embedding_dimension": model.config.hidden_size, f"pooling_mode_{pooling}": True}, f)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))
    return d


def spread(model):
    """Weights of std 0.2 (LayerNorms around 1 and 0): logits that differ by O(1) between pairs, so the
    parity tolerances are small against the differences (the default std 0.02 gives logits within 1e-3)."""
    g = torch.Generator().manual_seed(380)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    return model


def reload_f32(cls, d, **kw):
    return cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", **kw).eval()


def pair_entry(model, tok, folder, tensors, xlmr):
    tok.enable_truncation(MAX_LEN, strategy="longest_first")
    pairs = []
    with torch.no_grad():
        for i, (q, d) in enumerate(PAIRS):
            e = tok.encode(q, d)
            ids = torch.tensor([e.ids])
            kw = {} if xlmr else {"token_type_ids": torch.tensor([e.type_ids])}
            out = model(input_ids=ids, output_attentions=True, output_hidden_states=True, **kw)
            pairs.append({"query": q, "document": d, "ids": e.ids, "type_ids": e.type_ids,
                          "logits": out.logits[0].tolist()})
            if i == 0:
                for li, a in enumerate(out.attentions):
                    tensors[f"{folder}.attn.{li}"] = a[0].contiguous()
                tensors[f"{folder}.hidden"] = out.hidden_states[-1][0].contiguous()
    return {"pairs": pairs}


def main():
    from transformers import (BertConfig, BertForSequenceClassification, XLMRobertaConfig,  # noqa: PLC0415
                              XLMRobertaForSequenceClassification, XLMRobertaModel)
    os.makedirs(OUT, exist_ok=True)
    ref, tensors = {"max_length": MAX_LEN}, {}
    torch.manual_seed(38)
    btok, bvocab = bert_tokenizer()
    bcfg = BertConfig(vocab_size=len(bvocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=64, type_vocab_size=2, num_labels=1,
                      pad_token_id=0)
    bert = spread(BertForSequenceClassification(bcfg).eval())
    btc = {"do_lower_case": True, "model_max_length": MAX_LEN, "tokenizer_class": "BertTokenizer"}
    for name, dtype, vt in (("bert_cls", None, None), ("bert_cls_f16", torch.float16, bvocab)):
        d = write_folder(name, bert, btok if vt is None else None, btc, dtype=dtype, vocab_txt=vt)
        ref[name] = pair_entry(reload_f32(BertForSequenceClassification, d), btok, name, tensors, False)

    with tempfile.TemporaryDirectory() as tmp:
        utok, uv = unigram_tokenizer(tmp)
    xcfg = XLMRobertaConfig(vocab_size=uv, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=MAX_LEN + 2 + 8, type_vocab_size=1,
                            num_labels=1, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    xlmr = spread(XLMRobertaForSequenceClassification(xcfg).eval())
    xtc = {"model_max_length": MAX_LEN, "tokenizer_class": "XLMRobertaTokenizer"}
    for name, dtype, shard in (("xlmr_cls", None, None), ("xlmr_cls_bf16_sharded", torch.bfloat16, "20KB")):
        d = write_folder(name, xlmr, utok, xtc, dtype=dtype, shard=shard)
        ref[name] = pair_entry(reload_f32(XLMRobertaForSequenceClassification, d), utok, name, tensors, True)

    enc = spread(XLMRobertaModel(xcfg, add_pooling_layer=False).eval())
    d = write_folder("xlmr_model", enc, utok, xtc, pooling="cls_token")
    enc = reload_f32(XLMRobertaModel, d, add_pooling_layer=False)
    utok.enable_truncation(MAX_LEN)
    texts = []
    with torch.no_grad():
        for t in TEXTS:
            e = utok.encode(t)
            h = enc(input_ids=torch.tensor([e.ids])).last_hidden_state[0, 0]
            texts.append({"text": t, "ids": e.ids, "cls": h.tolist()})
    ref["xlmr_model"] = {"texts": texts}
    with open(os.path.join(OUT, "..", "rerank_reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, indent=0)
    save_file({k: v.float() for k, v in tensors.items()}, os.path.join(OUT, "..", "rerank_reference.safetensors"))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
