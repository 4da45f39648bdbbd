#!/usr/bin/env bash
# Installs what is missing (Debian packages, the default model) and builds rtgen into build/.
# Idempotent and quiet when nothing is missing. Environment:
#   RTGEN_BUILD_DIR (default build), RTGEN_CMAKE_ARGS (extra configure args), RTGEN_SKIP_BUILD=1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/deps.sh
source "$root/scripts/lib/deps.sh"

rtgen_apt_install_missing "${RTGEN_APT_PACKAGES[@]}" "${RTGEN_APT_TEST_PACKAGES[@]}"
rtgen_fetch_model "$root/models"
if [ "${RTGEN_SKIP_BUILD:-0}" != 1 ]; then
  build="$root/${RTGEN_BUILD_DIR:-build}"
  # The tests' Python (rtgen_test_python) is given at the first configure; later runs keep it.
  # shellcheck disable=SC2086
  rtgen_build "$root" "$build" -DPython3_EXECUTABLE="$(rtgen_test_python "$build")" \
    ${RTGEN_CMAKE_ARGS:-}
fi
