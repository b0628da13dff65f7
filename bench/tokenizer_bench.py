#!/usr/bin/env python3
"""Single-thread encode throughput: tokenmill vs Hugging Face `tokenizers` vs `tiktoken`,
all three on the real GPT-2 vocabulary (50,257 tokens, 50,000 merges), in one run.

  cmake --build build/release -j2 --target tokenmill_lib     # the library that is timed
  pip install tokenizers tiktoken gguf
  python3 bench/tokenizer_bench.py                            # ~1 minute on 2 cores
  python3 bench/tokenizer_bench.py --size-mb 2 --repeats 3    # a quick look

Tokenizers (one vocabulary, read from shared/data/tokenizers/ggml-vocab-gpt-2.gguf):
- tokenmill: Tokenizer::from_file(the .gguf), timed in C++ by a small driver program that this
  script writes and compiles into bench/out/build/ against build/release/libtokenmill_lib.a
  (compile and link flags taken from build/release, so it is the -O3 library the CLI uses).
  The driver loads the tokenizer and the text once and then times one encode per request,
  so the rounds below can interleave the three tokenizers.
- HF tokenizers: a tokenizer.json built from the same GGUF (ByteLevel pre-tokenizer with
  the GPT-2 regex, BPE with the GGUF's vocab and merges, no added tokens);
  Tokenizer.encode(text, add_special_tokens=False), RAYON_NUM_THREADS=1.
- tiktoken: tiktoken.Encoding("gpt2-local", pat_str = tiktoken's own GPT-2 pattern,
  mergeable_ranks = {token bytes: id} for ids < 50256, special_tokens {"<|endoftext|>":
  50256}), encode_ordinary(text). tiktoken.get_encoding("gpt2") would download the same
  vocabulary; the ranks are built locally by undoing GPT-2's byte-to-unicode mapping on the
  GGUF's tokens (token id == merge rank for GPT-2; the script checks that against the merges).
Special-token text ("<|endoftext|>" written in the input) is plain text for all three.

Text (--recipe): "mixed" (default, --size-mb MB, 1 MB = 10^6 bytes) repeats cycles of about
60% English (shared/data/corpus/tinyshakespeare.txt, 200 kB slices), 30% code (the
*.cpp/*.h/*.py/CMake files of the repository's first commit, so the text does not change from
commit to commit; 100 kB slices) and 10% multilingual / edge-case lines
(tests/fixtures/tokenizers/corpus.json inputs: CJK, Arabic, Cyrillic, Devanagari, emoji,
code, whitespace runs, invalid UTF-8; plus the llama.cpp vocab test strings), cut at a line
end. "test" is exactly the 2 MiB text of tests/tokenizer/robustness_test.cpp's
ThroughputReport (corpus.json + the first 400 kB of Tiny Shakespeare, repeated), for a
cross-check against that test; --text FILE uses a file. Invalid UTF-8 is replaced by U+FFFD
(as Python's errors="replace") first, so all three encode the same valid UTF-8 bytes.

Segmentation (both are measured, same for all three): "whole" = one encode call on the whole
text; "lines" = one call per line, split after each "\n" (the newline stays with its line).
In "lines" mode the two Python libraries also pay a Python-call overhead per line.

Timing: one untimed round first (warm-up; its ids are compared), then rounds that each time
one encode of every (segmentation, tokenizer) in turn, so background load on this shared
machine is spread over all of them. A timed call is clean if it got at least
--min-cpu-share of a core (its CPU time / wall time); rounds go on until every cell has
--repeats clean calls (at most --max-rounds rounds), disturbed calls are dropped. Reported:
best (minimum time, the headline table) and median of the clean calls. MB/s = UTF-8 bytes of
the text / 10^6 / seconds. CPU time / wall time of every call is kept in the JSON (at most
about 1.0 = one thread), and so is the CPU other processes used during each call.

Output: a markdown report on stdout and JSON in --json (default bench/out/tokenizer.json),
the report also next to it (bench/out/tokenizer.md). With --fixtures, the repo's small test tokenizers
(1.2k-token vocabularies: llama3, qwen2, ...) are also timed, tokenmill vs HF only.
Exit status 1 if the ids of the tokenizers differ.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from array import array
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "tokenizers"
SHARED = REPO.parent / "shared" / "data"
GPT2_GGUF = SHARED / "tokenizers" / "ggml-vocab-gpt-2.gguf"
FIXTURE_NAMES = ["gpt2", "llama3", "qwen2", "deepseek", "falcon", "spm_legacy", "spm_metaspace"]
MODES = ("whole", "lines")
# What tokenmill's encode is built from (for the staleness warning and the report).
TOKENIZER_SOURCES = ["src/tokenizer", "src/core", "src/formats/gguf.h", "src/formats/gguf.cpp"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# The text
# --------------------------------------------------------------------------------------


def corpus_inputs():
    with open(FIXTURES / "corpus.json") as f:
        return [bytes.fromhex(h) for h in json.load(f)["inputs_hex"]]


def test_recipe_text():
    """tests/tokenizer/robustness_test.cpp mixed_text(2 MiB), byte for byte."""
    corpus = b"".join(x + b"\n" for x in corpus_inputs())
    shakespeare = (SHARED / "corpus" / "tinyshakespeare.txt").read_bytes()[:400000]
    text = b""
    while len(text) < (2 << 20):
        text += corpus + shakespeare
    return text[: 2 << 20]


CODE_SUFFIXES = (".cpp", ".h", ".py", ".cmake", "CMakeLists.txt")


def code_commit():
    """The repository's first commit: its sources are the code part of the mixed text, so the
    text stays the same from commit to commit."""
    return subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.split()[-1]


def code_blobs():
    commit = code_commit()
    names = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", commit], cwd=REPO, capture_output=True,
                           check=True).stdout.split(b"\0")
    names = sorted(n.decode() for n in names if n.decode().endswith(CODE_SUFFIXES))
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=REPO, capture_output=True, check=True,
                           input="".join(f"{commit}:{n}\n" for n in names).encode()).stdout
    blobs, pos = [], 0
    while pos < len(batch):
        header_end = batch.index(b"\n", pos)
        size = int(batch[pos:header_end].split()[2])
        blobs.append(batch[header_end + 1:header_end + 1 + size])
        pos = header_end + 1 + size + 1
    return blobs


def mixed_recipe_text(size):
    english = (SHARED / "corpus" / "tinyshakespeare.txt").read_bytes().splitlines(keepends=True)
    code = [line for blob in code_blobs() for line in blob.splitlines(keepends=True)]
    multilingual = b"".join(x + b"\n" for x in corpus_inputs())
    for inp in sorted((SHARED / "tokenizers").glob("ggml-vocab-gpt-2.gguf.inp")):
        multilingual += b"".join(s.strip(b"\n") + b"\n" for s in inp.read_bytes().split(b"__ggml_vocab_test__"))
    cursors = {"english": 0, "code": 0}
    sources = {"english": english, "code": code}

    def take(name, nbytes):
        lines, out, n = sources[name], [], 0
        while n < nbytes:
            line = lines[cursors[name] % len(lines)]
            cursors[name] += 1
            out.append(line)
            n += len(line)
        return b"".join(out)

    parts, total = [], 0
    while total < size:
        for block in (take("english", 200_000), take("code", 100_000), multilingual * 3):
            parts.append(block)
            total += len(block)
    text = b"".join(parts)[:size]
    cut = text.rfind(b"\n")
    return text[: cut + 1] if cut > 0 else text


def composition(text):
    non_ascii = sum(1 for b in text if b >= 0x80)
    return {"bytes": len(text), "non_ascii_bytes": non_ascii, "lines": text.count(b"\n")}


def split_lines(text):
    pieces = text.split("\n")
    lines = [p + "\n" for p in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


# --------------------------------------------------------------------------------------
# The three GPT-2 tokenizers
# --------------------------------------------------------------------------------------


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (the one in GPT-2's encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def read_gpt2_gguf():
    import gguf

    r = gguf.GGUFReader(str(GPT2_GGUF))
    field = r.fields

    def strings(key):
        f = field[key]
        return [bytes(f.parts[i]).decode() for i in f.data]

    types = [int(field["tokenizer.ggml.token_type"].parts[i][0]) for i in field["tokenizer.ggml.token_type"].data]
    return strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges"), types


def hf_gpt2(tokens, merges):
    doc = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}}
    return Tokenizer.from_str(json.dumps(doc))


def tiktoken_gpt2(tokens, merges, types):
    import tiktoken

    try:
        from tiktoken_ext.openai_public import r50k_pat_str as pat_str
    except ImportError:  # the same pattern as tiktoken's "gpt2" encoding (tiktoken 0.5 - 0.14)
        pat_str = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    eot = tokens.index("<|endoftext|>")
    assert eot == 50256 and types[eot] == 3, "expected <|endoftext|> = 50256, a control token"
    ranks = {}
    for i, t in enumerate(tokens):
        if i != eot:
            ranks[bytes(byte_of[c] for c in t)] = i
    assert len(ranks) == 50256, "duplicate token bytes"
    # tiktoken merges by the rank of the merged token; GPT-2's ids 0..255 are the single bytes
    # and the token a merge makes has id 256 + the merge's rank: check both.
    assert all(len(b) == 1 for b, i in ranks.items() if i < 256), "ids 0..255 are not the single bytes"
    for rank, m in enumerate(merges):
        left, right = m.split(" ")
        assert tokens[256 + rank] == left + right, f"merge {rank} ({m!r}) does not make token {256 + rank}"
    enc = tiktoken.Encoding(name="gpt2-local", pat_str=pat_str, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": eot}, explicit_n_vocab=50257)
    return enc, pat_str


# --------------------------------------------------------------------------------------
# tokenmill's driver program (C++), built against build/release/libtokenmill_lib.a
# --------------------------------------------------------------------------------------

DRIVER_CPP = r"""// Written by bench/tokenizer_bench.py (do not edit): times tokenmill::Tokenizer::encode.
// Usage: driver TOKENIZER TEXT_FILE, then one request per stdin line:
//   time whole|lines        -> "WALL_S CPU_S TOKENS"
//   ids whole|lines PATH    -> the same, and the ids (int32, little endian) written to PATH
#include <time.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

static double seconds(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER TEXT_FILE\n", argv[0]);
    return 2;
  }
  try {
    const double t0 = seconds(CLOCK_MONOTONIC);
    const tokenmill::Tokenizer tok = tokenmill::Tokenizer::from_file(argv[1]);
    const double load_s = seconds(CLOCK_MONOTONIC) - t0;
    std::ifstream in(argv[2], std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    std::vector<std::string_view> lines;  // split after each '\n', as the ThroughputReport test does
    for (size_t pos = 0; pos < text.size();) {
      const size_t end = std::min(text.find('\n', pos), text.size() - 1) + 1;
      lines.push_back(std::string_view(text).substr(pos, end - pos));
      pos = end;
    }
    const tokenmill::EncodeOptions options{.add_special_tokens = false};
    tok.encode(std::string_view(text).substr(0, 100000), options);  // warm up
    std::printf("ready %.6f %d %zu %zu\n", load_s, tok.vocab_size(), text.size(), lines.size());
    std::fflush(stdout);
    std::string request;
    while (std::getline(std::cin, request)) {
      std::istringstream words(request);
      std::string what, mode, path;
      words >> what >> mode;
      if (what == "quit") break;
      if (what == "ids") std::getline(words >> std::ws, path);
      const bool keep = what == "ids";
      std::vector<int32_t> all;
      size_t count = 0;
      const double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
      if (mode == "whole") {
        std::vector<int32_t> ids = tok.encode(text, options);
        count = ids.size();
        if (keep) all = std::move(ids);
      } else {
        for (const std::string_view line : lines) {
          const std::vector<int32_t> ids = tok.encode(line, options);
          count += ids.size();
          if (keep) all.insert(all.end(), ids.begin(), ids.end());
        }
      }
      const double w1 = seconds(CLOCK_MONOTONIC), c1 = seconds(CLOCK_PROCESS_CPUTIME_ID);
      if (keep) {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(all.data()), std::streamsize(all.size() * sizeof(int32_t)));
      }
      std::printf("%.9f %.9f %zu\n", w1 - w0, c1 - c0, count);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
"""


def build_driver(build_dir, out_dir):
    """Compiles DRIVER_CPP with the library's own compile flags and the CLI's link line."""
    lib = build_dir / "libtokenmill_lib.a"
    if not lib.exists():
        sys.exit(f"{lib} not found: cmake --preset release && cmake --build {build_dir} --target tokenmill_lib")
    stale = [p for d in TOKENIZER_SOURCES for p in (REPO / d).rglob("*")
             if p.is_file() and p.stat().st_mtime > lib.stat().st_mtime]
    if stale:
        log(f"WARNING: {len(stale)} file(s) in src/ are newer than {lib} (e.g. {stale[0].relative_to(REPO)}); "
            f"the library being timed may be out of date: cmake --build {build_dir} --target tokenmill_lib")
    commands = json.loads((build_dir / "compile_commands.json").read_text())
    entry = next(e for e in commands if e["file"].endswith("src/tokenizer/tokenizer.cpp"))
    words = shlex.split(entry["command"])
    compiler = words[0]
    flags = [w for w in words[1:] if w.startswith(("-D", "-I", "-O", "-march", "-std", "-fopenmp"))]
    link = shlex.split((build_dir / "CMakeFiles" / "tokenmill.dir" / "link.txt").read_text())
    libs = link[link.index("-o") + 2:]
    libs = [str((build_dir / w).resolve()) if not w.startswith("-") and not os.path.isabs(w) else w for w in libs]
    out_dir.mkdir(parents=True, exist_ok=True)
    source, binary = out_dir / "tokenmill_encode_driver.cpp", out_dir / "tokenmill_encode_driver"
    if not source.exists() or source.read_text() != DRIVER_CPP:
        source.write_text(DRIVER_CPP)
    cmd = [compiler, *flags, str(source), "-o", str(binary), *libs, "-fopenmp"]
    fresh = binary.exists() and binary.stat().st_mtime > max(source.stat().st_mtime, lib.stat().st_mtime)
    if not fresh:
        log("compiling the tokenmill driver: " + shlex.join(cmd))
        subprocess.run(cmd, check=True)
    return binary, {"compile": shlex.join(cmd), "library": str(lib),
                    "library_mtime": datetime.datetime.fromtimestamp(lib.stat().st_mtime).isoformat(timespec="seconds"),
                    "stale_sources": len(stale)}


def proc_cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TokenmillDriver:
    def __init__(self, binary, tokenizer, text_path):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.p = subprocess.Popen([str(binary), str(tokenizer), str(text_path)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)
        ready = self.p.stdout.readline().split()
        if not ready or ready[0] != "ready":
            sys.exit(f"the tokenmill driver failed to load {tokenizer}")
        self.load_s, self.vocab = float(ready[1]), int(ready[2])

    def encode(self, mode, ids_path=None):
        self.p.stdin.write(f"ids {mode} {ids_path}\n" if ids_path else f"time {mode}\n")
        self.p.stdin.flush()
        wall, cpu, count = self.p.stdout.readline().split()
        return float(wall), float(cpu), int(count)

    def cpu_seconds(self):
        return proc_cpu_seconds(self.p.pid)

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait()


# --------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------

CLK = os.sysconf("SC_CLK_TCK")


def busy_seconds():
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK


def own_seconds(drivers):
    t = os.times()
    return t.user + t.system + sum(d.cpu_seconds() for d in drivers)


def wait_for_quiet(max_wait_s, threshold, drivers):
    deadline = time.time() + max_wait_s
    while True:
        b0, o0, t0 = busy_seconds(), own_seconds(drivers), time.perf_counter()
        time.sleep(3)
        load = max(0.0, (busy_seconds() - b0 - (own_seconds(drivers) - o0)) / (time.perf_counter() - t0))
        if load < threshold or time.time() >= deadline:
            if load >= threshold:
                log(f"WARNING: machine still busy ({load:.2f} cores used by other processes); measuring anyway")
            return load
        log(f"machine busy ({load:.2f} cores used by other processes); waiting")
        time.sleep(5)


def python_encoder(kind, tok):
    if kind == "hf":
        tok.encode_special_tokens = True  # special tokens written in the text are plain text
        return lambda s: tok.encode(s, add_special_tokens=False).ids
    return tok.encode_ordinary


def timed(fn, drivers):
    """fn()'s result tuple + (cores other processes used while it ran,)."""
    b0, o0 = busy_seconds(), own_seconds(drivers)
    w0 = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - w0
    foreign = max(0.0, (busy_seconds() - b0 - (own_seconds(drivers) - o0)) / wall)
    return result + (foreign,)


def run_python(encode, text, lines, mode, keep):
    c0, w0 = time.process_time(), time.perf_counter()
    if mode == "whole":
        ids = encode(text)
        count = len(ids)
    else:
        ids, count = [], 0
        for line in lines:
            part = encode(line)
            count += len(part)
            if keep:
                ids += part
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return wall, cpu, count, (list(ids) if keep else None)


def first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n if len(a) != len(b) else None


def bench_set(name, text, lines, text_path, tokenmill_tok, others, args, driver_bin, out_dir):
    """Times tokenmill (the driver on `tokenmill_tok`) and the Python `others` {label: (kind, tok)}."""
    driver = TokenmillDriver(driver_bin, tokenmill_tok, text_path)
    encoders = {label: python_encoder(kind, tok) for label, (kind, tok) in others.items()}
    for enc in encoders.values():
        enc(text[:100000])  # warm up, as the driver does
    labels = ["tokenmill", *encoders]
    nbytes = len(text.encode())
    samples = {(m, lab): [] for m in MODES for lab in labels}
    ids = {}
    checks = {}
    # Round 0 is the warm-up (ids compared). Then rounds go on until every (mode, tokenizer) has
    # --repeats clean samples (the timed call got at least --min-cpu-share of a core: nothing
    # else took its CPU), or --max-rounds rounds were timed.
    clean = lambda x: x["cpu_s"] / x["wall_s"] >= args.min_cpu_share  # noqa: E731
    rnd = 0
    while rnd == 0 or (rnd <= args.max_rounds and
                       any(sum(map(clean, v)) < args.repeats for v in samples.values())):
        warm_up = rnd == 0
        for mode in MODES:
            for lab in labels:
                if lab == "tokenmill":
                    path = out_dir / f"ids_{name}_{mode}.i32"
                    w, c, n, fg = timed(lambda: driver.encode(mode, path if warm_up else None), [driver])
                    if warm_up:
                        got = array("i")
                        got.frombytes(path.read_bytes())
                        path.unlink()
                        ids[(mode, lab)] = got.tolist()
                else:
                    w, c, n, got, fg = timed(
                        lambda: run_python(encoders[lab], text, lines, mode, warm_up), [driver])
                    if warm_up:
                        ids[(mode, lab)] = got
                if not warm_up:
                    samples[(mode, lab)].append({"round": rnd, "wall_s": w, "cpu_s": c, "tokens": n,
                                                 "foreign_cores": fg})
        if warm_up:
            for mode in MODES:
                ref = ids[(mode, "tokenmill")]
                for lab in encoders:
                    d = first_difference(ref, ids[(mode, lab)])
                    checks[(mode, lab)] = d
                    if d is not None:
                        log(f"{name} {mode}: tokenmill and {lab} ids differ at index {d} "
                            f"({ref[d:d + 8]} vs {ids[(mode, lab)][d:d + 8]}; {len(ref)} vs {len(ids[(mode, lab)])} ids)")
            ids.clear()
            log(f"{name}: warm-up round done, ids compared")
        else:
            disturbed = sum(1 for v in samples.values() if not clean(v[-1]))
            log(f"{name}: round {rnd} done" + (f", {disturbed} disturbed call(s)" if disturbed else ""))
            if disturbed:
                wait_for_quiet(min(args.wait_quiet, 30), args.quiet_threshold, [driver])
        rnd += 1
    driver.close()
    results = {}
    for mode in MODES:
        row = {"identical_ids": all(checks[(mode, lab)] is None for lab in encoders),
               "first_difference": {lab: checks[(mode, lab)] for lab in encoders}}
        for lab in labels:
            every = samples[(mode, lab)]
            good = [x for x in every if clean(x)]
            s = good if len(good) >= args.repeats else every
            walls = [x["wall_s"] for x in s]
            row[lab] = {
                "best_MBps": nbytes / 1e6 / min(walls),
                "median_MBps": nbytes / 1e6 / statistics.median(walls),
                "tokens": s[0]["tokens"],
                "samples_used": len(s),
                "samples_discarded": len(every) - len(s),
                "too_few_clean_samples": len(good) < args.repeats,
                "cpu_per_wall_min": min(x["cpu_s"] / x["wall_s"] for x in s),
                "cpu_per_wall_max": max(x["cpu_s"] / x["wall_s"] for x in every),
                "max_foreign_cores": max(x["foreign_cores"] for x in s),
                "samples": every,
            }
        results[mode] = row
    return results, driver.load_s


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def git_commit():
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    commit = head.stdout.strip() or "unknown"
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *TOKENIZER_SOURCES],
                             cwd=REPO, capture_output=True, text=True).stdout.split("\n")
    changed = [line[3:] for line in changed if line.strip()]
    return commit + (f" + uncommitted changes to {', '.join(changed)}" if changed
                     else " (tokenizer sources as committed)")


def versions():
    import tokenizers

    out = {"python": platform.python_version(), "tokenizers": tokenizers.__version__}
    try:
        import tiktoken
        out["tiktoken"] = tiktoken.__version__
    except ImportError:
        out["tiktoken"] = "not installed"
    cc = subprocess.run(["c++", "--version"], capture_output=True, text=True)
    out["c++"] = cc.stdout.splitlines()[0] if cc.returncode == 0 and cc.stdout else "unknown"
    return out


def fmt_ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def render(report):
    size = report["text"]["bytes"] / 1e6
    out = [f"### Tokenizer encode throughput, single thread ({report['date']})", "",
           f"Text: {report['text']['recipe']} recipe, {size:.2f} MB ({report['text']['bytes']:,} bytes, "
           f"{report['text']['lines']:,} lines, {report['text']['non_ascii_bytes'] / report['text']['bytes']:.1%} "
           f"non-ASCII bytes), sha256 {report['text']['sha256'][:16]}. "
           f"MB/s = 10^6 bytes/s; best (fastest) of {report['repeats']} or more clean timed calls per cell, "
           f"interleaved in rounds (medians below).", ""]
    for stat in ("best", "median"):
        if stat == "median":
            out += ["", "Median of the same calls:", ""]
        out += ["| tokenizer | segmentation | text MB | tokenmill MB/s | HF tokenizers MB/s | tiktoken MB/s "
                "| tokenmill/HF | tokenmill/tiktoken | ids identical |",
                "|---|---|---|---|---|---|---|---|---|"]
        for name, res in report["results"].items():
            for mode in MODES:
                r = res[mode]
                tm = r["tokenmill"][f"{stat}_MBps"]
                hf = r.get("hf", {}).get(f"{stat}_MBps")
                tt = r.get("tiktoken", {}).get(f"{stat}_MBps")
                out.append(f"| {name} | {mode} | {size:.2f} | {tm:.2f} | {hf:.2f} | "
                           f"{f'{tt:.2f}' if tt else '-'} | {fmt_ratio(tm, hf)} | {fmt_ratio(tm, tt)} | "
                           f"{'yes' if r['identical_ids'] else 'NO'} ({r['tokenmill']['tokens']:,} tokens) |")
    cells = [(f"{n} {m} {lab}", r[m][lab]) for n, r in report["results"].items() for m in MODES
             for lab in ("tokenmill", "hf", "tiktoken") if lab in r[m]]
    cpu_max = {lab: max(c["cpu_per_wall_max"] for k, c in cells if k.endswith(" " + lab))
               for lab in ("tokenmill", "hf", "tiktoken")}
    worst = max(cells, key=lambda kc: kc[1]["max_foreign_cores"])
    few = [k for k, c in cells if c["too_few_clean_samples"]]
    discarded = sum(c["samples_discarded"] for _, c in cells)
    m = report["machine"]
    out += ["",
            "Single thread: CPU time / wall time of any timed call at most "
            + ", ".join(f"{k} {v:.2f}" for k, v in cpu_max.items()) + ". "
            f"{discarded} timed call(s) discarded as disturbed (under {report['min_cpu_share']} of a core); "
            f"other processes used at most {worst[1]['max_foreign_cores']:.2f} cores during a kept call "
            f"({worst[0]}), {report['quiet_before']:.2f} cores just before the run."
            + (f" WARNING: too few clean calls for {', '.join(few)}; all calls used there." if few else ""),
            "",
            f"Machine: {m['cpu']}, {m['cores']} cores, {m['os']}. tokenmill {report['commit']} "
            f"(library {report['driver']['library_mtime']}, driver flags from build/release). "
            + ", ".join(f"{k} {v}" for k, v in report["versions"].items()) + ".",
            "", "Command:", "", "```sh", report["command"], "```"]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--recipe", choices=["mixed", "test"], default="mixed", help="the text (default mixed)")
    ap.add_argument("--size-mb", type=float, default=4.0, help="size of the mixed text in 10^6 bytes (default 4)")
    ap.add_argument("--text", help="encode this file instead of a recipe")
    ap.add_argument("--repeats", type=int, default=7,
                    help="clean timed samples per tokenizer and segmentation (default 7)")
    ap.add_argument("--max-rounds", type=int, default=20, help="timed rounds at most (default 20)")
    ap.add_argument("--min-cpu-share", type=float, default=0.95,
                    help="a timed call counts as clean if its CPU time / wall time is at least this (default 0.95)")
    ap.add_argument("--fixtures", action="store_true", help="also time the small test tokenizers (tokenmill vs HF)")
    ap.add_argument("--build-dir", default=str(REPO / "build" / "release"), help="tokenmill release build")
    ap.add_argument("--json", default=str(REPO / "bench" / "out" / "tokenizer.json"), help="JSON output file")
    ap.add_argument("--wait-quiet", type=float, default=60.0,
                    help="seconds to wait at most for other processes to go under --quiet-threshold cores")
    ap.add_argument("--quiet-threshold", type=float, default=1.25,
                    help="cores other processes may use for the machine to count as quiet (default 1.25: "
                    "a core is left for the single-threaded encode)")
    args = ap.parse_args()

    out_dir = REPO / "bench" / "out"
    driver_bin, driver_info = build_driver(Path(args.build_dir), out_dir / "build")

    if args.text:
        raw, recipe = Path(args.text).read_bytes(), f"file {args.text}"
    elif args.recipe == "test":
        raw, recipe = test_recipe_text(), "test (tests/tokenizer/robustness_test.cpp ThroughputReport)"
    else:
        raw, recipe = mixed_recipe_text(int(args.size_mb * 1e6)), "mixed (60% Shakespeare, 30% code, 10% multilingual)"
    text = raw.decode("utf-8", errors="replace")
    data = text.encode("utf-8")
    text_path = out_dir / "tokenizer_text.txt"
    text_path.write_bytes(data)
    lines = split_lines(text)

    log("loading the GPT-2 vocabulary from " + str(GPT2_GGUF))
    tokens, merges, types = read_gpt2_gguf()
    enc, pat_str = tiktoken_gpt2(tokens, merges, types)
    sets = [("gpt2 (real, 50k)", GPT2_GGUF, {"hf": ("hf", hf_gpt2(tokens, merges)), "tiktoken": ("tiktoken", enc)})]
    if args.fixtures:
        for name in FIXTURE_NAMES:
            path = FIXTURES / name / "tokenizer.json"
            sets.append((f"{name} (fixture, 1.2k)", path, {"hf": ("hf", Tokenizer.from_file(str(path)))}))

    quiet = wait_for_quiet(args.wait_quiet, args.quiet_threshold, [])
    load1 = os.getloadavg()
    results, load_times = {}, {}
    for name, tm_path, others in sets:
        results[name], load_times[name] = bench_set(re.sub(r"\W+", "_", name).strip("_"), text, lines, text_path,
                                                    tm_path, others, args, driver_bin, out_dir)
    report = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": "cd " + shlex.quote(str(REPO)) + " && " + shlex.join(["python3", *sys.argv]),
        "environment": {k: os.environ.get(k) for k in ("RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM")}
        | {"OMP_NUM_THREADS (driver)": "1"},
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "os": platform.platform(),
                    "loadavg_start": load1, "loadavg_end": os.getloadavg()},
        "quiet_before": quiet,
        "commit": git_commit(),
        "versions": versions(),
        "driver": driver_info,
        "tokenmill_load_s": load_times,
        "tiktoken_pat_str": pat_str,
        "text": {"recipe": recipe, "code_commit": code_commit() if "mixed" in recipe else None,
                 "sha256": hashlib.sha256(data).hexdigest(), **composition(data), "file": str(text_path)},
        "repeats": args.repeats,
        "min_cpu_share": args.min_cpu_share,
        "timing": "one untimed warm-up round (ids compared), then rounds that each time one encode per "
                  "(segmentation, tokenizer), until each has --repeats clean calls (CPU time / wall time >= "
                  "--min-cpu-share) or --max-rounds; best = min wall time, median = median wall time, of the "
                  "clean calls",
        "results": results,
    }
    md = render(report)
    print(md)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    Path(args.json).with_suffix(".md").write_text(md + "\n")
    log(f"wrote {args.json} and {Path(args.json).with_suffix('.md')}")
    return 0 if all(r[m]["identical_ids"] for r in results.values() for m in MODES) else 1


if __name__ == "__main__":
    sys.exit(main())
