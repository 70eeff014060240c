#!/usr/bin/env bash
# Builds quantd's container images from the repository root and tags them
# REGISTRY/quantd[-worker-KIND]:VERSION.
#
#   deploy/docker/build.sh [--registry R] [--version V] [--push] [--dry-run] [IMAGE...]
#
# IMAGE is quantd, worker-cpu, worker-cuda or worker-rocm (default: quantd,
# worker-cpu, worker-cuda). VERSION defaults to quantd's own version
# (kQuantdVersion in server/metrics/quantd_metrics.h, the value of
# quantd_build_info{version}), which the k8s overlays' newTag must match.
# LIBTORCH_CUDA_SHA256 / LIBTORCH_ROCM_SHA256, when set, pin the vendor
# LibTorch download. --dry-run prints the docker commands without running them.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
registry="registry.example.com/quantd"
version=""
push=0
dry_run=0
images=()

usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --registry) registry="$2"; shift 2 ;;
    --registry=*) registry="${1#*=}"; shift ;;
    --version) version="$2"; shift 2 ;;
    --version=*) version="${1#*=}"; shift ;;
    --push) push=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "build.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) images+=("$1"); shift ;;
  esac
done
[ ${#images[@]} -eq 0 ] && images=(quantd worker-cpu worker-cuda)

if [ -z "$version" ]; then
  version="$(sed -n 's/.*kQuantdVersion\[\] = "\([^"]*\)".*/\1/p' \
    "$repo/server/metrics/quantd_metrics.h")"
fi
if ! [[ "$version" =~ ^[0-9A-Za-z][0-9A-Za-z._-]*$ ]]; then
  echo "build.sh: bad version '$version'" >&2
  exit 2
fi

run() {
  if [ "$dry_run" -eq 1 ]; then
    printf '%q ' "$@"
    printf '\n'
  else
    "$@"
  fi
}

for image in "${images[@]}"; do
  case "$image" in
    quantd|worker-cpu|worker-cuda|worker-rocm) ;;
    *) echo "build.sh: unknown image '$image' (quantd, worker-cpu, worker-cuda, worker-rocm)" >&2
       exit 2 ;;
  esac
  name="quantd"
  [ "$image" != quantd ] && name="quantd-$image"
  tag="$registry/$name:$version"
  extra=()
  case "$image" in
    worker-cuda) extra=(--build-arg "LIBTORCH_SHA256=${LIBTORCH_CUDA_SHA256:-}") ;;
    worker-rocm) extra=(--build-arg "LIBTORCH_SHA256=${LIBTORCH_ROCM_SHA256:-}") ;;
  esac
  run env DOCKER_BUILDKIT=1 docker build \
    -f "$repo/deploy/docker/Dockerfile.$image" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.title=$name" \
    ${extra[@]+"${extra[@]}"} \
    -t "$tag" "$repo"
  if [ "$push" -eq 1 ]; then
    run docker push "$tag"
  fi
done
