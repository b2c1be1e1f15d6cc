#!/usr/bin/env bash
# Builds the local container images from this checkout, without pulling anything from a registry:
#
#   stampede-agent:dev   entrypoint /stampede-agent
#   stampede:dev         entrypoint /stampede (the coordinator, and the reference target `stampede serve`)
#
# Each image is `FROM scratch` holding one release binary, the shared libraries `ldd` names, the dynamic
# loader, and the few files glibc reads at run time (/etc/nsswitch.conf so getaddrinfo asks files then DNS,
# which is how Docker's embedded DNS resolves service names; /etc/passwd and /etc/group for uid 65534).
# Containers run as uid/gid 65534 (nobody).
#
# Idempotent: cargo and `docker build` only redo what changed. Exits non-zero with a message on failure.
#
# Usage: deploy/build-images.sh [--skip-cargo] [--with-probe]
#   --skip-cargo   use the binaries already in target/release (e.g. just built by the caller)
#   --with-probe   also build stampede-probe:dev, this host's `getent` in the same kind of image (entrypoint
#                  /getent): `getent ahosts agent` resolves a name exactly as the binaries do (getaddrinfo)
# Environment: CARGO (default cargo), DOCKER (default docker), CARGO_TARGET_DIR (default <repo>/target),
#   STAMPEDE_IMAGE_TAG (default dev).
set -euo pipefail

die() {
    echo "build-images.sh: $*" >&2
    exit 1
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo="${CARGO:-cargo}"
docker="${DOCKER:-docker}"
tag="${STAMPEDE_IMAGE_TAG:-dev}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
release="$target_dir/release"
stage="$target_dir/stampede-images"
uid=65534

skip_cargo=false
probe=false
for arg in "$@"; do
    case "$arg" in
        --skip-cargo) skip_cargo=true ;;
        --with-probe) probe=true ;;
        -h | --help)
            sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown argument '$arg' (try --help)" ;;
    esac
done

[ "$(uname -s)" = Linux ] || die "the scratch images copy this host's Linux binaries; on $(uname -s) use deploy/Dockerfile instead"
command -v ldd >/dev/null || die "ldd not found (it lists the shared libraries to copy into the images)"
command -v "$docker" >/dev/null || die "'$docker' not found: install Docker Engine"
"$docker" version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
    die "the Docker daemon does not answer ('$docker version' failed): start it or check your permissions"

if ! $skip_cargo; then
    echo "build-images.sh: cargo build --release --bins" >&2
    (cd "$root" && "$cargo" build --release --bins) || die "cargo build --release --bins failed"
fi

# Copies a file into the rootfs at the same absolute path, following symlinks (the rootfs holds real files).
put() {
    local src="$1" rootfs="$2"
    [ -e "$src" ] || die "missing $src"
    mkdir -p "$rootfs$(dirname "$src")"
    cp -L "$src" "$rootfs$src"
}

# Assembles target/stampede-images/<image>/ (a Dockerfile and rootfs/) for one executable, installed as /<bin>.
assemble() {
    local exe="$1" image="$2"
    local bin
    bin="$(basename "$exe")"
    [ -x "$exe" ] || die "$exe not found: build it with cargo build --release --bins (or drop --skip-cargo)"
    local dir="$stage/$image"
    local rootfs="$dir/rootfs"
    rm -rf "$dir"
    mkdir -p "$rootfs/etc" "$rootfs/tmp" "$dir/empty"
    chmod 1777 "$rootfs/tmp"

    # The binary without debug info (symbols stay for backtraces): images a fifth of the size.
    if command -v objcopy >/dev/null; then
        objcopy --strip-debug "$exe" "$rootfs/$bin" || die "objcopy --strip-debug $exe failed"
    else
        cp "$exe" "$rootfs/$bin"
    fi
    chmod 0755 "$rootfs/$bin"

    # Every library ldd resolves (`name => /path (addr)`) and the loader (`/path (addr)`).
    local libs
    libs="$(ldd "$exe")" || die "ldd $exe failed (is it a dynamically linked Linux binary?)"
    if grep -q 'not found' <<<"$libs"; then
        die "ldd cannot resolve every library of $exe:"$'\n'"$libs"
    fi
    local lib
    while read -r lib; do
        [ -n "$lib" ] && put "$lib" "$rootfs"
    done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$libs")
    # glibc's NSS: since 2.34 files and dns live in libc itself; older glibcs load them as modules.
    local nss
    for nss in libnss_files.so.2 libnss_dns.so.2 libresolv.so.2; do
        local found
        found="$(ldconfig -p 2>/dev/null | awk -v n="$nss" '$1 == n && /x86-64|x86_64|64bit/ && !f { print $NF; f = 1 }' || true)"
        [ -n "$found" ] && put "$found" "$rootfs"
    done

    cat >"$rootfs/etc/nsswitch.conf" <<'EOF'
hosts: files dns
networks: files
passwd: files
group: files
EOF
    printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:%s:%s:nobody:/:/sbin/nologin\n' "$uid" "$uid" >"$rootfs/etc/passwd"
    printf 'root:x:0:\nnogroup:x:%s:\n' "$uid" >"$rootfs/etc/group"
    # Docker bind-mounts /etc/hosts, /etc/hostname and /etc/resolv.conf over these at run time.
    : >"$rootfs/etc/hosts"
    : >"$rootfs/etc/resolv.conf"

    cat >"$dir/Dockerfile" <<EOF
# Generated by deploy/build-images.sh: a scratch image of one host-built binary and its libraries.
FROM scratch
COPY rootfs/ /
# /results (the coordinator's output; a named volume mounted here starts as a copy of it) owned by the run user.
COPY --chown=$uid:$uid empty/ /results/
USER $uid:$uid
ENV STAMPEDE_LOG=info
ENTRYPOINT ["/$bin"]
EOF
    echo "build-images.sh: docker build $image:$tag" >&2
    local log="$dir/docker-build.log" previous
    previous="$("$docker" image inspect --format '{{.Id}}' "$image:$tag" 2>/dev/null || true)"
    "$docker" build --quiet -t "$image:$tag" "$dir" >"$log" 2>&1 ||
        die "docker build of $image:$tag failed (context $dir):"$'\n'"$(cat "$log")"
    # The image must start: a missing library or loader shows up here, not in a cluster.
    "$docker" run --rm "$image:$tag" --version >/dev/null ||
        die "$image:$tag does not start (\`docker run --rm $image:$tag --version\` failed): a library is missing?"
    # The image this tag replaced, if nothing else uses it (repeated test runs would pile them up).
    if [ -n "$previous" ] && [ "$previous" != "$("$docker" image inspect --format '{{.Id}}' "$image:$tag")" ]; then
        "$docker" rmi "$previous" >/dev/null 2>&1 || true
    fi
    echo "build-images.sh: built $image:$tag ($("$docker" image inspect --format '{{.Size}}' "$image:$tag" | awk '{ printf "%.1f MB", $1 / 1e6 }'))" >&2
}

assemble "$release/stampede-agent" stampede-agent
assemble "$release/stampede" stampede
if $probe; then
    getent="$(command -v getent)" || die "--with-probe needs getent on this host"
    assemble "$getent" stampede-probe
fi
