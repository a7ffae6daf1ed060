#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks (as root), then configures and builds
# conveyor (Release) into build/. Safe to run again: installs only missing packages and
# rebuilds incrementally. CUDA parts build when nvcc is found (/usr/local/cuda/bin).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libcaf-dev libucx-dev libboost-dev libssl-dev doctest-dev libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev libopenblas-dev
  libicu-dev  # apps/tokenizer: the pre-tokenizers' Unicode regex
  libgloo-dev  # transport/collective: host gradient all-reduce across replicas
  iproute2  # ip netns: the two-host multi-process test
  libjs-chart.js  # the live page's charts, served by conveyor at /static/chart.js
  chromium  # the live page's test in headless Chromium (about 750 MB installed with its libraries)
  prometheus  # promtool check metrics on /metrics
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
cmake --build build -j"$(nproc)" >&2
