#!/usr/bin/env python3
"""Writes the seed corpus for the token-shard fuzz target (fuzz/corpus/token_shard/).

Pure Python, deterministic: running it again rewrites the same files. Files named
valid_* must parse; invalid_* must be refused (tests/train/token_shard_test.cpp replays
the corpus and checks both). The layout is the one documented in src/formats/token_shard.h.
Each file is kept small so libFuzzer (-max_len=4096) can mutate all of it.
"""

import os
import struct

from corpus_writer import write_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "token_shard")

FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
LOSS_MASK = 1


def fnv1a(data):
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def mask_bytes(scored):
    out = bytearray((len(scored) + 7) // 8)
    for i, s in enumerate(scored):
        out[i // 8] |= s << (i % 8)
    return bytes(out)


def shard(tokens, vocab, eod, scored=None, version=2, width=None, count=None, flags=None, reserved=b"",
          mask=None, hash_fix=None):
    """A shard image; the keyword arguments override single fields to make damaged ones:
    `mask` replaces the mask bytes made from `scored`, `hash_fix` the hash of the body."""
    width = width if width is not None else (2 if vocab <= 65536 else 4)
    body = b"".join(struct.pack("<H" if width == 2 else "<I", t) for t in tokens)
    if scored is not None:
        body += mask_bytes(scored) if mask is None else mask
    if flags is None:
        flags = LOSS_MASK if scored is not None else 0
    count = len(tokens) if count is None else count
    header = b"TMTOKENS" + struct.pack("<IIQIIQ", version, width, count, vocab, eod,
                                       fnv1a(body) if hash_fix is None else hash_fix)
    header += struct.pack("<I", flags) if version == 2 else b"\0" * 4
    header += reserved.ljust(20, b"\0")
    assert len(header) == 64
    return header + body


def ramp(n, vocab):
    return [(i * 7919 + 3) % vocab for i in range(n)]


def alternating(n):
    return [(i // 3) % 2 for i in range(n)]


def files():
    yield "valid_empty", shard([], 300, 0)
    yield "valid_u16", shard(ramp(100, 300), 300, 2)
    yield "valid_u16_full_vocab", shard([0, 65535, 1, 65534], 65536, 65535)
    yield "valid_u32", shard(ramp(60, 100000), 100000, 99999)
    yield "valid_mask_5", shard([5, 6, 7, 8, 9], 300, 2, scored=[0, 1, 1, 0, 1])
    yield "valid_mask_8", shard(ramp(8, 300), 300, 0, scored=alternating(8))
    yield "valid_mask_u32_37", shard(ramp(37, 70000), 70000, 1, scored=alternating(37))
    yield "valid_mask_all_off", shard(ramp(9, 300), 300, 0, scored=[0] * 9)
    yield "valid_mask_empty", shard([], 300, 0, scored=[])
    # Version 1: no flags, bytes 40..63 never read.
    yield "valid_v1", shard(ramp(20, 300), 300, 2, version=1, reserved=b"old junk")
    yield "valid_v1_u32", shard(ramp(10, 100000), 100000, 0, version=1)

    good = shard([5, 6, 7, 8], 300, 2)
    yield "invalid_short", good[:10]
    yield "invalid_header_only_63", good[:63]
    yield "invalid_magic", b"TMTOKENZ" + good[8:]
    yield "invalid_version_0", shard([5, 6], 300, 2, version=0)
    yield "invalid_version_3", shard([5, 6], 300, 2, version=3)
    yield "invalid_width_3", shard([5, 6], 300, 2, width=3)
    yield "invalid_width_0", shard([], 300, 2, width=0)
    yield "invalid_vocab_zero", shard([], 0, 0)
    yield "invalid_vocab_too_big_for_u16", shard([5, 6], 70000, 2, width=2)
    yield "invalid_eod", shard([5, 6], 300, 300)
    yield "invalid_flags", shard([5, 6], 300, 2, flags=2)
    yield "invalid_reserved", shard([5, 6], 300, 2, reserved=b"\0" * 19 + b"\1")
    yield "invalid_count_too_big", shard([5, 6], 300, 2, count=5)
    yield "invalid_count_overflow", shard([5, 6], 300, 2, count=(1 << 64) - 1)
    yield "invalid_count_overflow_u32", shard([5, 6], 100000, 2, count=1 << 62)
    yield "invalid_truncated", good[:-1]
    yield "invalid_trailing", good + b"x"
    yield "invalid_hash", shard([5, 6, 7, 8], 300, 2, hash_fix=12345)
    yield "invalid_token_past_vocab", shard([5, 299], 200, 2)
    yield "invalid_token_past_vocab_u32", shard([5, 100000], 100000, 2)
    yield "invalid_mask_flag_without_mask", shard([5, 6, 7, 8], 300, 2, flags=LOSS_MASK)
    yield "invalid_mask_without_flag", shard([5, 6, 7, 8, 9], 300, 2, scored=[0, 1, 1, 0, 1], flags=0)
    yield "invalid_mask_truncated", shard([5, 6, 7, 8, 9], 300, 2, scored=[0, 1, 1, 0, 1])[:-1]
    masked = shard([5, 6, 7, 8, 9], 300, 2, scored=[0, 1, 1, 0, 1])
    yield "invalid_mask_hash", masked[:-1] + b"\x17"
    # Mask byte 0b110110: bit 5 scores a 6th token that does not exist (the hash matches).
    yield "invalid_mask_padding", shard([5, 6, 7, 8, 9], 300, 2, scored=[0, 1, 1, 0, 1], mask=b"\x36")
    yield "invalid_v1_with_mask", shard([5, 6, 7, 8, 9], 300, 2, scored=[0, 1, 1, 0, 1], version=1)


def main():
    write_corpus(OUT, files(), max_bytes=4096)


if __name__ == "__main__":
    main()
