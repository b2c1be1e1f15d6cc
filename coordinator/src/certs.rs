//! `stampede certs`: a private CA and certificates for the control channel's mutual TLS, so a fleet can
//! be secured without any other tool. Keys are written readable by their owner only.
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use control::role::CertRole;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{0} already holds a CA; use another directory, or `stampede certs issue` to add certificates"
    )]
    Exists(PathBuf),
    #[error("certificate error: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("bad name '{0}': use a host name or an IP address")]
    Name(String),
    #[error(
        "--kubernetes takes exactly one --agent, the name the coordinator dials the agents' Service by \
         (e.g. --agent stampede-agent); got {0}"
    )]
    KubernetesAgents(usize),
}

/// Each CA gets its own name, so a certificate from another fleet's CA is refused as an unknown issuer
/// rather than as a bad signature.
fn ca_params(name: &str, days: i64) -> Result<CertificateParams, CertsError> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::days(1);
    p.not_after = now + time::Duration::days(days);
    Ok(p)
}

fn write(path: &Path, text: &str, private: bool) -> Result<(), CertsError> {
    let err = |source| CertsError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    if private {
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)
}

/// What a leaf certificate is: who it names, and the role it is for.
struct Leaf<'a> {
    file: &'a str,
    name: &'a str,
    role: CertRole,
}

/// Issues a certificate for `name` (SAN; an IP address becomes an IP SAN) usable as client and
/// server (every role both dials and listens), marked with its role (the SAN URI
/// `stampede:role:ROLE` and the OU): the listeners admit a peer by that marker.
fn issue(
    dir: &Path,
    leaf: &Leaf<'_>,
    issuer: &Issuer<'_, KeyPair>,
    days: i64,
    backdate_days: i64,
) -> Result<(), CertsError> {
    let Leaf { file, name, role } = *leaf;
    if name.is_empty() || name.contains(['/', ' ']) {
        return Err(CertsError::Name(name.to_string()));
    }
    let mut p = CertificateParams::new(vec![name.to_string()])?;
    let uri = role.uri().try_into()?;
    p.subject_alt_names.push(SanType::URI(uri));
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn.push(
        DnType::OrganizationalUnitName,
        format!("stampede {}", role.name()),
    );
    p.distinguished_name = dn;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let now = time::OffsetDateTime::now_utc() - time::Duration::days(backdate_days);
    p.not_before = now - time::Duration::days(1);
    p.not_after = now + time::Duration::days(days);
    let key = KeyPair::generate()?;
    let cert = p.signed_by(&key, issuer)?;
    write(&dir.join(format!("{file}.crt")), &cert.pem(), false)?;
    write(&dir.join(format!("{file}.key")), &key.serialize_pem(), true)
}

/// Who `stampede certs init` issues certificates to, besides the CA.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    pub coordinator: String,
    pub agents: Vec<String>,
    pub monitors: Vec<String>,
}

/// `stampede certs init DIR`: a new CA, a coordinator certificate and one per agent and monitor.
pub fn init(dir: &Path, fleet: &Fleet, days: i64) -> Result<Vec<PathBuf>, CertsError> {
    fs::create_dir_all(dir).map_err(|source| CertsError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    if dir.join("ca.key").exists() {
        return Err(CertsError::Exists(dir.to_path_buf()));
    }
    let ca_key = KeyPair::generate()?;
    let unique = &ca_key.public_key_raw()[..6];
    let name = format!(
        "stampede control CA {}",
        unique
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let params = ca_params(&name, days.max(1) * 10)?;
    let ca = params.self_signed(&ca_key)?;
    write(&dir.join("ca.crt"), &ca.pem(), false)?;
    write(&dir.join("ca.name"), &name, false)?;
    write(&dir.join("ca.key"), &ca_key.serialize_pem(), true)?;
    let issuer = Issuer::new(params, ca_key);
    let mut leaves = vec![(
        "coordinator".to_string(),
        fleet.coordinator.as_str(),
        CertRole::Coordinator,
    )];
    for (names, role) in [
        (&fleet.agents, CertRole::Agent),
        (&fleet.monitors, CertRole::Monitor),
    ] {
        leaves.extend(
            names
                .iter()
                .map(|n| (default_file(n, role), n.as_str(), role)),
        );
    }
    let mut files = vec![dir.join("ca.crt")];
    for (file, name, role) in &leaves {
        let leaf = Leaf {
            file,
            name,
            role: *role,
        };
        issue(dir, &leaf, &issuer, days, 0)?;
        files.push(dir.join(format!("{file}.crt")));
    }
    Ok(files)
}

/// Where a certificate for `name` in `role` is written without --file: agent-NAME, monitor-NAME,
/// coordinator-NAME.
pub fn default_file(name: &str, role: CertRole) -> String {
    format!("{}-{name}", role.name())
}

/// The Secrets deploy/kubernetes mounts: the agents' and the coordinator's certificate, key and CA.
pub const AGENT_SECRET: &str = "stampede-agent-tls";
pub const COORDINATOR_SECRET: &str = "stampede-coordinator-tls";

/// `stampede certs init DIR --agent NAME --kubernetes`: `init`, and its certificates as the Secret
/// manifests deploy/kubernetes mounts (`kubernetes.io/tls`, with `ca.crt`; `stringData`, so the PEM is
/// as written, no base64 to make by hand). One agent certificate for every replica: the coordinator
/// dials them all by the Service's name. The CA's key stays in DIR, out of the cluster.
pub fn init_for_kubernetes(
    dir: &Path,
    fleet: &Fleet,
    days: i64,
) -> Result<(Vec<PathBuf>, String), CertsError> {
    let [agent] = fleet.agents.as_slice() else {
        return Err(CertsError::KubernetesAgents(fleet.agents.len()));
    };
    let files = init(dir, fleet, days)?;
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read_to_string(&path).map_err(|source| CertsError::Read { path, source })
    };
    let ca = read("ca.crt")?;
    let mut yaml = String::new();
    for (secret, component, file) in [
        (AGENT_SECRET, "agent", format!("agent-{agent}")),
        (COORDINATOR_SECRET, "coordinator", "coordinator".to_string()),
    ] {
        let cert = read(&format!("{file}.crt"))?;
        let key = read(&format!("{file}.key"))?;
        yaml.push_str(&secret_manifest(secret, component, &cert, &key, &ca));
    }
    Ok((files, yaml))
}

/// One `kubernetes.io/tls` Secret, its PEM texts as YAML literal blocks.
fn secret_manifest(name: &str, component: &str, cert: &str, key: &str, ca: &str) -> String {
    let block = |pem: &str| -> String {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  labels:\n    \
         app.kubernetes.io/name: stampede\n    app.kubernetes.io/component: {component}\n\
         type: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}  ca.crt: |\n{}",
        block(cert),
        block(key),
        block(ca)
    )
}

/// `stampede certs issue DIR NAME --role ROLE`: one more certificate from DIR's CA. `backdate_days`
/// (hidden) moves its validity into the past, to test that expired certificates are refused.
pub fn issue_more(
    dir: &Path,
    name: &str,
    file: &str,
    role: CertRole,
    days: i64,
    backdate_days: i64,
) -> Result<PathBuf, CertsError> {
    let key_path = dir.join("ca.key");
    let pem = fs::read_to_string(&key_path).map_err(|source| CertsError::Read {
        path: key_path,
        source,
    })?;
    let ca_key = KeyPair::from_pem(&pem)?;
    let name_path = dir.join("ca.name");
    let ca_name = fs::read_to_string(&name_path).map_err(|source| CertsError::Read {
        path: name_path,
        source,
    })?;
    // The issuer is identified by its name and key, both of which are the CA's.
    let issuer = Issuer::new(ca_params(ca_name.trim(), days)?, ca_key);
    issue(
        dir,
        &Leaf { file, name, role },
        &issuer,
        days,
        backdate_days,
    )?;
    Ok(dir.join(format!("{file}.crt")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn init_writes_a_ca_and_private_keys() {
        let dir = tempfile::tempdir().unwrap();
        let fleet = Fleet {
            coordinator: "coord".into(),
            agents: vec!["127.0.0.1".into(), "agent-a.internal".into()],
            monitors: Vec::new(),
        };
        let files = init(dir.path(), &fleet, 30).unwrap();
        assert_eq!(files.len(), 4);
        for key in [
            "ca.key",
            "coordinator.key",
            "agent-127.0.0.1.key",
            "agent-agent-a.internal.key",
        ] {
            let mode = fs::metadata(dir.path().join(key))
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, 0o600, "{key}");
        }
        assert!(
            fs::read_to_string(dir.path().join("ca.crt"))
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert!(matches!(
            init(dir.path(), &Fleet::default(), 30),
            Err(CertsError::Exists(_))
        ));
        issue_more(dir.path(), "late", "late", CertRole::Agent, 1, 0).unwrap();
        assert!(dir.path().join("late.key").exists());
    }

    #[test]
    fn kubernetes_secrets_hold_the_files_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let fleet = Fleet {
            coordinator: "coord".into(),
            agents: vec!["stampede-agent".into()],
            monitors: Vec::new(),
        };
        let (files, yaml) = init_for_kubernetes(dir.path(), &fleet, 30).unwrap();
        assert_eq!(files.len(), 3);
        // Documents start at a line of just `---` (a PEM's `-----END ...-----` line is not one).
        let docs: Vec<&str> = yaml
            .strip_prefix("---\n")
            .unwrap()
            .split("\n---\n")
            .collect();
        assert_eq!(docs.len(), 2);
        for (doc, file) in docs.iter().zip(["agent-stampede-agent", "coordinator"]) {
            assert!(doc.contains("type: kubernetes.io/tls\n"), "{doc}");
            // Each PEM comes back whole from its literal block, as a YAML reader would take it.
            for (key, name) in [
                ("tls.crt", format!("{file}.crt")),
                ("tls.key", format!("{file}.key")),
                ("ca.crt", "ca.crt".into()),
            ] {
                let written = fs::read_to_string(dir.path().join(name)).unwrap();
                let start = doc.find(&format!("  {key}: |\n")).unwrap() + key.len() + 6;
                let block: String = doc[start..]
                    .lines()
                    .take_while(|l| l.starts_with("    "))
                    .map(|l| format!("{}\n", &l[4..]))
                    .collect();
                assert_eq!(block, written, "{key} of {file}");
            }
        }
        assert!(docs[0].contains("name: stampede-agent-tls\n"));
        assert!(docs[1].contains("name: stampede-coordinator-tls\n"));
        assert!(!yaml.contains("PRIVATE KEY-----\n    -----BEGIN") && !yaml.contains("ca.key"));
    }

    #[test]
    fn kubernetes_secrets_take_one_agent_name_and_write_nothing_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let two = Fleet {
            agents: vec!["a".into(), "b".into()],
            ..Fleet::default()
        };
        let e = init_for_kubernetes(dir.path(), &two, 30).unwrap_err();
        assert!(matches!(e, CertsError::KubernetesAgents(2)), "{e}");
        assert!(!dir.path().join("ca.key").exists());
        let e = init_for_kubernetes(dir.path(), &Fleet::default(), 30).unwrap_err();
        assert!(e.to_string().contains("exactly one --agent"), "{e}");
    }

    /// The role marker of a certificate file `stampede certs` wrote.
    fn roles(path: &Path) -> Vec<CertRole> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let der = CertificateDer::from_pem_file(path).unwrap();
        control::role::of_certificate(&der).unwrap()
    }

    #[test]
    fn certificates_had_no_role_so_an_agents_passed_as_a_coordinators() {
        let dir = tempfile::tempdir().unwrap();
        let fleet = Fleet {
            coordinator: "coord".into(),
            agents: vec!["a".into()],
            monitors: vec!["m".into()],
        };
        let files = init(dir.path(), &fleet, 30).unwrap();
        assert_eq!(files.len(), 4, "{files:?}");
        let role = |file: &str| roles(&dir.path().join(file));
        assert_eq!(role("coordinator.crt"), vec![CertRole::Coordinator]);
        assert_eq!(role("agent-a.crt"), vec![CertRole::Agent]);
        assert_eq!(role("monitor-m.crt"), vec![CertRole::Monitor]);
        let more = issue_more(dir.path(), "c2", "c2", CertRole::Coordinator, 1, 0).unwrap();
        assert_eq!(roles(&more), vec![CertRole::Coordinator]);
        assert_eq!(default_file("web1", CertRole::Monitor), "monitor-web1");
    }
}
