#!/bin/sh
# Installs the stampede-agent binary from a URL, only if its SHA-256 is the one given: a download that
# was cut short, or replaced on the way, is refused and nothing is installed. Written to each VPS by
# the cloud-init user-data (deploy/cloud-init/make-user-data.sh) and run once at first boot.
#
# Usage: install-agent.sh URL SHA256 [DEST]   (DEST: default /usr/local/bin/stampede-agent)
set -eu
[ $# -ge 2 ] || {
    echo "usage: install-agent.sh URL SHA256 [DEST]" >&2
    exit 2
}
url="$1" sha256="$2" dest="${3:-/usr/local/bin/stampede-agent}"
case "$sha256" in
    *[!0-9a-f]* | "") sha256=bad ;;
esac
[ ${#sha256} -eq 64 ] || {
    echo "install-agent.sh: '$2' is not a SHA-256 (64 lowercase hex digits)" >&2
    exit 2
}
tmp="$dest.download"
trap 'rm -f "$tmp"' EXIT
curl -fsSL --retry 5 --retry-connrefused -o "$tmp" "$url" || {
    echo "install-agent.sh: cannot download $url" >&2
    exit 1
}
echo "$sha256  $tmp" | sha256sum -c --status - || {
    echo "install-agent.sh: $url is not the binary expected: its SHA-256 is $(sha256sum "$tmp" | cut -d' ' -f1), not $sha256" >&2
    exit 1
}
chmod 0755 "$tmp"
mv -f "$tmp" "$dest"
echo "install-agent.sh: installed $dest ($sha256)"
