#!/usr/bin/env bash
# The GitHub action's install step (action.yml): builds `stampede` from the action's own checkout
# with cargo, so the binary is the commit the workflow pinned (`uses: OWNER/stampede@REF`), and puts
# it on the job's PATH. A script, not inline YAML, so tests/tests/action.rs runs it as the runner
# would. Inputs come as the environment: STAMPEDE_VERSION (only `source` for now: no release
# binaries are published), STAMPEDE_SOURCE (the checkout, default: this script's parent),
# STAMPEDE_PROFILE (cargo's profile, default release; the test builds dev).
set -euo pipefail

version="${STAMPEDE_VERSION:-source}"
source_dir="${STAMPEDE_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
if [ "$version" != "source" ]; then
    echo "stampede action: version '$version': only 'source' (build this checkout with cargo) is supported" >&2
    exit 2
fi
command -v cargo >/dev/null || {
    echo "stampede action: cargo is not on PATH: add a Rust toolchain step (e.g. dtolnay/rust-toolchain) before this action" >&2
    exit 2
}
profile="${STAMPEDE_PROFILE:-release}"
cargo build --profile "$profile" --locked --bin stampede --manifest-path "$source_dir/Cargo.toml" >&2
target_dir="$(cargo metadata --format-version 1 --no-deps --manifest-path "$source_dir/Cargo.toml" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
# cargo's dev profile builds into debug/, every other into a directory of its name.
out="$profile"
[ "$profile" != dev ] || out=debug
bin_dir="$target_dir/$out"
"$bin_dir/stampede" --version >&2
if [ -n "${GITHUB_PATH:-}" ]; then
    echo "$bin_dir" >>"$GITHUB_PATH"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "bin=$bin_dir/stampede" >>"$GITHUB_OUTPUT"
fi
