#!/usr/bin/env bash
# Packs built binaries into one tar.xz for a device call to carry: each binary through the shared
# ../shared/tools/device-bundle.sh (binary, Debian libraries, env.sh), stripped, with the PyTorch
# decode peer beside them when it is there. device-bundle.sh is run once per binary: given a
# binary that needs none of the libraries it copies (rtgen-boundary-bench), it stops before it
# writes env.sh and skips the binaries after it; alone, that binary is copied all the same.
# Usage: scripts/device/bundle.sh OUT.tar.xz BINARY...   (OUT inside the repo, ignored by git)
# On the device: mkdir -p /tmp/bx && tar xJf OUT.tar.xz -C /tmp/bx && source /tmp/bx/device/env.sh
# (the binaries in /tmp/bx/device/bin, the peer at /tmp/bx/device/torch_decode_peer.py).
set -euo pipefail
out="${1:?usage: bundle.sh OUT.tar.xz BINARY...}"
shift
(( $# > 0 )) || { echo "bundle: no BINARY given" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tool="${root}/../shared/tools/device-bundle.sh"
peer="${root}/../shared/peers/torch_decode_peer.py"
[[ -x "${tool}" ]] || { echo "bundle: ${tool} not found" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "${stage}"' EXIT
for bin in "$@"; do
  [[ -x "${bin}" ]] || { echo "bundle: not an executable: ${bin}" >&2; exit 2; }
  "${tool}" "${stage}/device" "${bin}" > /dev/null || true  # see above: the copy is checked next
  [[ -x "${stage}/device/bin/$(basename "${bin}")" ]] ||
    { echo "bundle: device-bundle.sh did not copy ${bin}" >&2; exit 1; }
done
[[ -f "${stage}/device/env.sh" ]] ||
  { echo "bundle: no env.sh (no BINARY needs a library device-bundle.sh copies)" >&2; exit 1; }
strip "${stage}/device/bin/"*
[[ -f "${peer}" ]] && cp "${peer}" "${stage}/device/"
mkdir -p "$(dirname "${out}")"
tar cJf "${out}" -C "${stage}" device
echo "bundle: ${out} ($(du -h "${out}" | cut -f1)): $(cd "${stage}/device/bin" && echo *)"
