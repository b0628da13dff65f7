#!/usr/bin/env python3
"""Writes the seed corpus for the GGUF fuzz target (fuzz/corpus/gguf/).

Pure Python, deterministic: running it again rewrites the same files. Files named
valid_* must parse; invalid_* must be refused (the corpus replay test checks both).
Each file is kept small so libFuzzer (-max_len=4096) can mutate all of it.
"""

import os
import struct

from corpus_writer import write_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "gguf")

# Metadata value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FORMAT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "B",
                 U64: "Q", I64: "q", F64: "d"}

# ggml tensor types: id -> (block size, bytes per block).
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34),
        "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210), "I32": (26, 1, 4), "BF16": (30, 1, 2)}


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def gstr(s):
    b = s if isinstance(s, bytes) else s.encode()
    return u64(len(b)) + b


def scalar(t, v):
    return u32(t) + struct.pack("<" + SCALAR_FORMAT[t], v)


def string(s):
    return u32(STRING) + gstr(s)


def array(t, values):
    body = u32(ARRAY) + u32(t) + u64(len(values))
    for v in values:
        body += gstr(v) if t == STRING else struct.pack("<" + SCALAR_FORMAT[t], v)
    return body


def kv(key, typed_value):
    return gstr(key) + typed_value


def tensor_info(name, shape, type_id, offset):
    return gstr(name) + u32(len(shape)) + b"".join(struct.pack("<q", d) for d in shape) + u32(type_id) + u64(offset)


def nbytes(type_name, shape):
    _, block, size = GGML[type_name]
    n = 1
    for d in shape:
        n *= d
    return n // block * size


def pad(b, alignment):
    return b + b"\0" * ((alignment - len(b) % alignment) % alignment)


def gguf(kvs=(), tensors=(), version=3, alignment=32, counts=None, padded=True, data=None):
    """A GGUF file. `tensors` are (name, shape, type name) placed at aligned offsets with
    pattern bytes, unless `data` gives the data region (then tensors are raw infos)."""
    n_kv, n_t = counts if counts else (len(kvs), len(tensors))
    head = b"GGUF" + u32(version) + u64(n_t) + u64(n_kv) + b"".join(kvs)
    if data is not None:
        head += b"".join(tensors)
        return pad(head, alignment) + data
    region = b""
    for name, shape, type_name in tensors:
        region = pad(region, alignment)
        head += tensor_info(name, shape, GGML[type_name][0], len(region))
        region += bytes((len(region) + i) * 7 % 251 for i in range(nbytes(type_name, shape)))
    if padded or region:
        head = pad(head, alignment)
    return head + region


def vocab_kvs():
    tokens = ["<unk>", "<s>", "</s>", "a", "b", "ab", "\u0120t", "<0x0A>"]
    return [
        kv("general.architecture", string("llama")),
        kv("tokenizer.ggml.model", string("llama")),
        kv("tokenizer.ggml.tokens", array(STRING, tokens)),
        kv("tokenizer.ggml.scores", array(F32, [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0])),
        kv("tokenizer.ggml.token_type", array(I32, [2, 3, 3, 1, 1, 1, 1, 6])),
        kv("tokenizer.ggml.merges", array(STRING, ["a b", "\u0120 t"])),
        kv("tokenizer.ggml.bos_token_id", scalar(U32, 1)),
        kv("tokenizer.ggml.eos_token_id", scalar(U32, 2)),
        kv("tokenizer.ggml.add_bos_token", scalar(BOOL, 1)),
    ]


def all_type_kvs():
    nested = u32(ARRAY) + u32(ARRAY) + u64(2) + u32(U8) + u64(2) + b"\x01\x02" + u32(STRING) + u64(1) + gstr("x")
    return [
        kv("v.u8", scalar(U8, 200)), kv("v.i8", scalar(I8, -5)), kv("v.u16", scalar(U16, 60000)),
        kv("v.i16", scalar(I16, -300)), kv("v.u32", scalar(U32, 7)), kv("v.i32", scalar(I32, -7)),
        kv("v.f32", scalar(F32, 0.5)), kv("v.bool", scalar(BOOL, 0)), kv("v.string", string("hello")),
        kv("v.u64", scalar(U64, 1 << 40)), kv("v.i64", scalar(I64, -(1 << 40))), kv("v.f64", scalar(F64, 2.5)),
        kv("a.u8", array(U8, [1, 2])), kv("a.bool", array(BOOL, [1, 0])), kv("a.f64", array(F64, [1.0])),
        kv("a.u64", array(U64, [1 << 63])), kv("a.string", array(STRING, ["", "x"])), kv("a.nested", nested),
    ]


def files():
    yield "valid_empty", gguf(padded=False)
    yield "valid_v2", gguf([kv("general.name", string("v2"))], version=2)
    yield "valid_vocab", gguf(vocab_kvs(), padded=False)
    yield "valid_all_types", gguf(all_type_kvs())
    yield "valid_tensors", gguf(
        [kv("general.architecture", string("llama"))],
        [("token_embd.weight", [4, 2], "F32"), ("blk.0.attn_q.weight", [32, 2], "Q4_0"),
         ("blk.0.ffn.weight", [256], "Q4_K"), ("norm", [8], "BF16"), ("scalar", [], "F32"), ("zero", [0, 3], "F16")])
    yield "valid_alignment_64", gguf(
        [kv("general.alignment", scalar(U32, 64))], [("a", [3], "F32"), ("b", [32], "Q8_0")], alignment=64)
    yield "valid_q6k", gguf([], [("w", [256, 1], "Q6_K")])
    yield "valid_gap_reverse_order", gguf(
        [], [tensor_info("second", [8], 0, 64), tensor_info("first", [2], 26, 0)], data=b"\x11" * 96)

    yield "invalid_short", b"GGU"
    yield "invalid_magic", b"GGML" + gguf()[4:]
    yield "invalid_version_1", b"GGUF" + u32(1) + u32(0) + u32(0)
    yield "invalid_version_4", gguf(version=4)
    yield "invalid_big_endian", b"GGUF" + struct.pack(">I", 3) + struct.pack(">Q", 0) * 2
    yield "invalid_truncated_header", gguf()[:20]
    yield "invalid_kv_count", gguf(vocab_kvs(), counts=(1 << 40, 0))
    yield "invalid_tensor_count", gguf([kv("k", string("v"))], counts=(1, 1 << 50))
    yield "invalid_kv_count_short", gguf(vocab_kvs(), counts=(12, 0), padded=False)
    yield "invalid_key_past_end", gguf([u64(500) + b"general.architecture"], padded=False)
    yield "invalid_key_too_long", gguf([kv("k" * 65536, scalar(U8, 1))])[:2048]
    yield "invalid_empty_key", gguf([kv("", scalar(U8, 1))])
    yield "invalid_value_type", gguf([kv("k", u32(13) + u64(0))])
    yield "invalid_array_type", gguf([kv("k", u32(ARRAY) + u32(99) + u64(0))])
    yield "invalid_string_past_end", gguf([kv("k", u32(STRING) + u64(4000) + b"abc")])
    yield "invalid_string_over_cap", gguf([kv("k", u32(STRING) + u64((256 << 20) + 1))])
    yield "invalid_truncated_u32", gguf([kv("k", u32(U32) + b"\x01")], padded=False)
    yield "invalid_bool", gguf([kv("k", scalar(BOOL, 2))])
    yield "invalid_bool_array", gguf([kv("k", array(BOOL, [1, 0, 3]))])
    yield "invalid_array_count", gguf([kv("k", u32(ARRAY) + u32(U32) + u64(1 << 61))])
    yield "invalid_string_array_count", gguf([kv("k", u32(ARRAY) + u32(STRING) + u64(1 << 62) + gstr("a"))])
    yield "invalid_string_element_past_end", gguf([kv("k", u32(ARRAY) + u32(STRING) + u64(2) + gstr("a") + u64(900))])
    yield "invalid_nested_twice", gguf(
        [kv("k", u32(ARRAY) + u32(ARRAY) + u64(1) + u32(ARRAY) + u64(1) + u32(U8) + u64(1) + b"\x01")]) + b"\0" * 16
    yield "invalid_duplicate_key", gguf([kv("k", scalar(U8, 1)), kv("j", scalar(U8, 2)), kv("k", scalar(U8, 3))])
    yield "invalid_alignment_type", gguf([kv("general.alignment", string("32"))])
    yield "invalid_alignment_value", gguf([kv("general.alignment", scalar(U32, 48))])
    yield "invalid_alignment_zero", gguf([kv("general.alignment", scalar(U32, 0))])
    yield "invalid_n_dims", gguf([], [tensor_info("t", [1, 1, 1, 1, 1], 0, 0)], data=b"\0" * 32)
    yield "invalid_negative_dim", gguf([], [tensor_info("t", [4, -1], 0, 0)], data=b"\0" * 32)
    yield "invalid_shape_overflow", gguf([], [tensor_info("t", [1 << 32, 1 << 32], 0, 0)], data=b"")
    yield "invalid_elements_2_63", gguf([], [tensor_info("t", [1 << 62, 2], 0, 0)], data=b"")
    yield "invalid_nbytes_overflow", gguf([], [tensor_info("t", [1 << 61, 2], 28, 0)], data=b"")
    yield "invalid_ggml_type", gguf([], [tensor_info("t", [32], 4, 0)], data=b"\0" * 32)
    yield "invalid_ggml_type_big", gguf([], [tensor_info("t", [32], 1000, 0)], data=b"\0" * 32)
    yield "invalid_block_multiple", gguf([], [tensor_info("t", [33], 2, 0)], data=b"\0" * 64)
    yield "invalid_offset_unaligned", gguf([], [tensor_info("t", [4], 0, 8)], data=b"\0" * 64)
    yield "invalid_data_past_end", gguf([], [tensor_info("t", [64], 0, 0)], data=b"\0" * 100)
    yield "invalid_offset_overflow", gguf([], [tensor_info("t", [4], 0, (1 << 64) - 32)], data=b"")
    yield "invalid_overlap", gguf([], [tensor_info("a", [16], 0, 0), tensor_info("b", [8], 0, 32)], data=b"\0" * 64)
    yield "invalid_duplicate_tensor", gguf([], [tensor_info("a", [1], 0, 0), tensor_info("a", [1], 0, 32)],
                                           data=b"\0" * 64)
    yield "invalid_empty_tensor_name", gguf([], [tensor_info("", [1], 0, 0)], data=b"\0" * 32)
    yield "invalid_truncated_data", gguf([], [("w", [256], "Q4_K")])[:-1]


def main():
    write_corpus(OUT, files(), max_bytes=4096)


if __name__ == "__main__":
    main()
