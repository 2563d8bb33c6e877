#!/usr/bin/env bash
# Builds the recorder to copy onto production hosts: ioblame-capture as one fully static,
# stripped x86_64 binary (glibc's static libraries, `crt-static`; the `dist` profile of
# Cargo.toml). A dynamically linked build from this machine does not start on an older glibc.
# Prints the binary's path. `scripts/check-dist.sh` checks it.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
# RUSTFLAGS with an explicit --target apply to the binary, not to build scripts.
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --quiet --profile dist --target "$target" -p ioblame-capture
echo "${CARGO_TARGET_DIR:-target}/$target/dist/ioblame-capture"
