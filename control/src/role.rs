//! The role a fleet certificate says it is for: a SAN URI `stampede:role:coordinator`, `…:agent` or
//! `…:monitor`, which `stampede certs` writes. Every certificate of the fleet carries both serverAuth
//! and clientAuth (a coordinator dials agents and serves joins; an agent listens or joins), so the
//! extended key usage cannot tell them apart: the role marker does. A listener reads it from the
//! peer's certificate after the handshake has verified it against the CA, so only the CA's owner
//! chooses what it says.

/// Who a certificate was issued to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CertRole {
    Coordinator,
    Agent,
    Monitor,
}

/// The SAN URI scheme and prefix of a role marker.
pub const MARKER: &str = "stampede:role:";

impl CertRole {
    pub const ALL: [CertRole; 3] = [CertRole::Coordinator, CertRole::Agent, CertRole::Monitor];

    pub fn name(self) -> &'static str {
        match self {
            CertRole::Coordinator => "coordinator",
            CertRole::Agent => "agent",
            CertRole::Monitor => "monitor",
        }
    }

    /// The SAN URI that marks a certificate as this role's.
    pub fn uri(self) -> String {
        format!("{MARKER}{}", self.name())
    }

    pub fn parse(name: &str) -> Option<CertRole> {
        CertRole::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// The roles a DER certificate's SAN URIs name; none for a certificate without a marker (one made
/// before roles, or by another tool). `None` when the DER cannot be walked (never for a certificate
/// rustls has verified).
pub fn of_certificate(der: &[u8]) -> Option<Vec<CertRole>> {
    let mut uris = Vec::new();
    for uri in san_uris(der)? {
        if let Some(role) = std::str::from_utf8(uri)
            .ok()
            .and_then(|u| u.strip_prefix(MARKER))
            .and_then(CertRole::parse)
        {
            uris.push(role);
        }
    }
    Some(uris)
}

/// One DER element off the front of `input`: its tag and contents.
fn element<'a>(input: &mut &'a [u8]) -> Option<(u8, &'a [u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, after) = rest.split_at(n);
        rest = after;
        bytes.iter().fold(0usize, |l, b| (l << 8) | usize::from(*b))
    };
    if rest.len() < len {
        return None;
    }
    let (value, after) = rest.split_at(len);
    *input = after;
    Some((tag, value))
}

const SEQUENCE: u8 = 0x30;
/// `[3] EXPLICIT Extensions` in a TBSCertificate.
const EXTENSIONS: u8 = 0xa3;
const OID: u8 = 0x06;
const BOOLEAN: u8 = 0x01;
const OCTET_STRING: u8 = 0x04;
/// id-ce-subjectAltName, 2.5.29.17.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
/// `[6] IMPLICIT IA5String`: a GeneralName's uniformResourceIdentifier.
const URI: u8 = 0x86;

/// The uniformResourceIdentifier entries of a certificate's subjectAltName extension.
fn san_uris(der: &[u8]) -> Option<Vec<&[u8]>> {
    let mut input = der;
    let (SEQUENCE, mut cert) = element(&mut input)? else {
        return None;
    };
    let (SEQUENCE, mut tbs) = element(&mut cert)? else {
        return None;
    };
    let mut uris = Vec::new();
    while !tbs.is_empty() {
        let (tag, mut value) = element(&mut tbs)?;
        if tag != EXTENSIONS {
            continue;
        }
        let (SEQUENCE, mut extensions) = element(&mut value)? else {
            return None;
        };
        while !extensions.is_empty() {
            let (SEQUENCE, mut ext) = element(&mut extensions)? else {
                return None;
            };
            let (OID, oid) = element(&mut ext)? else {
                return None;
            };
            if oid != SUBJECT_ALT_NAME {
                continue;
            }
            let (mut tag, mut value) = element(&mut ext)?;
            if tag == BOOLEAN {
                (tag, value) = element(&mut ext)?;
            }
            if tag != OCTET_STRING {
                return None;
            }
            let (SEQUENCE, mut names) = element(&mut value)? else {
                return None;
            };
            while !names.is_empty() {
                let (tag, name) = element(&mut names)?;
                if tag == URI {
                    uris.push(name);
                }
            }
        }
    }
    Some(uris)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(uris: &[&str]) -> Vec<u8> {
        let mut p = rcgen::CertificateParams::new(vec!["host.internal".to_string()]).unwrap();
        for u in uris {
            p.subject_alt_names
                .push(rcgen::SanType::URI(u.to_string().try_into().unwrap()));
        }
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_role_marker_is_read_from_the_certificates_san_uris() {
        let der = certificate(&["https://elsewhere.example/", "stampede:role:coordinator"]);
        assert_eq!(of_certificate(&der), Some(vec![CertRole::Coordinator]));
        let der = certificate(&["stampede:role:monitor"]);
        assert_eq!(of_certificate(&der), Some(vec![CertRole::Monitor]));
    }

    #[test]
    fn a_certificate_without_a_marker_or_with_an_unknown_role_says_none() {
        assert_eq!(of_certificate(&certificate(&[])), Some(vec![]));
        let der = certificate(&["stampede:role:admin", "stampede:rolex:agent"]);
        assert_eq!(of_certificate(&der), Some(vec![]));
    }

    #[test]
    fn bytes_that_are_not_a_certificate_are_not_read() {
        assert_eq!(of_certificate(&[]), None);
        assert_eq!(of_certificate(&[0x30, 0x82, 0xff]), None);
        let der = certificate(&["stampede:role:agent"]);
        assert_eq!(of_certificate(&der[..der.len() / 2]), None);
    }
}
