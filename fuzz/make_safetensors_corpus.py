#!/usr/bin/env python3
"""Writes the seed corpus for the safetensors fuzz target (fuzz/corpus/safetensors/).

Pure Python, deterministic: running it again rewrites the same files. Files named
valid_* must parse; invalid_* must be refused (the corpus replay test checks both).
Each file is kept small so libFuzzer (-max_len=4096) can mutate all of it.
"""

import json
import os
import struct

from corpus_writer import write_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "safetensors")


def pack(header, data=b"", align=True):
    """8-byte little-endian header length, the header (space-padded), the data region."""
    text = header if isinstance(header, (bytes, bytearray)) else json.dumps(header).encode()
    if align:
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def bf16(*values):
    return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in values)


def f16(*values):
    return struct.pack("<%de" % len(values), *values)


def files():
    yield "valid_empty", pack({})
    yield "valid_metadata_only", pack({"__metadata__": {"format": "pt"}})
    yield "valid_one_f32", pack({"w": entry("F32", [2, 2], 0, 16)}, f32(1.0, -2.0, 0.5, 3.0))
    yield "valid_mixed", pack(
        {
            "__metadata__": {"format": "pt", "note": "seed"},
            "model.embed.weight": entry("BF16", [2, 3], 0, 12),
            "model.norm.weight": entry("F16", [3], 12, 18),
            "lm_head.weight": entry("F32", [1, 3], 18, 30),
            "ids": entry("I64", [1], 30, 38),
            "mask": entry("BOOL", [2], 38, 40),
        },
        bf16(1.0, 2.0, 3.0, -1.0, -2.0, -3.0) + f16(0.5, 1.5, 2.5) + f32(1.0, 2.0, 3.0)
        + struct.pack("<q", 7) + b"\x01\x00",
    )
    yield "valid_scalar_and_empty", pack(
        {"s": entry("F32", [], 0, 4), "e": entry("F16", [0, 4], 4, 4)}, f32(42.0)
    )
    yield "valid_all_dtypes", pack(
        {
            name: entry(name, [1], off, off + size)
            for name, size, off in (
                ("BOOL", 1, 0), ("U8", 1, 1), ("I8", 1, 2), ("F8_E4M3", 1, 3), ("F8_E5M2", 1, 4),
                ("I16", 2, 5), ("U16", 2, 7), ("F16", 2, 9), ("BF16", 2, 11), ("I32", 4, 13),
                ("U32", 4, 17), ("F32", 4, 21), ("F64", 8, 25), ("I64", 8, 33), ("U64", 8, 41),
            )
        },
        bytes(range(49)),
    )
    yield "valid_unpadded", pack({"w": entry("U8", [3], 0, 3)}, b"abc", align=False)

    yield "invalid_short", b"\x02\x00\x00"
    yield "invalid_header_past_end", struct.pack("<Q", 64) + b"{}"
    yield "invalid_header_over_cap", struct.pack("<Q", (100 << 20) + 1) + b"{}"
    yield "invalid_header_len_one", struct.pack("<Q", 1) + b"{"
    yield "invalid_json", pack(b'{"w": {"dtype": "F32",')
    yield "invalid_not_object", pack(b"[1, 2, 3]")
    yield "invalid_nul_after_json", pack(
        b'{"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}\0\0junk', b"a"
    )
    yield "invalid_leading_space", pack(b" {}")
    yield "invalid_duplicate_name", pack(
        b'{"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},'
        b' "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}',
        b"ab",
    )
    yield "invalid_unknown_dtype", pack({"w": entry("Q4_0", [32], 0, 18)}, bytes(18))
    yield "invalid_negative_dim", pack({"w": entry("U8", [-1], 0, 0)})
    yield "invalid_float_dim", pack(b'{"w": {"dtype": "U8", "shape": [2.0], "data_offsets": [0, 2]}}', b"ab")
    yield "invalid_shape_overflow", pack({"w": entry("F32", [1 << 32, 1 << 32], 0, 0)})
    yield "invalid_offsets_reversed", pack({"w": entry("U8", [0], 2, 1)}, b"ab")
    yield "invalid_offsets_past_end", pack({"w": entry("U8", [4], 0, 4)}, b"ab")
    yield "invalid_nbytes_mismatch", pack({"w": entry("F32", [2], 0, 4)}, bytes(4))
    yield "invalid_gap", pack({"a": entry("U8", [1], 0, 1), "b": entry("U8", [1], 2, 3)}, b"abc")
    yield "invalid_overlap", pack({"a": entry("U8", [2], 0, 2), "b": entry("U8", [2], 1, 3)}, b"abc")
    yield "invalid_trailing", pack({"a": entry("U8", [1], 0, 1)}, b"ab")
    yield "invalid_metadata", pack({"__metadata__": {"format": 1}})
    yield "invalid_unknown_key", pack(
        {"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "extra": True}}, b"a"
    )


def main():
    write_corpus(OUT, files())


if __name__ == "__main__":
    main()
