#!/usr/bin/env bash
# Prints, one per line, the Debian/Ubuntu packages that provide the shared libraries the given
# binaries load (found with ldd, owners found with dpkg -S). The Dockerfile's build stage writes
# this list and the runtime stage installs exactly it, so no release-specific runtime package
# names (libgrpc++1.51 vs libgrpc++1.51t64, ...) are hard-coded anywhere.
# Fails when a library is missing or has no owning package, except the CUDA driver libraries,
# which the NVIDIA container runtime mounts into the container at run time, and the CUDA toolkit
# libraries under /usr/local/cuda*, which the nvidia/cuda runtime base image already holds.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }

owner() {  # prints the package owning library path $1, or nothing
  local path=$1 real candidate
  real=$(readlink -f "$path")
  for candidate in "$path" "$real" "/usr$path" "/usr$real" "${path#/usr}" "${real#/usr}"; do
    dpkg-query -S "$candidate" 2>/dev/null | head -n1 | cut -d: -f1 && return 0
  done
  return 0
}

status=0
declare -A packages=()
for binary in "$@"; do
  [ -x "$binary" ] || { echo "runtime-packages: $binary is not an executable" >&2; exit 2; }
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      case $name in
        libcuda.so* | libnvidia-*) continue ;;  # injected by the NVIDIA container runtime
      esac
      echo "runtime-packages: $binary needs $name, which is not found" >&2
      status=1
      continue
    fi
    case $(readlink -f "$path") in
      /usr/local/cuda*) continue ;;  # cudart, cuBLAS(Lt): in the nvidia/cuda runtime image
    esac
    package=$(owner "$path")
    if [ -z "$package" ]; then
      echo "runtime-packages: no Debian package owns $path (needed by $binary)" >&2
      status=1
      continue
    fi
    packages[$package]=1
  done < <(ldd "$binary")
done
[ "$status" -eq 0 ] || exit "$status"
printf '%s\n' "${!packages[@]}" | sort
