#!/usr/bin/env bash
# Writes the cloud-init user-data of one agent VPS to stdout: the agent unit and the sysctl drop-in of
# deploy/ as they are, this host's certificate and key, the fleet's CA and token as the unit's
# credentials, and a first-boot command that fetches the binary, checks its SHA-256 and enables the unit.
#
# Usage: deploy/cloud-init/make-user-data.sh --pki DIR --agent NAME --token-file FILE --url URL --sha256 HEX \
#            [--join HOST:PORT] [--env FILE] > user-data-NAME.yaml
#   --pki, --agent   a directory from `stampede certs init DIR --agent NAME ...`, and this host's NAME
#   --token-file     the fleet's token (the coordinator's --token-file)
#   --url, --sha256  where the VPS downloads stampede-agent from, and that file's SHA-256
#   --join           the coordinator to dial (the NAT unit, stampede-agent-join.service) instead of listening
#   --env            KEY=value lines for /etc/stampede/agent.env (the unit's Environment= overrides, e.g.
#                    STAMPEDE_ALLOW_TARGET=10.1.0.0/16)
# The output holds a private key: give it to the VPS's user-data and do not keep it in a repository.
set -euo pipefail

die() {
    echo "make-user-data.sh: $*" >&2
    exit 2
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deploy="$(dirname "$here")"
pki='' agent='' token_file='' url='' sha256='' join='' env_file=''
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "$1 needs a value (try --help)"
    case "$1" in
        --pki) pki="$2" ;;
        --agent) agent="$2" ;;
        --token-file) token_file="$2" ;;
        --url) url="$2" ;;
        --sha256) sha256="$2" ;;
        --join) join="$2" ;;
        --env) env_file="$2" ;;
        *) die "unknown argument '$1'" ;;
    esac
    shift 2
done
for flag in pki agent token_file url sha256; do
    [ -n "${!flag}" ] || die "--${flag//_/-} is required"
done
# The URL goes into a double-quoted YAML string: nothing that could end it.
[[ "$url" =~ ^(https?|file)://[^[:space:]\"\\]+$ ]] || die "--url '$url' is not an http(s) URL without spaces, quotes or backslashes"
[[ "$sha256" =~ ^[0-9a-f]{64}$ ]] || die "--sha256 '$sha256' is not 64 lowercase hex digits (sha256sum prints it)"
for f in "$pki/ca.crt" "$pki/agent-$agent.crt" "$pki/agent-$agent.key" "$token_file" ${env_file:+"$env_file"}; do
    [ -r "$f" ] || die "cannot read $f (make the certificates with: stampede certs init $pki --agent $agent)"
done
[ -s "$token_file" ] || die "the token file $token_file is empty"

unit=stampede-agent.service
[ -n "$join" ] && unit=stampede-agent-join.service

# One write_files entry, the file's text as a literal block.
file() {
    local path="$1" mode="$2" src="$3"
    printf '  - path: %s\n    owner: root:root\n    permissions: "%s"\n    content: |\n' "$path" "$mode"
    # awk ends every line, the last one too, so the next entry starts on a line of its own.
    awk '{ print "      " $0 }' "$src"
}

env_text() {
    [ -n "$env_file" ] && cat "$env_file"
    [ -n "$join" ] && printf 'STAMPEDE_COORDINATOR=%s\n' "$join"
    return 0
}

echo "#cloud-config"
echo "# stampede agent $agent: made by deploy/cloud-init/make-user-data.sh (holds its private key)."
echo "write_files:"
file /etc/stampede/token 0600 "$token_file"
file /etc/stampede/agent.crt 0644 "$pki/agent-$agent.crt"
file /etc/stampede/agent.key 0600 "$pki/agent-$agent.key"
file /etc/stampede/ca.crt 0644 "$pki/ca.crt"
if [ -n "$env_file$join" ]; then
    file /etc/stampede/agent.env 0644 <(env_text)
fi
file "/etc/systemd/system/$unit" 0644 "$deploy/$unit"
file /etc/sysctl.d/90-stampede-agent.conf 0644 "$deploy/sysctl/90-stampede-agent.conf"
file /usr/local/lib/stampede/install-agent.sh 0755 "$here/install-agent.sh"
cat <<YAML
runcmd:
  - [sysctl, --system]
  - [/usr/local/lib/stampede/install-agent.sh, "$url", "$sha256"]
  - [systemctl, daemon-reload]
  - [systemctl, enable, --now, $unit]
YAML
