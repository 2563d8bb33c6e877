#!/bin/bash
# fetch-kernel.sh SERIES|KVER [DESTDIR]
#   SERIES: 5.10 | 6.1 | 6.12 | ... | newest  -> the newest amd64 kernel of that series that
#           Debian's suites serve now (ABI numbers move: never hard-code one)
#   KVER:   an exact release, e.g. 6.1.0-56-amd64
# Downloads the Debian kernel package from the Debian mirror this machine's apt uses, without
# installing it, unpacks it under DESTDIR/KVER (default $KERNEL_LAB/k), runs depmod, and
# prints the path of its vmlinuz. A kernel already unpacked there is not downloaded again.
# `fetch-kernel.sh --list` prints every amd64 kernel release the suites serve.
# The system's apt configuration is not touched (a private list directory is used).
set -euo pipefail
ARG=${1:?usage: fetch-kernel.sh SERIES|KVER|--list [DESTDIR]}
KERNEL_LAB=${KERNEL_LAB:-${TMPDIR:-/tmp}/kernel-lab}
DEST=${2:-$KERNEL_LAB/k}
# The mirror: the first URI of the system's Debian sources (deb822 or one-line format).
MIRROR=${MIRROR:-$(sed -nE 's/^URIs:[[:space:]]*([^[:space:]]+\/debian)\/?$/\1/p; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+\/debian)\/?[[:space:]].*/\2/p' \
  $(ls /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null) 2>/dev/null | head -n1 || true)}
[ -n "$MIRROR" ] || { echo "fetch-kernel: no Debian mirror found in the apt sources (set MIRROR=)" >&2; exit 2; }
SUITES=${SUITES:-"debian:bookworm debian:bookworm-updates debian-security:bookworm-security debian:bookworm-backports
  debian:bullseye debian-security:bullseye-security debian:trixie debian-security:trixie-security debian:trixie-backports"}
# One private apt state per day and lab: resolving several kernels updates the lists once.
A=$KERNEL_LAB/apt; mkdir -p "$A/lists/partial" "$A/cache/archives/partial"
for s in $SUITES; do
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${MIRROR%/debian}/${s%%:*} ${s#*:} main"
done > "$A/sources.list.new"
O=(-o Dir::Etc::sourcelist="$A/sources.list" -o Dir::Etc::sourceparts=/nonexistent
   -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" -o Dir::State::status=/dev/null
   -o Debug::NoLocking=1 -o APT::Sandbox::User=root
   -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
   -o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false)
stamp=$A/updated-$(date +%Y%m%d)
if [ ! -e "$stamp" ] || ! cmp -s "$A/sources.list.new" "$A/sources.list"; then
  mv "$A/sources.list.new" "$A/sources.list"
  apt-get "${O[@]}" -qq update
  rm -f "$A"/updated-*; touch "$stamp"
fi
# Every amd64 kernel release with a package to download: linux-image-R (R = X.Y.Z-N-amd64 or
# X.Y.Z+debNN-amd64) and the 6.16+ split packages linux-binary-R; not -unsigned, -dbg, -rt,
# -cloud.
list() {
  apt-cache "${O[@]}" dumpavail 2>/dev/null |
    sed -nE 's/^Package: linux-(image|binary)-([0-9]+\.[0-9]+[.0-9]*[-+][^ ]*-amd64)$/\2/p' |
    grep -vE -- '-(cloud|rt)-amd64$' | sort -uV
}
if [ "$ARG" = --list ]; then list; exit 0; fi
case "$ARG" in
  newest) KVER=$(list | tail -n1) ;;
  [0-9]*.[0-9]*-*|[0-9]*.[0-9]*+*) KVER=$ARG ;;
  [0-9]*.[0-9]*) KVER=$(list | awk -v s="$ARG" '{ split($0, v, /[.+-]/); if (v[1] "." v[2] == s) print }' | tail -n1) ;;
  *) echo "fetch-kernel: $ARG is neither a series (6.1), newest, nor a release" >&2; exit 2 ;;
esac
[ -n "$KVER" ] || { echo "fetch-kernel: no amd64 kernel of series $ARG in the suites" >&2; exit 3; }
find_img() { ls "$DEST/$KVER"/boot/vmlinuz-"$KVER" "$DEST/$KVER"/usr/lib/modules/"$KVER"/vmlinuz 2>/dev/null | head -n1 || true; }
img=$(find_img)
if [ -z "$img" ] || [ ! -e "$DEST/$KVER/.complete" ]; then
  D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
  cd "$D"
  # new (trixie-backports 6.16+) layout: image + modules in linux-binary-*/linux-modules-*
  if apt-cache "${O[@]}" show "linux-binary-$KVER" >/dev/null 2>&1; then
    apt-get "${O[@]}" -qq download "linux-binary-$KVER" "linux-modules-$KVER"
  else
    apt-get "${O[@]}" -qq download "linux-image-$KVER"
  fi
  rm -rf "${DEST:?}/$KVER"; mkdir -p "$DEST/$KVER"
  for d in ./*.deb; do dpkg-deb -x "$d" "$DEST/$KVER"; done
  mod=$(dirname "$(ls -d "$DEST/$KVER"/{,usr/}lib/modules/"$KVER"/kernel 2>/dev/null | head -n1 || true)")
  depmod -b "${mod%/lib/modules/$KVER}" "$KVER"
  touch "$DEST/$KVER/.complete"
  img=$(find_img)
fi
[ -n "$img" ] || { echo "fetch-kernel: no vmlinuz in the package of $KVER" >&2; exit 4; }
echo "$img"
