#!/usr/bin/env bash
# Joins the SmolLM2 file carried to the GPU machine in parts (PARTS_DIR/smollm2.part*, each
# under one call's carry limit, with PARTS_DIR/sha256 of the whole file), afresh on every call so
# no stale half-written file is reused, and checks its checksum. Prints the joined file's path;
# exits 2 on a mismatch. Usage: MODEL=$(scripts/device/join_model.sh PARTS_DIR) || exit 2
set -uo pipefail
parts="${1:?usage: join_model.sh PARTS_DIR}"
model="${parts}/SmolLM2-135M-Instruct.Q4_1.gguf"
# A missing directory, part or checksum file is refused: both sums read empty otherwise, and
# empty equals empty.
[[ -f "${parts}/sha256" ]] || { echo "join_model: no ${parts}/sha256" >&2; exit 2; }
compgen -G "${parts}/smollm2.part*" > /dev/null ||
  { echo "join_model: no ${parts}/smollm2.part*" >&2; exit 2; }
cat "${parts}"/smollm2.part* > "${model}" || { echo "join_model: cannot join" >&2; exit 2; }
want=$(awk '{print $1}' "${parts}/sha256")
got=$(sha256sum "${model}" | awk '{print $1}')
[[ "${want}" =~ ^[0-9a-f]{64}$ ]] ||
  { echo "join_model: ${parts}/sha256 holds no SHA-256 sum" >&2; exit 2; }
[[ "${want}" == "${got}" ]] || { echo "join_model: checksum mismatch in ${parts}" >&2; exit 2; }
echo "${model}"
