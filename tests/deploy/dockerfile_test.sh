#!/usr/bin/env bash
# Lints docker/Dockerfile (no Docker engine is needed):
#  - builds on NVIDIA CUDA 13 devel, runs on the matching runtime image;
#  - installs and builds through scripts/lib/deps.sh (the functions setup.sh uses) and defines
#    no package list of its own;
#  - ARG CUDA_ARCHITECTURES="80;89;90a" reaches -DCMAKE_CUDA_ARCHITECTURES;
#  - the final USER is numeric and not root; ENTRYPOINT is rtgen-server with --model;
#  - every COPY source exists and is not excluded by .dockerignore; every COPY --from names a
#    stage; every RUN body parses as bash;
# then runs the build stage's docker/runtime-packages.sh on a built rtgen-server (argument 1,
# optional) and checks that it names installed packages. Finally it mutates copies of the
# Dockerfile and checks that the lint rejects each one, so the lint itself can fail.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
server_binary=${1:-}

# Prints the Dockerfile with comments dropped and continuation lines joined.
instructions() {
  sed -e '/^[[:space:]]*#/d' "$1" | awk '
    { line = $0 }
    /\\[[:space:]]*$/ { sub(/\\[[:space:]]*$/, "", line); buffer = buffer line " "; next }
    { print buffer line; buffer = "" }
    END { if (buffer != "") print buffer }' | sed -e '/^[[:space:]]*$/d'
}

# True when PATH (relative to the context root) is excluded by a .dockerignore pattern.
ignored() {
  local path=$1 pattern prefix
  [ -f "$root/.dockerignore" ] || return 1
  while IFS= read -r pattern; do
    pattern=${pattern%/}
    case $pattern in '' | '#'* | '!'*) continue ;; esac
    prefix=$path
    while :; do
      # shellcheck disable=SC2053  # glob match on purpose
      [[ $prefix == $pattern ]] && return 0
      [[ $prefix == */* ]] || break
      prefix=${prefix%/*}
    done
  done <"$root/.dockerignore"
  return 1
}

# Lints Dockerfile $1; prints one line per problem; returns 1 when there is any.
lint() {
  local file=$1 problems=0 text deps="$root/scripts/lib/deps.sh"
  text=$(instructions "$file")
  problem() { echo "  $file: $*"; problems=$((problems + 1)); }

  local froms first last
  froms=$(grep -iE '^FROM[[:space:]]' <<<"$text" || true)
  first=$(head -n1 <<<"$froms")
  last=$(tail -n1 <<<"$froms")
  [[ $first =~ nvidia/cuda:.*-devel- ]] || problem "first stage is not FROM nvidia/cuda:...-devel-...: $first"
  [[ $last =~ nvidia/cuda:.*-runtime- ]] || problem "final stage is not FROM nvidia/cuda:...-runtime-...: $last"
  grep -qE '^ARG[[:space:]]+CUDA_VERSION=13\.' <<<"$text" || problem "no ARG CUDA_VERSION=13.x"

  grep -qE '^ARG[[:space:]]+CUDA_ARCHITECTURES="80;89;90a"[[:space:]]*$' <<<"$text" ||
    problem 'no ARG CUDA_ARCHITECTURES="80;89;90a"'
  grep -E '^RUN' <<<"$text" | grep -qF -- '-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}"' ||
    problem 'no RUN passes -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}"'

  grep -qE '^COPY[[:space:]]+scripts/lib/deps\.sh[[:space:]]' <<<"$text" ||
    problem "scripts/lib/deps.sh is not copied into the image"
  local call
  for call in 'rtgen_apt_install_missing "${RTGEN_APT_PACKAGES[@]}"' 'rtgen_build ' 'rtgen_fetch_model '; do
    grep -E '^RUN' <<<"$text" | grep -E 'source [^ ]*deps\.sh' | grep -qF -- "$call" ||
      problem "no RUN that sources deps.sh calls $call"
  done
  local name
  for name in rtgen_apt_install_missing rtgen_build rtgen_fetch_model; do
    grep -qE "^$name\(\)" "$deps" || problem "$name is used but not defined in scripts/lib/deps.sh"
  done
  grep -qE '^RTGEN_APT_PACKAGES=\(' "$deps" || problem "RTGEN_APT_PACKAGES is not defined in deps.sh"
  grep -E '^RUN' <<<"$text" | grep -qE 'apt-get[[:space:]]+(-[^ ]+[[:space:]]+)*install' &&
    problem "a RUN calls apt-get install itself: install through deps.sh (one package list)"

  local user
  user=$(grep -E '^USER[[:space:]]' <<<"$text" | tail -n1 | awk '{print $2}')
  if [ -z "$user" ]; then
    problem "no USER: the server would run as root"
  elif ! [[ ${user%%:*} =~ ^[0-9]+$ ]] || [ "${user%%:*}" -eq 0 ]; then
    problem "final USER '$user' is not a numeric non-root uid (runAsNonRoot needs one)"
  fi

  local entry
  entry=$(grep -E '^ENTRYPOINT' <<<"$text" | tail -n1)
  [[ $entry == *rtgen-server* && $entry == *--model* ]] ||
    problem "ENTRYPOINT is not rtgen-server with --model: $entry"

  local stages line word sources from
  stages=$(grep -ioE '^FROM[[:space:]].*[[:space:]]AS[[:space:]]+[A-Za-z0-9_.-]+' <<<"$text" |
    awk '{print $NF}')
  while IFS= read -r line; do
    from=""
    sources=()
    read -ra words <<<"${line#COPY}"
    for word in "${words[@]}"; do
      case $word in
        --from=*) from=${word#--from=} ;;
        --*) ;;
        *) sources+=("$word") ;;
      esac
    done
    [ ${#sources[@]} -ge 2 ] || { problem "COPY without source and destination: $line"; continue; }
    unset 'sources[${#sources[@]}-1]'  # the destination
    if [ -n "$from" ]; then
      grep -qxF "$from" <<<"$stages" || problem "COPY --from=$from names no stage"
      continue
    fi
    for word in "${sources[@]}"; do
      word=${word%/}
      [ -e "$root/$word" ] || problem "COPY source $word does not exist"
      ignored "$word" && problem "COPY source $word is excluded by .dockerignore"
    done
  done < <(grep -E '^COPY[[:space:]]' <<<"$text")

  while IFS= read -r line; do
    bash -n <<<"${line#RUN }" 2>/dev/null || problem "RUN body does not parse as bash: $line"
  done < <(grep -E '^RUN[[:space:]]' <<<"$text")
  grep -qE '^SHELL[[:space:]]+\["/bin/bash"' <<<"$text" ||
    problem 'no SHELL ["/bin/bash", ...]: deps.sh needs bash arrays'

  return $((problems > 0))
}

failures=0
dockerfile="$root/docker/Dockerfile"
echo "lint $dockerfile"
lint "$dockerfile" || { echo "FAIL: docker/Dockerfile"; failures=$((failures + 1)); }
grep -qxE 'build\*/?' "$root/.dockerignore" && grep -qxE 'models/?' "$root/.dockerignore" &&
  grep -qxE '\.git/?' "$root/.dockerignore" ||
  { echo "FAIL: .dockerignore must list build*/, models/ and .git"; failures=$((failures + 1)); }

if [ -n "$server_binary" ]; then
  echo "docker/runtime-packages.sh $server_binary"
  packages=$("$root/docker/runtime-packages.sh" "$server_binary") ||
    { echo "FAIL: runtime-packages.sh"; failures=$((failures + 1)); }
  [ -n "$packages" ] || { echo "FAIL: runtime-packages.sh named no package"; failures=$((failures + 1)); }
  for package in $packages; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
      { echo "FAIL: runtime-packages.sh named $package, which is not installed"; failures=$((failures + 1)); }
  done
  echo "  $(wc -w <<<"$packages") packages: $(tr '\n' ' ' <<<"$packages")"
fi

# Each mutation breaks one rule; the lint must reject every one.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mutations=(
  's/^USER 10001:10001$/USER root/'
  's/^ARG CUDA_ARCHITECTURES=.*/ARG CUDA_ARCHITECTURES="90a"/'
  's#source /src/scripts/lib/deps.sh#true#g'
  's#^COPY tools /src/tools#COPY toolz /src/tools#'
  's#^COPY cmake /src/cmake#COPY build-x/cmake /src/cmake#'
  's#--from=build /out/bin/#--from=builder /out/bin/#'
  's#-runtime-ubuntu#-devel-ubuntu#'
  's#^ENTRYPOINT .*#ENTRYPOINT ["/bin/sh"]#'
  's#rm -rf /var/lib/apt/lists/\*$#apt-get install -y cmake#'
)
for mutation in "${mutations[@]}"; do
  sed -e "$mutation" "$dockerfile" >"$tmp/Dockerfile"
  if cmp -s "$dockerfile" "$tmp/Dockerfile"; then
    echo "FAIL: mutation '$mutation' changed nothing (update the test)"
    failures=$((failures + 1))
  elif lint "$tmp/Dockerfile" >"$tmp/log"; then
    echo "FAIL: the lint accepted a Dockerfile mutated with '$mutation'"
    failures=$((failures + 1))
  fi
done

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "PASS"
