#!/usr/bin/env bash
# Build examples/line-echo into a one-file image, with no registry and no
# Dockerfile: a static binary, packed with `docker import`. Prints the
# image id (sha256:...), which is what `sbx create --image` takes.
#
#   img=$(examples/line-echo/pack.sh)
#   id=$(sbx create --image "$img")
#
# Needs rustc and a static libc (Debian: libc6-dev).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/bin" "$work/root/tmp"
"${RUSTC:-rustc}" --edition 2021 -O -C target-feature=+crt-static \
  -o "$work/root/bin/line-echo" "$here/main.rs" >&2
# The image's user: sbx would fall back to 65534 (nobody) anyway; saying so
# in the image documents it.
tar --owner=0 --group=0 --numeric-owner -C "$work/root" -cf "$work/image.tar" .
docker import \
  --change 'ENTRYPOINT ["/bin/line-echo"]' \
  --change 'USER 65534:65534' \
  --change "LABEL org.opencontainers.image.title=sbx-line-echo" \
  "$work/image.tar"
