#!/usr/bin/env bash
# Makes sure an Atlas runner has what the pipelines build and test with: the Rust toolchain at
# the workspace's MSRV or newer (rust-version in Cargo.toml), installed through rustup when it is
# missing or older, and cargo-nextest. Prints what it found and what it did.
#
# Usage: ci/atlas/setup-rust.sh [--dry-run]
#   --dry-run   print every install step instead of running it (the checks still run)
set -euo pipefail

DRY_RUN=0
case "${1:-}" in
    --dry-run) DRY_RUN=1 ;;
    "") ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup-rust: unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac
say() { echo "setup-rust: $*"; }
step() { if [ "$DRY_RUN" = 1 ]; then echo "+ $*"; else "$@"; fi; }

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MSRV="$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$REPO/Cargo.toml" | head -n 1)"
[ -n "$MSRV" ] || { echo "setup-rust: no rust-version in $REPO/Cargo.toml" >&2; exit 2; }
ver() { echo "$1" | awk -F. '{ printf "%d%03d%03d", $1, $2, $3 }'; }

have=""
if command -v cargo >/dev/null 2>&1; then
    have="$(cargo --version | awk '{ print $2 }')"
fi
if [ -n "$have" ] && [ "$(ver "$have")" -ge "$(ver "$MSRV")" ]; then
    say "cargo $have (MSRV $MSRV): ok"
else
    say "cargo ${have:-missing}, MSRV $MSRV: installing the $MSRV toolchain with rustup"
    if ! command -v rustup >/dev/null 2>&1; then
        step bash -c 'curl --proto =https --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain none'
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    step rustup toolchain install "$MSRV" --profile minimal --component clippy,rustfmt
    step rustup default "$MSRV"
fi
if cargo nextest --version >/dev/null 2>&1; then
    say "$(cargo nextest --version | head -n 1): ok"
else
    say "cargo-nextest missing: installing it"
    step cargo install cargo-nextest --locked
fi
