#!/usr/bin/env python3
"""Check that GGUF files made by llama.cpp's own converter (convert_hf_to_gguf.py) hold what
`tokenmill convert` writes: the files people download are made by that converter, and tokenmill
is tested on its own conversions (run by hand; the last output is kept in
scripts/check_llama_cpp_converter.recorded.txt).

Usage:  python3 scripts/check_llama_cpp_converter.py --llama-cpp LLAMA_CPP_SOURCE --tokenmill BUILD/tokenmill
LLAMA_CPP_SOURCE: a llama.cpp source tree (convert_hf_to_gguf.py, conversion/, gguf-py/), e.g. the
vendor/llama.cpp of the llama-cpp-python sdist. Needs torch, transformers and numpy.

For every tiny Hugging Face fixture in tests/fixtures/hf, in a temporary directory: llama.cpp's
converter (--outtype f32) and `tokenmill convert --type f32`; then, read with gguf-py, the two
files must have the same tensors, each of the same type and the same bytes, and the same value
for every {arch}.* key both write (keys only one of them writes are listed). The fixtures'
tokenizers are synthetic (byte-level, no merges) and llama.cpp's converter refuses them (its
pre-tokenizer hash check), so its vocabulary step is replaced by tokenizer.ggml.model "none":
the check is of the weights and hyper-parameters, the tokenizer metadata is checked elsewhere.
A fixture the converter cannot convert is reported, not failed (llama.cpp's limits, e.g. a
SentencePiece tokenizer it needs the sentencepiece package for).
"""

import argparse
import glob
import os
import runpy
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "hf")
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def convert_without_vocabulary(llama_cpp, argv):
    """Runs llama.cpp's convert_hf_to_gguf.py with every model class's vocabulary step replaced
    by tokenizer.ggml.model "none" (in this process: called by the --convert-one mode)."""
    sys.path.insert(0, llama_cpp)
    import conversion
    from conversion import base

    conversion.load_all_models()  # the model classes' modules load on demand otherwise, unpatched

    def no_vocabulary(self, *args, **kwargs):
        self.gguf_writer.add_tokenizer_model("none")

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for cls in [base.ModelBase, *subclasses(base.ModelBase)]:
        for name in list(vars(cls)):
            if name == "set_vocab" or name.startswith("_set_vocab"):
                setattr(cls, name, no_vocabulary)
    script = os.path.join(llama_cpp, "convert_hf_to_gguf.py")
    sys.argv = [script, *argv]
    runpy.run_path(script, run_name="__main__")


def compare(ours_path, theirs_path):
    """(tensors, differing tensors, tensors of one file only, differing keys, keys of one only)."""
    import gguf
    import numpy as np

    ours, theirs = gguf.GGUFReader(ours_path), gguf.GGUFReader(theirs_path)
    mine = {t.name: t for t in ours.tensors}
    their = {t.name: t for t in theirs.tensors}
    differing = sorted(n for n in mine.keys() & their.keys()
                       if mine[n].tensor_type != their[n].tensor_type
                       or not np.array_equal(np.asarray(mine[n].data).view(np.uint8),
                                             np.asarray(their[n].data).view(np.uint8)))
    arch = bytes(ours.fields["general.architecture"].parts[-1]).decode()

    def keys(reader):
        return {k: reader.fields[k].parts[-1].tolist() for k in reader.fields if k.startswith(arch + ".")}

    mk, tk = keys(ours), keys(theirs)
    return (len(mine), differing, sorted(mine.keys() ^ their.keys()),
            sorted(k for k in mk.keys() & tk.keys() if mk[k] != tk[k]),
            sorted(mk.keys() - tk.keys()), sorted(tk.keys() - mk.keys()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", required=True, help="a llama.cpp source tree")
    ap.add_argument("--tokenmill", help="the tokenmill executable")
    ap.add_argument("--convert-one", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    llama_cpp = os.path.abspath(args.llama_cpp)
    sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
    if args.convert_one is not None:
        convert_without_vocabulary(llama_cpp, args.convert_one)
        return 0
    if not args.tokenmill:
        ap.error("--tokenmill is required")
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(FIXTURES)):
            directory = os.path.join(FIXTURES, name)
            theirs, ours = os.path.join(tmp, name + ".llama_cpp.gguf"), os.path.join(tmp, name + ".gguf")
            converted = subprocess.run([sys.executable, __file__, "--llama-cpp", llama_cpp, "--convert-one",
                                        directory, "--outfile", theirs, "--outtype", "f32"],
                                       capture_output=True, text=True)
            if converted.returncode != 0:
                last = (converted.stderr.strip().splitlines() or ["?"])[-1]
                print(f"skip  {name}: llama.cpp's converter refuses it: {last}")
                continue
            mine = subprocess.run([args.tokenmill, "convert", directory, ours, "--type", "f32"],
                                  capture_output=True, text=True)
            if mine.returncode != 0:
                check(False, f"{name}: tokenmill convert failed: {mine.stderr.strip()}")
                continue
            tensors, differing, unshared, key_values, our_keys, their_keys = compare(ours, theirs)
            check(not differing and not unshared and not key_values,
                  f"{name}: {tensors} tensors; differing {differing or 'none'}; in one file only "
                  f"{unshared or 'none'}; keys of differing value {key_values or 'none'}; keys only tokenmill "
                  f"writes {our_keys or 'none'}; keys only llama.cpp writes {their_keys or 'none'}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
