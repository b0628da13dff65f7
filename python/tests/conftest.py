"""Shared fixtures of the Python package's tests: the fixture models, the SmolLM2 GGUF file, the
CLI binary (the tests compare the package with it), and a helper that runs it."""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

# In a CUDA build the engine loads libcublasLt.so.13 and libnccl.so.2 by name, and the first
# library of a name loaded in a process serves everyone after it: PyTorch must come first
# when both are used (the DLPack test), so that it gets its own.
try:
    import torch  # noqa: F401
except ImportError:
    pass

import tokenmill  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(os.environ.get("TOKENMILL_FIXTURES_DIR", ROOT / "tests" / "fixtures"))
BINARY = os.environ.get("TOKENMILL_BINARY", str(ROOT / "build" / "release" / "tokenmill"))


def run_cli(*args: str) -> str:
    """The CLI's standard output (it must succeed)."""
    done = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli_json(*args: str) -> dict:
    return json.loads(run_cli(*args))


def settled(llm: tokenmill.LLM) -> dict:
    """The engine's counters once it is idle (it publishes them after each step, a moment after
    the step's last events)."""
    deadline = time.monotonic() + 10
    while True:
        stats = llm.stats()
        if (stats["running"] == 0 and stats["waiting"] == 0) or time.monotonic() > deadline:
            return stats
        time.sleep(0.01)


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    path = subprocess.run([sys.executable, str(ROOT / "scripts" / "smollm2_gguf.py")], capture_output=True,
                          text=True).stdout.strip()
    if not path:
        pytest.fail("SmolLM2-135M-Instruct's GGUF file is missing: scripts/install-deps.sh installs it")
    return path


@pytest.fixture(scope="session")
def smollm2(smollm2_path: str) -> tokenmill.LLM:
    return tokenmill.LLM(smollm2_path, device="cpu", kv_cache_memory=256 << 20)


@pytest.fixture(scope="session")
def tiny() -> tokenmill.LLM:
    """The smallest chat fixture (tests/fixtures/hf/smollm_chat: a 2-layer Llama, 512 tokens)."""
    return tokenmill.LLM(str(FIXTURES / "hf" / "smollm_chat"), device="cpu")
