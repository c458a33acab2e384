#!/usr/bin/env python3
"""Writes tests/models/data/decoders/: one tiny random-weight checkpoint per decoder architecture the
runtime reads (models/runtime/decoder.h), made with `transformers`, written as GGUF by this script's
own converter (the tensor names and metadata keys llama.cpp's GGUF uses), plus the reference outputs of
transformers on a fixed token sequence:

  <name>.gguf   F32 weights     <name>_q8_0.gguf   Q8_0 matrices     qwen2_f16.gguf   F16 matrices
  <name>.json        {"ids", "logits" [N, V] (every position), "attentions" [layers][H][N][N]
                      (output_attentions, eager), "greedy": 6 tokens of greedy generate() after ids}

Checkpoints: llama (Llama 3 RoPE scaling as rope_freqs.weight, untied output), mistral (written as
`llama`, as llama.cpp does), qwen2 (q/k/v biases, tied), qwen3 (q/k norms, head_dim != C/H), phi3
(fused qkv and gate-up, partial rotary, sliding window 6), gemma2 (soft caps, every other layer
sliding, window 4), gemma3 (q/k norms, sliding pattern 3 with a local RoPE base, window 4).

Hugging Face folders (config.json + safetensors, as save_pretrained writes them) of three of them:
  hf_qwen3/   f32, one file          hf_gemma3/  bf16 weights (the reference is the f32 model:
  hf_phi3/    f32 in 4 shards        within bf16 rounding)      with model.safetensors.index.json

(each with tokenizer.json and tokenizer_config.json of the same vocabulary and template).

Every file shares one tiny byte-level BPE vocabulary (tokenizer.ggml.model gpt2, 270 tokens, a ChatML
template) so the same checkpoints run in `attn serve` and `attn generate`.

Needs torch, transformers, gguf, numpy. Deterministic (fixed seeds).
  python3 python/reference/make_decoder_arch_files.py
"""
import json
import math
import os

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

from make_gguf_test_files import gpt2_byte_chars  # GPT-2's byte -> printable character table

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "models", "data", "decoders")

V, C, H, HKV, D, F, LAYERS, CTX = 270, 64, 4, 2, 16, 128, 3, 128
IDS = [5, 17, 100, 33, 260, 7, 42, 99, 150, 3, 77, 201, 64, 12]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


MERGES = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "Ġ t", "Ġt he"]


def tokenizer(w):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = specials + gpt2_byte_chars() + [m.replace(" ", "") for m in MERGES]
    assert len(tokens) == V, len(tokens)
    types = [gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.NORMAL] * (V - 3)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)


def hf_tokenizer(folder):
    """The same vocabulary as tokenizer.json (BPE, ByteLevel without a prefix space, GPT-2's regex) and a
    tokenizer_config.json with the ChatML template, as a Hugging Face folder carries them."""
    from tokenizers import Tokenizer, AddedToken, models, pre_tokenizers, decoders

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    toks = specials + gpt2_byte_chars() + [m.replace(" ", "") for m in MERGES]
    vocab = {t: i for i, t in enumerate(toks)}
    merges = [tuple(m.split(" ")) for m in MERGES]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tk.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "chat_template": CHATML, "add_bos_token": False}, f, indent=1)


def llama3_factors(cfg):
    rs = cfg.rope_parameters if hasattr(cfg, "rope_parameters") else cfg.rope_scaling
    base = rs.get("rope_theta", 10000.0)
    dims = D
    inv = [base ** (-2.0 * i / dims) for i in range(dims // 2)]
    factor, low, high, orig = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    low_wl, high_wl = orig / low, orig / high
    out = []
    for f in inv:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (orig / wl - low) / (high - low)
            scaled = (1 - smooth) * f / factor + smooth * f
            out.append(f / scaled)
    return np.array(out, dtype=np.float32)


def permute(w, n_head):  # llama.cpp's q/k layout for RoPE on pairs
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def make(name):
    import transformers as tr

    torch.manual_seed(1234 + sum(map(ord, name)))
    common = dict(vocab_size=V, hidden_size=C, intermediate_size=F, num_hidden_layers=LAYERS, num_attention_heads=H,
                  num_key_value_heads=HKV, max_position_embeddings=CTX, rms_norm_eps=1e-6, bos_token_id=1,
                  eos_token_id=2, pad_token_id=0)
    if name == "llama":
        cfg = tr.LlamaConfig(**common, tie_word_embeddings=False,
                             rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 64})
        model = tr.LlamaForCausalLM(cfg)
    elif name == "mistral":
        cfg = tr.MistralConfig(**common, tie_word_embeddings=False, sliding_window=None, rope_theta=100000.0)
        model = tr.MistralForCausalLM(cfg)
    elif name == "qwen2":
        cfg = tr.Qwen2Config(**common, tie_word_embeddings=True, rope_theta=1000000.0, use_sliding_window=False)
        model = tr.Qwen2ForCausalLM(cfg)
    elif name == "qwen3":
        cfg = tr.Qwen3Config(**common, head_dim=24, tie_word_embeddings=True, rope_theta=1000000.0)
        model = tr.Qwen3ForCausalLM(cfg)
    elif name == "phi3":
        cfg = tr.Phi3Config(**common, tie_word_embeddings=False, sliding_window=6, partial_rotary_factor=0.5,
                            rope_theta=10000.0)
        model = tr.Phi3ForCausalLM(cfg)
    elif name == "gemma2":
        cfg = tr.Gemma2Config(**common, head_dim=D, sliding_window=4, query_pre_attn_scalar=24,
                              attn_logit_softcapping=50.0, final_logit_softcapping=3.0,
                              hidden_activation="gelu_pytorch_tanh")
        model = tr.Gemma2ForCausalLM(cfg)
    elif name == "gemma3":
        cfg = tr.Gemma3TextConfig(**common, head_dim=D, sliding_window=4, query_pre_attn_scalar=D,
                                  layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                                  rope_theta=1000000.0, rope_local_base_freq=10000.0,
                                  hidden_activation="gelu_pytorch_tanh")
        model = tr.Gemma3ForCausalLM(cfg)
    else:
        raise ValueError(name)
    model.config._attn_implementation = "eager"
    model.eval()
    with torch.no_grad():  # larger random weights than the init's 0.02 so the outputs are not flat
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.15)
            elif "norm" in "".join(n for n, q in model.named_parameters() if q is p):
                p.uniform_(-0.3, 0.3) if name.startswith("gemma") else p.uniform_(0.7, 1.3)
            else:
                p.normal_(0, 0.1)
    return cfg, model


def gguf_arch(name):
    return "llama" if name == "mistral" else name


def tensors(name, cfg, model):
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    gemma = name.startswith("gemma")
    norm = (lambda a: a + 1.0) if gemma else (lambda a: a)
    out = {"token_embd.weight": sd["model.embed_tokens.weight"], "output_norm.weight": norm(sd["model.norm.weight"])}
    if not cfg.tie_word_embeddings:
        out["output.weight"] = sd["lm_head.weight"]
    if name == "llama":
        out["rope_freqs.weight"] = llama3_factors(cfg)
    for l in range(LAYERS):
        p, b = "model.layers.%d." % l, "blk.%d." % l
        out[b + "attn_norm.weight"] = norm(sd[p + "input_layernorm.weight"])
        if name == "phi3":
            out[b + "attn_qkv.weight"] = sd[p + "self_attn.qkv_proj.weight"]
            out[b + "ffn_up.weight"] = sd[p + "mlp.gate_up_proj.weight"]
        else:
            q, k = sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"]
            if gguf_arch(name) == "llama":
                q, k = permute(q, H), permute(k, HKV)
            out[b + "attn_q.weight"], out[b + "attn_k.weight"] = q, k
            out[b + "attn_v.weight"] = sd[p + "self_attn.v_proj.weight"]
            out[b + "ffn_gate.weight"] = sd[p + "mlp.gate_proj.weight"]
            out[b + "ffn_up.weight"] = sd[p + "mlp.up_proj.weight"]
        if name == "qwen2":
            for s in "qkv":
                out[b + "attn_%s.bias" % s] = sd[p + "self_attn.%s_proj.bias" % s]
        if name in ("qwen3", "gemma3"):
            out[b + "attn_q_norm.weight"] = norm(sd[p + "self_attn.q_norm.weight"])
            out[b + "attn_k_norm.weight"] = norm(sd[p + "self_attn.k_norm.weight"])
        out[b + "attn_output.weight"] = sd[p + "self_attn.o_proj.weight"]
        out[b + "ffn_down.weight"] = sd[p + "mlp.down_proj.weight"]
        if gemma:
            out[b + "post_attention_norm.weight"] = norm(sd[p + "post_attention_layernorm.weight"])
            out[b + "ffn_norm.weight"] = norm(sd[p + "pre_feedforward_layernorm.weight"])
            out[b + "post_ffw_norm.weight"] = norm(sd[p + "post_feedforward_layernorm.weight"])
        else:
            out[b + "ffn_norm.weight"] = norm(sd[p + "post_attention_layernorm.weight"])
    return out


def metadata(w, name, cfg):
    a = gguf_arch(name)
    w.add_uint32(a + ".context_length", CTX)
    w.add_uint32(a + ".embedding_length", C)
    w.add_uint32(a + ".block_count", LAYERS)
    w.add_uint32(a + ".feed_forward_length", F)
    w.add_uint32(a + ".attention.head_count", H)
    w.add_uint32(a + ".attention.head_count_kv", HKV)
    w.add_float32(a + ".attention.layer_norm_rms_epsilon", 1e-6)
    hd = getattr(cfg, "head_dim", None) or C // H
    if hd != C // H or name.startswith("gemma"):
        w.add_uint32(a + ".attention.key_length", hd)
        w.add_uint32(a + ".attention.value_length", hd)
    rp = getattr(cfg, "rope_parameters", None) or {}
    theta = rp.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    if name == "gemma3":
        theta = (rp.get("full_attention") or {}).get("rope_theta", 1000000.0) if "full_attention" in rp else 1000000.0
        w.add_float32(a + ".rope.local.freq_base", 10000.0)
        w.add_uint32(a + ".attention.sliding_window_pattern", 3)
    w.add_float32(a + ".rope.freq_base", float(theta))
    if name == "phi3":
        w.add_uint32(a + ".rope.dimension_count", int(hd * cfg.partial_rotary_factor))
    if getattr(cfg, "sliding_window", None) and name in ("phi3", "gemma2", "gemma3"):
        w.add_uint32(a + ".attention.sliding_window", cfg.sliding_window)
    if name.startswith("gemma"):
        w.add_float32(a + ".attention.query_pre_attn_scalar", float(cfg.query_pre_attn_scalar))
    if name == "gemma2":
        w.add_float32(a + ".attn_logit_softcapping", cfg.attn_logit_softcapping)
        w.add_float32(a + ".final_logit_softcapping", cfg.final_logit_softcapping)


def write_gguf(path, name, cfg, ts, qtype):
    w = gguf.GGUFWriter(path, arch=gguf_arch(name))
    w.add_name("attn tiny " + name)
    metadata(w, name, cfg)
    tokenizer(w)
    for tn, a in ts.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        if a.ndim == 2 and qtype == T.F16:
            w.add_tensor(tn, a.astype(np.float16))
        elif a.ndim == 2 and qtype == T.Q8_0 and a.shape[1] % 32 == 0:
            w.add_tensor(tn, quantize(a, T.Q8_0), raw_dtype=T.Q8_0)
        else:
            w.add_tensor(tn, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference(model):
    ids = torch.tensor([IDS])
    with torch.no_grad():
        out = model(ids, output_attentions=True)
        gen = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None,
                             min_new_tokens=6)
    return {"ids": IDS, "logits": out.logits[0].tolist(),
            "attentions": [a[0].tolist() for a in out.attentions],
            "greedy": gen[0, len(IDS):].tolist()}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in ["llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"]:
        cfg, model = make(name)
        ts = tensors(name, cfg, model)
        write_gguf(os.path.join(OUT, name + ".gguf"), name, cfg, ts, T.F32)
        if name == "qwen2":
            write_gguf(os.path.join(OUT, name + "_f16.gguf"), name, cfg, ts, T.F16)
        write_gguf(os.path.join(OUT, name + "_q8_0.gguf"), name, cfg, ts, T.Q8_0)
        ref = reference(model)
        if name in ("qwen3", "phi3", "gemma3"):
            hf = os.path.join(OUT, "hf_" + name)
            if name == "gemma3":
                model.to(torch.bfloat16).save_pretrained(hf, safe_serialization=True)
                model.float()
            elif name == "phi3":
                model.save_pretrained(hf, safe_serialization=True, max_shard_size="200KB")
            else:
                model.save_pretrained(hf, safe_serialization=True)
            for extra in ("generation_config.json",):
                if os.path.exists(os.path.join(hf, extra)):
                    os.remove(os.path.join(hf, extra))
            hf_tokenizer(hf)
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(ref, f, separators=(",", ":"))
        print(name, "greedy", ref["greedy"])


if __name__ == "__main__":
    main()
