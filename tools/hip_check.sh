#!/bin/bash
# hip_check.sh: compiles quantd's fused GPU kernels (worker/quant/cuda/*.cu,
# worker/algo/cuda/*.cu) as HIP for AMD GPUs, the same sources nvcc builds
# (worker/quant/cuda/gpu_runtime.h maps the few runtime names). It needs
# hipcc and the HIP headers (Debian 12: apt-get install hipcc
# libamdhip64-dev; any ROCm container has them) but no AMD device: it
# builds the code objects. Running them needs a ROCm LibTorch and an AMD GPU.
#
#   tools/hip_check.sh [--arch gfx90a,gfx940,gfx908]
#
# A ROCm LibTorch provides c10/hip/HIPStream.h; without one, the check
# writes a header that declares the one function the kernels call
# (c10::hip::getCurrentHIPStream) and compiles against that: the kernels'
# device code, the part under test, does not depend on it.
# Flags as for nvcc: -O3, and -ffp-contract=off where nvcc has -fmad=false
# (no fused multiply-add, so the element arithmetic rounds as the CPU
# kernels do).
# Exit status: 0 when every file built for every target.
set -u -o pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARCHS="gfx90a,gfx940,gfx908"
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) ARCHS="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "hip_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v hipcc >/dev/null || { echo "hip_check.sh: no hipcc (apt-get install hipcc libamdhip64-dev)" >&2; exit 2; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/include/c10/hip"
cat >"$WORK/include/c10/hip/HIPStream.h" <<'HEADER'
#pragma once
#include <hip/hip_runtime.h>
namespace c10::hip {
struct HIPStream {
  hipStream_t stream() const;
};
HIPStream getCurrentHIPStream(int device_index);
}  // namespace c10::hip
HEADER
echo "hipcc: $(hipcc --version 2>/dev/null | grep -m1 -i 'version')"
FAILED=0
for src in "$ROOT"/worker/quant/cuda/*.cu "$ROOT"/worker/algo/cuda/*.cu; do
  rel="${src#"$ROOT"/}"
  for arch in ${ARCHS//,/ }; do
    obj="$WORK/$(basename "$src" .cu).$arch.o"
    start=$(date +%s)
    if hipcc -x hip -std=c++17 -O3 -ffp-contract=off --offload-arch="$arch" \
        -I"$WORK/include" -I"$ROOT" -c "$src" -o "$obj" >"$WORK/log" 2>&1; then
      echo "ok    $rel for $arch: $(stat -c %s "$obj") bytes, $(( $(date +%s) - start )) s"
    else
      echo "FAIL  $rel for $arch:"; grep -m10 -E 'error' "$WORK/log"; FAILED=1
    fi
  done
done
exit "$FAILED"
