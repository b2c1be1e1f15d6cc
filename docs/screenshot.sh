#!/usr/bin/env bash
# The README's picture of a report: runs the demo into a temporary directory and has Chromium headless
# take a screenshot of its report.html into docs/report.png.
#
#   docs/screenshot.sh                          # builds and runs the release stampede
#   STAMPEDE=target/debug/stampede docs/screenshot.sh
#   WINDOW=1200,2400 docs/screenshot.sh         # a taller picture (width,height in CSS pixels)
#
# Chromium is told to resolve no host name: the page must draw itself from the file alone.
set -euo pipefail
cd "$(dirname "$0")/.."

stampede=${STAMPEDE:-}
if [[ -z $stampede ]]; then
    cargo build --release --quiet --bin stampede
    stampede=target/release/stampede
fi
chromium=${CHROMIUM:-chromium}
command -v "$chromium" >/dev/null || { echo "screenshot.sh: no $chromium (apt-get install chromium)" >&2; exit 1; }
window=${WINDOW:-1200,1070}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$stampede" demo --quiet --out "$work/run" >/dev/null
"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$work/profile" \
    --window-size="$window" --screenshot="$work/report.png" "file://$work/run/report.html" \
    >/dev/null 2>&1
cp "$work/report.png" docs/report.png
echo "docs/report.png: $(wc -c <docs/report.png) bytes"
