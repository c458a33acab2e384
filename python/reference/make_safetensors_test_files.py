#!/usr/bin/env python3
"""Writes the tiny safetensors regression corpus in tests/io/data/.

  good_reference.safetensors  written by the `safetensors` package itself (the
      format's reference implementation) from torch tensors: one tensor per
      dtype attn reads, plus a scalar and an empty tensor. Values follow
      value(i) below, which tests/io/safetensors_files_test.cc recomputes.
  bad_*.safetensors           hand-built files that break one rule each; the
      test expects attn::Error with a message naming the problem.

Deterministic: running it again reproduces the files byte for byte (the test
suite does not need torch; only this script does).

  python3 python/reference/make_safetensors_test_files.py
"""
import json
import os
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "io", "data")


def value(i):
    """Element i of every float tensor: exact in F16, BF16, F32 and F64."""
    return (i - 5) * 0.375


def write_good(path):
    import torch
    from safetensors.torch import save_file

    def ramp(n):
        return torch.tensor([value(i) for i in range(n)], dtype=torch.float64)

    tensors = {
        "f64": ramp(6).reshape(2, 3),
        "f32": ramp(12).reshape(3, 4).to(torch.float32),
        "f16": ramp(10).reshape(2, 5).to(torch.float16),
        "bf16": ramp(8).reshape(2, 2, 2).to(torch.bfloat16),
        # i * 3e9 - 7 does not fit in int32: checks 64-bit reads.
        "i64": torch.tensor([i * 3_000_000_000 - 7 for i in range(5)], dtype=torch.int64),
        "i32": torch.tensor([i * 100_000 - 7 for i in range(6)], dtype=torch.int32).reshape(3, 2),
        "u8": torch.tensor([(i * 37) % 256 for i in range(9)], dtype=torch.uint8),
        "bool": torch.tensor([i % 3 == 0 for i in range(7)], dtype=torch.bool),
        "scalar": torch.tensor(value(3), dtype=torch.float32),
        "empty": torch.zeros(0, 4, dtype=torch.float32),
    }
    # One metadata key only: the package keeps metadata in a hash map, so with
    # more keys their order (and the file's bytes) would change from run to run.
    save_file(tensors, path, metadata={"format": "pt"})
    return sorted(tensors)


def raw_file(header, data=b"", length=None):
    """8-byte little-endian header length, header bytes, data bytes."""
    if isinstance(header, (dict, list)):
        header = json.dumps(header, separators=(",", ":")).encode()
    n = len(header) if length is None else length
    return struct.pack("<Q", n) + header + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


BAD = {
    # length prefix says 4096 bytes of header; the file is much shorter
    "bad_header_past_end": raw_file({"a": entry("F32", [1], 0, 4)}, b"\0" * 4, length=4096),
    # data_offsets end (64) past the 16-byte data section
    "bad_offsets_outside_file": raw_file({"a": entry("F32", [16], 0, 64)}, b"\0" * 16),
    # two tensors share bytes 8..16
    "bad_overlap": raw_file({"a": entry("F32", [4], 0, 16), "b": entry("F32", [4], 8, 24)}, b"\0" * 24),
    # 2x3 F32 needs 24 bytes; the offsets give 20
    "bad_byte_count": raw_file({"a": entry("F32", [2, 3], 0, 20)}, b"\0" * 24),
    # a dtype attn does not know
    "bad_unknown_dtype": raw_file({"a": entry("F8_E4M3", [4], 0, 4)}, b"\0" * 4),
    # tensor name with a byte that is never valid UTF-8
    "bad_invalid_utf8": raw_file(b'{"a\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
    # header is not JSON (unterminated object)
    "bad_invalid_json": raw_file(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}', b"\0" * 4),
    # shape product overflows int64
    "bad_absurd_shape": raw_file({"a": entry("F32", [2**40, 2**40], 0, 4)}, b"\0" * 4),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "good_reference.safetensors")
    names = write_good(path)
    print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes): {', '.join(names)}")
    for name, data in BAD.items():
        path = os.path.join(OUT, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(data)
        print(f"wrote {os.path.relpath(path)} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
