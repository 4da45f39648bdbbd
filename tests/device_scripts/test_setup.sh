# Sourced first by each device-script test: strict mode; `root`, the repository; `work`, a
# scratch folder removed at exit, with an empty stand-in bundle at ${work}/bundle/bin; and
# fail(), which counts a failure in `failures` and says what failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
mkdir -p "${work}/bundle/bin"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
