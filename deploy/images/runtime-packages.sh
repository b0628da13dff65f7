#!/usr/bin/env bash
# The runtime stage of the Containerfiles gets the binary and the Debian/Ubuntu packages that own
# the shared libraries it loads, nothing of the toolchain. They are found here from `ldd`, not
# listed by hand, so a new dependency (or the CUDA image's other distribution) needs no edit, and
# the image keeps a dpkg database that scanners and SBOM tools read.
#
#   runtime-packages.sh list BINARY    build stage: prints NAME=VERSION of every package owning a
#                                      library BINARY loads; fails naming a library that is
#                                      missing or that no package owns
#   runtime-packages.sh install FILE   runtime stage: installs FILE's packages at those versions,
#                                      except those the base image already has (libc6, ...), which
#                                      stay as the base has them
set -euo pipefail

# The package that owns library path $1. dpkg records a file under the path its package ships,
# which on merged-/usr systems may differ from ldd's by a /usr prefix or a symlink.
owner() {
  local real p pkg
  real=$(readlink -f "$1")
  for p in "$1" "/usr$1" "${1#/usr}" "$real" "/usr$real" "${real#/usr}"; do
    pkg=$(dpkg-query -S "$p" 2>/dev/null | grep -v '^diversion' | head -n 1 | cut -d: -f1 || true)
    if [[ -n $pkg ]]; then
      echo "$pkg"
      return 0
    fi
  done
  return 1
}

case "${1:-}" in
  list)
    binary=$2
    libs=$(ldd "$binary")
    if grep -q 'not found' <<<"$libs"; then
      echo "runtime-packages: $binary needs libraries that are not installed:" >&2
      grep 'not found' <<<"$libs" >&2
      exit 1
    fi
    # "libfoo.so.1 => /path/libfoo.so.1 (0x...)" and the loader's own "/lib64/ld-linux... (0x...)".
    mapfile -t paths < <(awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }' <<<"$libs")
    packages=()
    for path in "${paths[@]}"; do
      if ! pkg=$(owner "$path"); then
        echo "runtime-packages: no package owns $path (loaded by $binary): install it from a package" >&2
        exit 1
      fi
      packages+=("$(dpkg-query -W -f='${Package}=${Version}' "$pkg")")
    done
    printf '%s\n' "${packages[@]}" | sort -u
    ;;
  install)
    wanted=()
    while IFS='=' read -r name version; do
      dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q 'install ok installed' || wanted+=("$name=$version")
    done <"$2"
    if ((${#wanted[@]} > 0)); then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${wanted[@]}"
      rm -rf /var/lib/apt/lists/*
    fi
    ;;
  *)
    echo "usage: runtime-packages.sh list BINARY | install FILE" >&2
    exit 2
    ;;
esac
