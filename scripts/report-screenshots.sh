#!/usr/bin/env bash
# Screenshots of the report of a trace at a laptop's width (1280 px) and a phone's (390 px),
# with headless Chromium, for docs/report.md (`just screenshots` updates docs/images/):
#
#   scripts/report-screenshots.sh IOBLAME OUTDIR [TRACE]
#
# IOBLAME is the analyzer binary, TRACE the bundled fixture by default. Headless Chromium lays
# a window out at least 500 px wide, so the page is shown in a frame of the width wanted (as
# crates/report/tests/report.rs does).
set -euo pipefail

bin=$(realpath "${1:?usage: $0 IOBLAME OUTDIR [TRACE]}")
out=$(realpath -m "${2:?usage: $0 IOBLAME OUTDIR [TRACE]}")
trace=$(realpath "${3:-$(dirname "$0")/../fixtures/ext4-two-writers/trace}")
# The page names the trace as given: relative to the repository when it is in it.
cd "$(dirname "$0")/.."
trace=$(realpath --relative-base=. "$trace")
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome) || {
    echo "$0: no chromium (apt-get install chromium)" >&2
    exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" report "$trace" -o "$work/report" >/dev/null 2>"$work/stderr" || {
    cat "$work/stderr" >&2
    exit 1
}
mkdir -p "$out"
for size in 1280x2000 390x2400; do
    w=${size%x*} h=${size#*x}
    printf '<!DOCTYPE html><html><body style="margin:0"><iframe src="report/report.html" style="border:0;display:block;width:%spx;height:%spx"></iframe></body></html>' \
        "$w" "$h" >"$work/frame-$w.html"
    "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$w,$h" \
        --screenshot="$out/report-$w.png" "file://$work/frame-$w.html" 2>/dev/null
    echo "$out/report-$w.png"
done
