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

# PREFIX is absolute: DESTDIR is put in front of it as is.
absolute() {
    case "$1" in
    /*) ;;
    *)
        echo "$0: PREFIX must be an absolute path, not $1" >&2
        exit 2
        ;;
    esac
}

if [ "${1:-}" = --uninstall ]; then
    absolute "${2:?usage: $0 --uninstall PREFIX [DESTDIR]}"
    root="${3:-}$2"
    for b in "${progs[@]}"; do
        rm -f "$root/bin/$b" "$root/share/man/man1/$b.1" "$root/share/man/man1/$b"-*.1 \
            "$root/share/bash-completion/completions/$b" "$root/share/zsh/site-functions/_$b" \
            "$root/share/fish/vendor_completions.d/$b.fish"
    done
    echo "removed ioblame and ioblame-capture from $root"
    exit 0
fi

bin="${1:?usage: $0 BINDIR PREFIX [DESTDIR]}"
absolute "${2:?usage: $0 BINDIR PREFIX [DESTDIR]}"
root="${3:-}$2"
pages=$(mktemp -d)
trap 'rm -rf "$pages"' EXIT

for b in "${progs[@]}"; do
    install -Dm755 "$bin/$b" "$root/bin/$b"
done
mkdir -p "$root/share/man/man1" "$root/share/bash-completion/completions" \
    "$root/share/zsh/site-functions" "$root/share/fish/vendor_completions.d"
for b in "${progs[@]}"; do
    # Pages of subcommands an earlier version had do not outlive it.
    rm -f "$root/share/man/man1/$b.1" "$root/share/man/man1/$b"-*.1
    "$root/bin/$b" man --out "$pages"
    "$root/bin/$b" completions bash >"$root/share/bash-completion/completions/$b"
    "$root/bin/$b" completions zsh >"$root/share/zsh/site-functions/_$b"
    "$root/bin/$b" completions fish >"$root/share/fish/vendor_completions.d/$b.fish"
done
install -m644 -t "$root/share/man/man1" "$pages"/*.1
echo "installed under $root: bin/ioblame, bin/ioblame-capture, $(ls "$pages" | wc -l) man pages, bash, zsh and fish completions"
