#!/usr/bin/env bash
# Installs ioblame and ioblame-capture from BINDIR, with their man pages (one per program
# and subcommand) and their bash, zsh and fish completions, under DESTDIR/PREFIX:
#
#   scripts/install.sh BINDIR PREFIX [DESTDIR]
#
# `just install` builds the binaries and runs this; `scripts/install.sh --uninstall PREFIX
# [DESTDIR]` removes what it installed. Pages and completions are written by the installed
# binaries themselves, so they always match them.
set -euo pipefail

progs=(ioblame ioblame-capture)

if [ "${1:-}" = --uninstall ]; then
    root="${3:-}${2:?usage: $0 --uninstall PREFIX [DESTDIR]}"
    for b in "${progs[@]}"; do
        rm -f "$root/bin/$b" "$root/share/man/man1/$b.1" "$root/share/man/man1/$b"-*.1 \
            "$root/share/bash-completion/completions/$b" "$root/share/zsh/site-functions/_$b" \
            "$root/share/fish/vendor_completions.d/$b.fish"
    done
    echo "removed ioblame and ioblame-capture from $root"
    exit 0
fi

bin="${1:?usage: $0 BINDIR PREFIX [DESTDIR]}"
root="${3:-}${2:?usage: $0 BINDIR PREFIX [DESTDIR]}"
pages=$(mktemp -d)
trap 'rm -rf "$pages"' EXIT

install -Dm755 -t "$root/bin" "${progs[@]/#/$bin/}"
mkdir -p "$root/share/man/man1" "$root/share/bash-completion/completions" \
    "$root/share/zsh/site-functions" "$root/share/fish/vendor_completions.d"
for b in "${progs[@]}"; do
    "$root/bin/$b" man --out "$pages"
    "$root/bin/$b" completions bash >"$root/share/bash-completion/completions/$b"
    "$root/bin/$b" completions zsh >"$root/share/zsh/site-functions/_$b"
    "$root/bin/$b" completions fish >"$root/share/fish/vendor_completions.d/$b.fish"
done
install -m644 -t "$root/share/man/man1" "$pages"/*.1
echo "installed under $root: bin/ioblame, bin/ioblame-capture, $(ls "$pages" | wc -l) man pages, bash, zsh and fish completions"
