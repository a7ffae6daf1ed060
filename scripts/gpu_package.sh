#!/usr/bin/env bash
# Packs what the GPU machine needs into .gpu/ (README, "GPU"): the stripped
# `conveyor` and GPU test binaries of a CUDA build, the libraries that machine lacks
# (CAF, yaml-cpp and spdlog of other sonames there, Gloo and hiredis for parallel.data,
# ICU for the tokenizer),
# and the PyTorch reference scripts. Then carry [".gpu"] and run scripts/gpu_check.sh.
# Usage: scripts/gpu_package.sh [BUILD_DIR]   (default build-int; it must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-int}
[ -x "$build/conveyor" ] || { echo "gpu_package: $build/conveyor is missing: build it first" >&2; exit 2; }
grep -q "^CMAKE_CUDA_COMPILER:STRING=." "$build/CMakeCache.txt" 2>/dev/null &&
  [ -x "$build/tests/gpu_tests" ] ||
  { echo "gpu_package: $build has no CUDA build (no nvcc, or no tests/gpu_tests)" >&2; exit 2; }
rm -rf .gpu && mkdir -p .gpu/lib
cp "$build/conveyor" .gpu/
for t in gpu_tests gpu_pipeline_tests nccl_gpu_tests collective_gpu_tests; do
  [ -x "$build/tests/$t" ] && cp "$build/tests/$t" .gpu/
done
strip .gpu/conveyor .gpu/*_tests
cp $(ldd .gpu/conveyor | awk '/libcaf|libyaml-cpp|libspdlog|libgloo|libhiredis|libicu/ {print $3}') .gpu/lib/
# ICU's data library alone is 31 MB, the carry's limit 64 MiB: it travels xz-compressed
# (7.5 MB) and .gpu/env.sh unpacks it there.
for big in .gpu/lib/libicudata.so.*; do [ -e "$big" ] && xz -T2 -9 "$big"; done
cat > .gpu/env.sh <<'ENV'
# Source on the GPU machine from the repository root: the carried libraries, unpacked.
for packed in .gpu/lib/*.xz; do
  [ -e "$packed" ] && [ ! -e "${packed%.xz}" ] &&
    python3 -c "import lzma, sys; open(sys.argv[2], 'wb').write(lzma.open(sys.argv[1]).read())" "$packed" "${packed%.xz}"
done
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
ENV
cp scripts/torch_kernels_bench.py .gpu/
for ref in torch_pp_bench.py torch_llama_bench.py; do
  [ -f ../shared/bench/$ref ] && cp ../shared/bench/$ref .gpu/
done
echo "gpu_package: .gpu/ holds $(ls .gpu | tr '\n' ' ')($(du -sh .gpu | cut -f1))" >&2
