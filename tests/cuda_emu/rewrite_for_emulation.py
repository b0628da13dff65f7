#!/usr/bin/env python3
"""Rewrites one CUDA source (.cu or .cuh) into C++ that the CUDA emulation compiles.

Two constructs of CUDA C++ are not C++ and cannot be reached by a macro; they are rewritten
in place, keeping every line where it was (compiler messages point at the original lines):

  EXPR<<<grid, block[, shared_bytes[, stream]]>>>(args...)
      -> ::cuda_emu::launch({"EXPR", __FILE__, __LINE__}, ::cuda_emu::LaunchConfig(grid, ...), KERNEL, args...)
     KERNEL is EXPR, or, when EXPR names a __global__ function template defined in the same
     file, a generic lambda calling EXPR: the call deduces what template arguments EXPR does
     not give, as CUDA does, from the copied arguments. Such a launch has no kernel address,
     so no cudaFuncSetAttribute opt-in reaches it (launch through a pointer to the
     specialisation for that, as flash_attention.cu does).
     Line breaks around <<< and >>> are kept, so each line stays where it was.
  [extern] __shared__ TYPE NAME[DIMS];
      -> TYPE (&NAME)[DIMS] = ::cuda_emu::static_shared<TYPE[DIMS]>([] {});
         (extern, dynamic: TYPE* const NAME = ::cuda_emu::dynamic_shared<TYPE>();)
     so that each block's shared variables live in that block's shared memory, as on a GPU.

Usage: rewrite_for_emulation.py IN OUT
"""
import os
import re
import sys


def matching_close(text, start, open_ch, close_ch):
    """Index of the bracket closing the one at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
    raise SystemExit(f"unbalanced {open_ch}{close_ch} at offset {start}")


def expression_start(text, end):
    """Start of the kernel expression that ends just before text[end] ('<<<'): an
    identifier, optionally qualified (a::b) and followed by template arguments."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == ">":
                depth += 1
            elif text[i] == "<":
                depth -= 1
                if depth == 0:
                    break
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_:"):
        i -= 1
    return i


def kernel_template(text, name):
    """True when `name` is a __global__ function template defined in this file."""
    pattern = r"template\s*<[^;{]*?>\s*__global__[^;{(]*?\b" + re.escape(name) + r"\s*\("
    return re.search(pattern, text) is not None


def rewrite_launches(text):
    out, pos = [], 0
    while True:
        open_at = text.find("<<<", pos)
        if open_at < 0:
            out.append(text[pos:])
            return "".join(out)
        close_at = text.find(">>>", open_at)
        paren = close_at + 3
        while text[paren].isspace():
            paren += 1
        if text[paren] != "(":
            raise SystemExit(f"a launch without arguments at offset {open_at}")
        args_end = matching_close(text, paren, "(", ")")
        start = expression_start(text, open_at)
        expr = text[start:open_at].strip()
        config = text[open_at + 3:close_at]
        args = text[paren + 1:args_end]
        line = text.count("\n", 0, start) + 1
        kernel = expr
        if kernel_template(text, expr.split("<")[0].split("::")[-1].strip()):
            kernel = f"[](auto... tm_emu_args) {{ {expr}(tm_emu_args...); }}"
        rest = f", {args}" if args.strip() else ""
        # The line breaks around <<< and >>> (the configuration and arguments keep theirs).
        breaks = "\n" * (text.count("\n", start, open_at) + text.count("\n", close_at, paren))
        out.append(text[pos:start])
        out.append(f'::cuda_emu::launch({{"{expr}", __FILE__, {line}}}, ::cuda_emu::LaunchConfig({config}),{breaks} '
                   f"{kernel}{rest})")
        pos = args_end + 1


SHARED = re.compile(r"(extern\s+)?__shared__\s+([^;]*?)\s*\b([A-Za-z_]\w*)\s*((?:\[[^\]]*\])*)\s*;")


def rewrite_shared(match):
    extern, type_, name, dims = match.group(1), match.group(2), match.group(3), match.group(4)
    if extern:
        if dims.replace(" ", "") != "[]":
            raise SystemExit(f"extern __shared__ {name} must be an unsized array")
        return f"{type_}* const {name} = ::cuda_emu::dynamic_shared<{type_}>();"
    return f"{type_} (&{name}){dims} = ::cuda_emu::static_shared<{type_}{dims}>([] {{}});"


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as f:
        text = f.read()
    text = SHARED.sub(rewrite_shared, rewrite_launches(text))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w", encoding="utf-8") as f:
        f.write(f'#line 1 "{source}"\n')
        f.write(text)


if __name__ == "__main__":
    main()
