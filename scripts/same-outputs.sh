#!/usr/bin/env bash
# Checks that two builds of the analyzer give byte-identical outputs: `iolog`, `acts --json`,
# `intents`, `counters` and the report's Parquet tables, with 1 and 2 threads, on every
# fixture trace and on any further traces named. For refactors that must not change an answer.
#
#   scripts/same-outputs.sh OLD_IOBLAME NEW_IOBLAME [TRACE...]
#
# Exit status: 0 identical, 1 a difference (listed), 2 a usage error.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
    echo "usage: $0 OLD_IOBLAME NEW_IOBLAME [TRACE...]" >&2
    exit 2
fi
old=$1 new=$2
shift 2
traces=("$@")
for d in fixtures/*/trace; do traces+=("$d"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
n=0
for t in "${traces[@]}"; do
    for threads in 1 2; do
        for which in old new; do
            bin=${!which}
            out="$work/$which"
            rm -rf "$out" && mkdir -p "$out"
            export RAYON_NUM_THREADS=$threads
            "$bin" iolog "$t" >"$out/iolog" 2>"$out/iolog.err"
            "$bin" acts --json "$t" >"$out/acts.json" 2>/dev/null
            "$bin" intents "$t" >"$out/intents" 2>/dev/null
            "$bin" counters "$t" >"$out/counters" 2>/dev/null
            # The same report folder for both builds: the summary names it.
            rm -rf "$work/report"
            "$bin" report "$t" -o "$work/report" >"$out/report.out" 2>/dev/null
            find "$work/report" -name '*.parquet' | sort | while read -r p; do
                cp "$p" "$out/$(basename "$p")"
            done
        done
        for f in "$work"/old/*; do
            name=$(basename "$f")
            n=$((n + 1))
            if ! cmp -s "$f" "$work/new/$name"; then
                echo "DIFFERS: $t ($threads threads): $name"
                status=1
            fi
        done
        if [ "$(ls "$work/old" | wc -l)" != "$(ls "$work/new" | wc -l)" ]; then
            echo "DIFFERS: $t ($threads threads): the sets of files differ"
            status=1
        fi
    done
done
echo "same-outputs: $n files compared over ${#traces[@]} traces, status $status"
exit $status
