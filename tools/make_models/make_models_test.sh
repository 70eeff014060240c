#!/usr/bin/env bash
# Makes both torchvision models with script_torchvision.py, each in a temp dir,
# and checks them and the committed models (models/digits_cnn,
# models/digits_denoiser, models/recommender) with check_models.py, all with
# /usr/bin/python3 (Debian's torch, torchvision and numpy).
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
tools="${runfiles}/tools/make_models"
py=/usr/bin/python3
if ! "$py" -c "import torch, torchvision, numpy" 2>/dev/null; then
  echo "make_models_test: $py lacks torch, torchvision or numpy" \
    "(Debian: python3-torch python3-torchvision python3-numpy)" >&2
  exit 1
fi
tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/make_models.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# ARCH SAMPLES SIZE [--bn-warmup]: the defaults (8 samples of 64x64) once,
# other sizes and the BatchNorm warm-up the other times.
specs=()
make() {
  local arch=$1 samples=$2 size=$3 extra=${4:-}
  local dir="${tmp}/${arch}_${samples}_${size}${extra:+_warm}"
  local args=(--arch "$arch" --out "$dir")
  if [ "$samples" != 8 ] || [ "$size" != 64 ]; then
    args+=(--samples "$samples" --image-size "$size")
  fi
  if [ -n "$extra" ]; then args+=(--bn-warmup); fi
  "$py" "${tools}/script_torchvision.py" "${args[@]}"
  specs+=(--torchvision "${arch}:${samples}:${size}:${dir}${extra:+:warm}")
}
make resnet18 8 64
make mobilenet_v2 8 64
make mobilenet_v2 3 32 warm

exec "$py" "${tools}/check_models.py" --models "${runfiles}/models" "${specs[@]}"
