#!/usr/bin/env python3
"""Writes the tiny GGUF regression corpus in tests/io/data/ (gguf_*).

  gguf_good.gguf        written by the `gguf` package (llama.cpp's own Python
      writer): one tensor per type attn dequantizes (F32, F16, BF16, Q8_0,
      Q4_0, Q4_1) in 1-3 dims, plus metadata of every value type and arrays.
  gguf_good_expected.safetensors
      For each tensor: the f32 values that the `gguf` package's own
      dequantizer (gguf.quants.dequantize) produces, in row-major shape
      (GGUF dims reversed), and "raw/<name>", the stored bytes as U8. The
      safetensors metadata key "fixture" holds JSON: "kv" (key -> {"type",
      "value"}), "types" (tensor name -> ggml type name) and "alignment".
  gguf_v2.gguf          the same header written by hand as version 2.
  gguf_bad_*.gguf       hand-packed files that break one rule each; the C++
      test (tests/io/gguf_test.cc) expects attn::Error naming the problem.

Deterministic: a fixed seed, so a rerun reproduces the files byte for byte.
Needs numpy, gguf and safetensors (pip install gguf safetensors numpy); the
C++ tests need none of them.

  python3 python/reference/make_gguf_test_files.py
"""
import json
import os
import struct

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "io", "data")


# ---- the good file, via the gguf package ------------------------------------------


def sample_values(rng, shape, kind):
    """Random values with the awkward cases mixed in: a block of zeros, a
    constant block, large and tiny magnitudes."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    if kind == "quant":
        flat[:32] = 0.0  # an all-zero block (scale 0)
        flat[32:64] = 1.25  # a constant block
        flat[64:96] *= 100.0
    else:
        flat[:4] = [0.0, -0.0, 65504.0, 6.1e-5]  # f16 max and a subnormal-adjacent value
        flat[4:6] = [1e-7, -3.0e-8]  # f16 subnormals
    return x


def write_good():
    import gguf
    from gguf import GGMLQuantizationType as Q
    from safetensors.numpy import save_file

    rng = np.random.default_rng(20240605)
    # name: (numpy shape, row-major, outermost first; qtype)
    specs = [
        ("f32_2d", (3, 5), Q.F32),
        ("f16_3d", (2, 3, 4), Q.F16),
        ("bf16_1d", (7,), Q.BF16),
        ("q8_0", (3, 64), Q.Q8_0),
        ("q4_0", (4, 96), Q.Q4_0),
        ("q4_1", (2, 2, 64), Q.Q4_1),
        ("q4_1_1d", (128,), Q.Q4_1),
    ]
    path = os.path.join(OUT, "gguf_good.gguf")
    w = gguf.GGUFWriter(path, arch="testarch")
    kv = {"general.architecture": {"type": "string", "value": "testarch"}}

    def add(key, fn, value, typename):
        fn(key, value)
        kv[key] = {"type": typename, "value": value}

    add("test.u8", w.add_uint8, 200, "u8")
    add("test.i8", w.add_int8, -100, "i8")
    add("test.u16", w.add_uint16, 65000, "u16")
    add("test.i16", w.add_int16, -32000, "i16")
    add("test.u32", w.add_uint32, 4000000000, "u32")
    add("test.i32", w.add_int32, -2000000000, "i32")
    add("test.u64", w.add_uint64, 9000000000000000000, "u64")
    add("test.i64", w.add_int64, -9000000000000000000, "i64")
    add("test.f32", w.add_float32, 0.375, "f32")
    add("test.f64", w.add_float64, -1.0e300, "f64")
    add("test.bool", w.add_bool, True, "bool")
    add("test.string", w.add_string, "héllo, 世界", "string")
    # (the package's add_string drops empty strings; gguf_v2.gguf has one)
    strings = ["a", "", "Ġthe", "<|im_start|>", "é"]
    w.add_key_value("test.arr_string", strings, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING)
    kv["test.arr_string"] = {"type": "array", "elem": "string", "value": strings}
    ints = [1, -2, 3, 2147483647, -2147483648]
    w.add_key_value("test.arr_i32", ints, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
    kv["test.arr_i32"] = {"type": "array", "elem": "i32", "value": ints}
    u64s = [0, 1, 2**40]
    w.add_key_value("test.arr_u64", u64s, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.UINT64)
    kv["test.arr_u64"] = {"type": "array", "elem": "u64", "value": u64s}
    floats = [0.5, -2.25, 1024.0]
    w.add_key_value("test.arr_f32", floats, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.FLOAT32)
    kv["test.arr_f32"] = {"type": "array", "elem": "f32", "value": floats}
    bools = [True, False, True]
    w.add_key_value("test.arr_bool", bools, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.BOOL)
    kv["test.arr_bool"] = {"type": "array", "elem": "bool", "value": bools}

    expected = {}
    types = {}
    for name, shape, qtype in specs:
        x = sample_values(rng, shape, "quant" if qtype in (Q.Q8_0, Q.Q4_0, Q.Q4_1) else "plain")
        if qtype == Q.F32:
            stored = x
        elif qtype == Q.F16:
            stored = x.astype(np.float16)
        else:
            stored = gguf.quants.quantize(x, qtype)
        w.add_tensor(name, stored, raw_dtype=qtype)
        deq = gguf.quants.dequantize(stored, qtype).astype(np.float32).reshape(shape)
        expected[name] = np.ascontiguousarray(deq)
        expected["raw/" + name] = np.frombuffer(np.ascontiguousarray(stored).tobytes(), dtype=np.uint8).copy()
        types[name] = qtype.name

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # One metadata key: the package keeps metadata in a hash map, so with more
    # keys their order (and the file's bytes) would change from run to run.
    meta = {"fixture": json.dumps({"kv": kv, "types": types, "alignment": 32}, ensure_ascii=False)}
    save_file(expected, os.path.join(OUT, "gguf_good_expected.safetensors"), metadata=meta)


# ---- a tiny byte-level BPE tokenizer in GGUF metadata -------------------------------


def gpt2_byte_chars():
    """GPT-2's byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


TINY_MERGES = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "a a", "Ġ Ġ"]


def write_tiny_tokenizer():
    import gguf

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merged = [m.replace(" ", "") for m in TINY_MERGES]
    tokens = specials + gpt2_byte_chars() + merged
    types = [gguf.TokenType.CONTROL] * len(specials) + [gguf.TokenType.NORMAL] * (len(tokens) - len(specials))
    w = gguf.GGUFWriter(os.path.join(OUT, "gguf_tokenizer_tiny.gguf"), arch="llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(TINY_MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- hand-packed files ------------------------------------------------------------------

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def kv_u32(key, v):
    return s(key) + struct.pack("<II", T_U32, v)


def kv_str(key, v):
    return s(key) + struct.pack("<I", T_STR) + s(v)


def tinfo(name, dims, qtype, offset):
    return s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack(
        "<IQ", qtype, offset
    )


def gguf_file(kvs, infos, data=b"", version=3, magic=b"GGUF", n_tensors=None, n_kv=None, alignment=32):
    head = magic + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    head += b"".join(kvs) + b"".join(infos)
    pad = (-len(head)) % alignment
    return head + b"\0" * pad + data


F32, Q8_0 = 0, 8


def base_kvs():
    return [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", 2)]


def f32_data(n):
    return struct.pack(f"<{n}f", *[0.5 * i - 1 for i in range(n)])


def write_hand_made():
    files = {}
    good_infos = [tinfo("a", [4, 2], F32, 0), tinfo("b", [3], F32, 32)]
    good_data = f32_data(8) + f32_data(3)
    files["gguf_v2.gguf"] = gguf_file(base_kvs() + [kv_str("general.name", "")], good_infos, good_data, version=2)

    files["gguf_bad_magic.gguf"] = gguf_file(base_kvs(), good_infos, good_data, magic=b"GGML")
    full = gguf_file(base_kvs(), good_infos, good_data)
    files["gguf_bad_truncated_header.gguf"] = full[:60]  # cut inside the first value's string length
    files["gguf_bad_version.gguf"] = gguf_file(base_kvs(), good_infos, good_data, version=1)
    files["gguf_bad_string_past_end.gguf"] = gguf_file(
        [struct.pack("<Q", 1 << 40) + b"general.architecture"], [], b"")
    files["gguf_bad_offset_outside.gguf"] = gguf_file(
        base_kvs(), [tinfo("a", [4, 2], F32, 0), tinfo("b", [3], F32, 4096)], good_data)
    files["gguf_bad_misaligned.gguf"] = gguf_file(
        base_kvs(), [tinfo("a", [4, 2], F32, 0), tinfo("b", [3], F32, 36)], good_data + b"\0" * 8)
    files["gguf_bad_overlap.gguf"] = gguf_file(
        base_kvs(), [tinfo("a", [4, 2], F32, 0), tinfo("b", [3], F32, 0)], good_data)
    files["gguf_bad_unknown_type.gguf"] = gguf_file(
        base_kvs(), [tinfo("a", [4, 2], 99, 0)], good_data)
    files["gguf_bad_absurd_dims.gguf"] = gguf_file(
        base_kvs(), [tinfo("a", [1 << 62, 4], F32, 0)], good_data)
    files["gguf_bad_too_many_dims.gguf"] = gguf_file(
        base_kvs(), [tinfo("a", [1, 1, 1, 1, 1], F32, 0)], good_data)
    files["gguf_bad_block_multiple.gguf"] = gguf_file(
        base_kvs(), [tinfo("a", [20, 2], Q8_0, 0)], b"\0" * 128)
    files["gguf_bad_value_type.gguf"] = gguf_file(
        [s("general.architecture") + struct.pack("<I", 13) + b"\0" * 8], [], b"")
    files["gguf_bad_bool.gguf"] = gguf_file([s("test.flag") + struct.pack("<IB", T_BOOL, 2)], [], b"")
    files["gguf_bad_kv_count.gguf"] = gguf_file(base_kvs(), [], b"", n_kv=1 << 60)
    files["gguf_bad_kv_count_past_end.gguf"] = gguf_file(base_kvs(), [], b"", n_kv=1000)
    files["gguf_bad_tensor_count.gguf"] = gguf_file(base_kvs(), [], b"", n_tensors=1 << 40)
    files["gguf_bad_duplicate_key.gguf"] = gguf_file(base_kvs() + [kv_u32("llama.block_count", 3)], [], b"")
    files["gguf_bad_array_length.gguf"] = gguf_file(
        [s("tokenizer.ggml.tokens") + struct.pack("<IIQ", T_ARR, T_STR, 1 << 50)], [], b"")
    files["gguf_bad_alignment.gguf"] = gguf_file([kv_u32("general.alignment", 24)], [], b"")
    files["gguf_bad_duplicate_tensor.gguf"] = gguf_file(
        base_kvs(), [tinfo("a", [4, 2], F32, 0), tinfo("a", [3], F32, 32)], good_data)
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write_good()
    write_tiny_tokenizer()
    write_hand_made()
    print("wrote", sorted(f for f in os.listdir(OUT) if f.startswith("gguf_")))
