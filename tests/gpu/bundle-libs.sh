#!/usr/bin/env bash
# bundle-libs.sh BUILD_DIR — packs the shared libraries the build's GPU tests
# and pipescope-cli need, other than libc's and CUDA's own, into
# BUILD_DIR/device-libs.tar.xz, for a GPU machine that has the CUDA driver and
# toolkit but not GLib, OpenBLAS or cairo.  device-check.sh unpacks it.
set -eu
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
b=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/device-libs"
bins=$(find "$b/tests/gpu" "$b/app" -maxdepth 1 -type f \( -name "test-gpu-*" -o -name bench-gpu -o -name pipescope-cli \) 2>/dev/null || true)
[ -n "$bins" ] || { echo "$0: no GPU tests or pipescope-cli in $b" >&2; exit 2; }
for f in $bins; do ldd "$f"; done | awk '/=> \//{print $3}' | sort -u \
  | grep -v -E '/(libc|libm|libpthread|libdl|librt|libutil|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas[^/]*|libcupti|libnccl|libnvidia[^/]*)\.so' \
  | while read -r lib; do cp -L "$lib" "$tmp/device-libs/"; done
tar -C "$tmp" -cJf "$b/device-libs.tar.xz" device-libs
echo "$b/device-libs.tar.xz: $(ls "$tmp/device-libs" | wc -l) libraries, $(du -h "$b/device-libs.tar.xz" | cut -f1)"
