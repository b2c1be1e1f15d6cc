#!/usr/bin/env python3
"""The exact command line a deployment artifact starts, for deploy/check.sh's exact-arguments check.

  exec_args.py unit UNIT ROOT CREDS   a systemd unit's ExecStart= as systemd would run it: its Environment=
                                      and EnvironmentFile= (read under ROOT) expanded, each LoadCredential=
                                      copied from under ROOT into CREDS (which ${CREDENTIALS_DIRECTORY} names)
  exec_args.py pod YAML KIND NAME     the command + args of the first container of the KIND called NAME in
                                      a multi-document YAML (a rendered kustomization): $(VAR) expanded from
                                      the container's literal env, as the kubelet does
  exec_args.py pod-files YAML KIND NAME SECRETS ROOT   the Secret volumes of that container, written
                                      under ROOT at their mount paths, from the Secret manifests in
                                      SECRETS (stringData or data), as the kubelet mounts them
  exec_args.py syscalls UNIT GROUPS TRACE...   the system calls in strace -f logs TRACE that the
                                      unit's SystemCallFilter= refuses (GROUPS: `systemd-analyze
                                      syscall-filter`'s output, which defines the @groups), one a line
  exec_args.py cloud-init-files USER_DATA ROOT   every write_files entry written under ROOT, with
                                      its permissions, as cloud-init writes them

Prints the words NUL-separated (or the file's content), so that no word is split again by a shell. Any
syntax this does not model (systemd specifiers, an env var from a Secret in a word) is an error: the
check must run what the artifact runs, or say it cannot.
"""
import re
import shlex
import shutil
import sys
from pathlib import Path


def die(msg):
    print(f"exec_args.py: {msg}", file=sys.stderr)
    sys.exit(1)


def unit_entries(text):
    """(section, key, value) in order, continuation lines joined as systemd joins them."""
    section, out, pending = None, [], ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, sep, value = line.partition("=")
        if not sep:
            die(f"not KEY=value: {line!r}")
        out.append((section, key.strip(), value.strip()))
    return out


def assignments(words):
    env = {}
    for w in words:
        k, sep, v = w.partition("=")
        if not sep:
            die(f"Environment word without '=': {w!r}")
        env[k] = v
    return env


def env_file(path):
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        k, sep, v = line.partition("=")
        if not sep:
            die(f"{path}: not KEY=value: {line!r}")
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        env[k.strip()] = v
    return env


def expand_unit_word(word, env):
    if re.search(r"%[^%]", word):
        die(f"systemd specifier in {word!r}: not modelled")
    word = word.replace("%%", "%")
    # "$VAR" alone splits on whitespace; "${VAR}" is one word (systemd.service(5), Command lines).
    m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
    if m:
        return env.get(m.group(1), "").split()
    return [re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda g: env.get(g.group(1), ""), word)]


def unit(unit_path, root, creds):
    entries = [(k, v) for s, k, v in unit_entries(Path(unit_path).read_text()) if s == "Service"]
    env, starts = {"CREDENTIALS_DIRECTORY": str(creds)}, []
    for key, value in entries:
        if key == "Environment":
            env.update(assignments(shlex.split(value)))
        elif key == "EnvironmentFile":
            optional = value.startswith("-")
            path = Path(str(root) + value.lstrip("-"))
            if path.exists():
                env.update(env_file(path))
            elif not optional:
                die(f"EnvironmentFile {value} is missing (looked under {root})")
        elif key == "LoadCredential":
            name, _, src = value.partition(":")
            path = Path(str(root) + src)
            if not path.is_file():
                die(f"LoadCredential {name}: {src} is missing (looked under {root})")
            Path(creds).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(creds) / name)
        elif key == "ExecStart":
            starts.append(value)
    if len(starts) != 1:
        die(f"{unit_path}: {len(starts)} ExecStart= lines, expected one")
    start = starts[0].lstrip("@-:+!")
    words = []
    for w in shlex.split(start):
        words.extend(expand_unit_word(w, env))
    return words


def pod_spec(yaml_path, kind, name):
    import yaml

    for doc in yaml.safe_load_all(Path(yaml_path).read_text()):
        if doc and doc.get("kind") == kind and doc.get("metadata", {}).get("name") == name:
            return doc["spec"]["template"]["spec"]
    die(f"no {kind}/{name} in {yaml_path}")


def pod(yaml_path, kind, name):
    spec = pod_spec(yaml_path, kind, name)
    c = spec["containers"][0]
    env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
    # Without a command, the image's entrypoint: /NAME in both of stampede's images (deploy/Dockerfile).
    image = c["image"].rsplit("/", 1)[-1].split(":")[0].split("@")[0]
    words = list(c.get("command", [f"/{image}"])) + list(c.get("args", []))

    def sub(m):
        if m.group(1) not in env:
            die(f"$({m.group(1)}) in {kind}/{name} has no literal value")
        return env[m.group(1)]

    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, str(w)) for w in words]


def pod_files(yaml_path, kind, name, secrets_path, root):
    import base64

    import yaml

    secrets = {}
    for doc in yaml.safe_load_all(Path(secrets_path).read_text()):
        if doc and doc.get("kind") == "Secret":
            data = {k: base64.b64decode(v) for k, v in (doc.get("data") or {}).items()}
            data.update({k: v.encode() for k, v in (doc.get("stringData") or {}).items()})
            secrets[doc["metadata"]["name"]] = data
    spec = pod_spec(yaml_path, kind, name)
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in spec["containers"][0].get("volumeMounts", []):
        secret = volumes.get(m["name"], {}).get("secret")
        if secret is None:
            continue
        if secret["secretName"] not in secrets:
            die(f"{kind}/{name} mounts Secret {secret['secretName']}, which {secrets_path} does not make")
        data = secrets[secret["secretName"]]
        items = secret.get("items") or [{"key": k, "path": k} for k in data]
        for item in items:
            if item["key"] not in data:
                die(f"Secret {secret['secretName']} has no key {item['key']}")
            dest = Path(str(root) + m["mountPath"]) / item["path"]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data[item["key"]])


def syscall_groups(path):
    groups, current = {}, None
    for line in Path(path).read_text().splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.strip(), [])
        elif line.startswith("    ") and current is not None and not line.strip().startswith("#"):
            current.append(line.strip())
    return groups


def syscall_filter(unit_path, groups):
    """The set a unit's SystemCallFilter= lines allow, in order: the first decides allow- or deny-list,
    later ones add (or, with ~, remove) calls, as systemd.exec(5) says."""

    def expand(name):
        if not name.startswith("@"):
            return {name}
        if name not in groups:
            die(f"{unit_path}: unknown system call group {name}")
        return set().union(*(expand(n) for n in groups[name]))

    allowed = None
    for section, key, value in unit_entries(Path(unit_path).read_text()):
        if section != "Service" or key != "SystemCallFilter":
            continue
        deny = value.startswith("~")
        names = set().union(*(expand(n) for n in value.lstrip("~").split()))
        if allowed is None:
            if deny:
                die(f"{unit_path}: a deny-list SystemCallFilter= first is not modelled")
            allowed = names
        elif deny:
            allowed -= names
        else:
            allowed |= names
    if allowed is None:
        die(f"{unit_path} has no SystemCallFilter=")
    return allowed


def refused_syscalls(unit_path, groups_path, traces):
    allowed = syscall_filter(unit_path, syscall_groups(groups_path))
    used = set()
    for trace in traces:
        for line in Path(trace).read_text().splitlines():
            m = re.match(r"(?:\[pid +\d+\] |\d+ +)?([a-z_0-9]+)\(", line)
            if m:
                used.add(m.group(1))
    if not used:
        die(f"no system call in {' '.join(traces)}")
    return sorted(used - allowed), len(used)


def cloud_init_files(user_data, root):
    import yaml

    text = Path(user_data).read_text()
    if not text.startswith("#cloud-config"):
        die(f"{user_data} does not start with #cloud-config")
    for f in yaml.safe_load(text).get("write_files", []):
        if f.get("encoding") not in (None, "text/plain"):
            die(f"{f['path']}: encoding {f['encoding']} is not modelled")
        dest = Path(str(root) + f["path"])
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(f.get("content", ""))
        dest.chmod(int(f.get("permissions", "0644"), 8))


def main(argv):
    if len(argv) >= 5 and argv[1] == "syscalls":
        refused, used = refused_syscalls(argv[2], argv[3], argv[4:])
        print("\n".join(refused) if refused else used)
        sys.exit(1 if refused else 0)
    if len(argv) == 4 and argv[1] == "cloud-init-files":
        cloud_init_files(argv[2], Path(argv[3]))
        return
    if len(argv) == 5 and argv[1] == "unit":
        words = unit(argv[2], Path(argv[3]), Path(argv[4]))
    elif len(argv) == 5 and argv[1] == "pod":
        words = pod(argv[2], argv[3], argv[4])
    elif len(argv) == 7 and argv[1] == "pod-files":
        pod_files(argv[2], argv[3], argv[4], argv[5], Path(argv[6]))
        return
    else:
        die(__doc__.strip().splitlines()[2].strip() + " ... (see the top of this file)")
    sys.stdout.write("\0".join(words) + "\0")


if __name__ == "__main__":
    main(sys.argv)
