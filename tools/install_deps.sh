#!/usr/bin/env bash
# Installs every Debian package that quantd's build, tests and demo need.
# Idempotent: when everything is already installed it does nothing (no apt-get update).
set -euo pipefail

PACKAGES=(
  # build
  bazel-bootstrap bazel-rules-java g++ cmake ninja-build pkg-config
  # C++ libraries (third_party/ wraps these)
  libtorch-dev libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsqlite3-dev libpq-dev libsentencepiece-dev nlohmann-json3-dev libre2-dev libcurl4-openssl-dev
  libicu-dev libsnappy-dev libzstd-dev
  libssl-dev zlib1g-dev
  # LibTorch's CPU matmuls go through the system BLAS; without OpenBLAS that is
  # Debian's netlib reference BLAS (~1 GFLOPS, 20x slower on these machines).
  libopenblas0-pthread
  # proto sources not shipped with protobuf: google.rpc status/details and grpc health
  golang-github-gogo-googleapis-dev grpc-proto
  # reference implementations and peers used by tests
  python3 python3-torch python3-numpy python3-onnx python3-grpcio python3-sentencepiece
  python3-protobuf protobuf-compiler-grpc python3-jinja2
  nodejs  # npm: see below
  # generated SDKs (docs/sdk.md): the Go client and its protoc plugins, the
  # HTTP/JSON face's HTTP library, the OpenAPI document's schema check and
  # the typed Python stubs' mypy check
  golang-go protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev
  golang-google-protobuf-dev golang-google-genproto-dev
  libcpp-httplib-dev python3-jsonschema mypy
  # the job report's screenshot test (//client/report:report_screenshot_test)
  chromium python3-pil
  # TorchScript models (tools/make_models, docs/vision_models.md): torchvision's
  # architectures and scikit-learn's bundled digits
  python3-torchvision python3-sklearn
  # services used by end-to-end tests
  postgresql sqlite3 clang
  # deploy/ checks (//deploy:deploy_test): YAML lint; ldd/readelf come with binutils;
  # //deploy:local_cluster_test scrapes the frontends with a real Prometheus
  yamllint binutils prometheus
  # //deploy:doc_commands_test runs docs/deploy.md's token snippet (openssl rand);
  # //tests/docs:docs_examples_test the README's /metrics example (curl)
  openssl curl
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Debian's nodejs comes without npm (package npm), while NodeSource's nodejs
# bundles it and conflicts with Debian's npm: ask for npm only when missing.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
# kubectl (its built-in kustomize renders deploy/k8s): Debian's
# kubernetes-client, unless another kubectl (e.g. the Google Cloud SDK's,
# which owns /usr/bin/kubectl) is already there.
if ! command -v kubectl >/dev/null 2>&1; then missing+=(kubernetes-client); fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install_deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
