use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls_pki_types::pem::PemObject;
use tokio_rustls::rustls;

use super::ca::Ca;
use super::*;

fn verifier(ca_pem: &str) -> Arc<rustls::client::WebPkiServerVerifier> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap()
}

fn verifies(v: &rustls::client::WebPkiServerVerifier, cert_pem: &str, host: &str) -> bool {
    let cert = CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
    let name = ServerName::try_from(host.to_string()).unwrap();
    v.verify_server_cert(&cert, &[], &name, &[], UnixTime::now()).is_ok()
}

/// A leaf verifies for its host against the CA's certificate, also when
/// signed later by the CA made again from what is kept; not for another name.
#[test]
fn leaves_verify_for_their_host_only() {
    let hosts = vec!["api.example.com".to_string(), "git.example.com".to_string()];
    let ca = Ca::make("sbx-0123456789ab", &hosts).unwrap();
    assert!(ca.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    let v = verifier(&ca.cert_pem);
    let leaves = ca.leaves().unwrap();
    assert_eq!(leaves.iter().map(|l| l.host.as_str()).collect::<Vec<_>>(), ["api.example.com", "git.example.com"]);
    assert!(verifies(&v, &leaves[0].cert_pem, "api.example.com"));
    assert!(!verifies(&v, &leaves[0].cert_pem, "git.example.com"));
    let kept: Ca = serde_json::from_str(&serde_json::to_string(&ca).unwrap()).unwrap();
    let again = kept.leaves().unwrap();
    assert!(verifies(&v, &again[1].cert_pem, "git.example.com"));
    assert_ne!(again[1].key_pem, leaves[1].key_pem);
}

/// The name constraints: the CA's key signs nothing a client would take
/// for another host.
#[test]
fn the_ca_signs_for_nothing_else() {
    let ca = Ca::make("sbx-0123456789ab", &["api.example.com".to_string()]).unwrap();
    let rogue = Ca { hosts: vec!["bank.example".into()], ..ca.clone() };
    let leaf = rogue.leaves().unwrap().remove(0);
    assert!(!verifies(&verifier(&ca.cert_pem), &leaf.cert_pem, "bank.example"));
}

#[test]
fn dates_are_the_civil_calendar() {
    assert_eq!(super::ca::ymd(0), (1970, 1, 1));
    assert_eq!(super::ca::ymd(19_782), (2024, 2, 29));
    assert_eq!(super::ca::ymd(20_789), (2026, 12, 2));
}

fn spec(secrets: &[&str]) -> EgressSpec {
    let allow: Vec<String> = vec!["a.example".into()];
    let mut e = EgressSpec::from_flags(&allow, None, None, None, false).unwrap().unwrap();
    let s = crate::spec::egress::parse_secrets(&secrets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    e.add_secrets(s, Some("sk-"), None).unwrap();
    e
}

#[test]
fn prepare_reads_values_and_makes_placeholders() {
    std::env::set_var("SBX_TEST_HOST_SECRET_A", "value-a");
    std::env::set_var("SBX_TEST_HOST_SECRET_B", "value-b");
    let e = spec(&["A@a.example=env:SBX_TEST_HOST_SECRET_A", "B@a.example/X-Key=env:SBX_TEST_HOST_SECRET_B"]);
    let mut warnings = Vec::new();
    let kept = prepare("sbx-0123456789ab", &e, &mut warnings).unwrap().unwrap();
    let (a, b) = (&kept.secrets[0], &kept.secrets[1]);
    assert_eq!((a.value.as_str(), b.value.as_str(), b.header.as_str()), ("value-a", "value-b", "X-Key"));
    for p in [&a.placeholder, &b.placeholder] {
        assert!(p.starts_with("sk-") && p.len() == 3 + PLACEHOLDER_CHARS, "{p}");
        assert!(p[3..].bytes().all(|c| c.is_ascii_alphanumeric()));
    }
    assert_ne!(a.placeholder, b.placeholder);
    let env = kept.env();
    assert!(env.contains(&("A".into(), a.placeholder.clone())));
    assert!(env.contains(&("SSL_CERT_FILE".into(), BUNDLE_PATH.into())));
    assert!(!format!("{env:?}{kept:?}").contains("value-"));
    assert!(kept.bundle().ends_with(&kept.ca.cert_pem) && !kept.bundle().contains("PRIVATE KEY"));
    let vault = kept.vault().unwrap();
    assert_eq!((vault.secrets.len(), vault.certs.len()), (2, 1));
    let unset = spec(&["A@a.example=env:SBX_TEST_HOST_SECRET_UNSET"]);
    let err = prepare("sbx-0123456789ab", &unset, &mut warnings).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    let none = EgressSpec::from_flags(&["a.example".into()], None, None, None, false).unwrap().unwrap();
    assert!(prepare("sbx-0123456789ab", &none, &mut warnings).unwrap().is_none());
}

#[test]
fn kept_files_are_private_and_removed() {
    use std::os::unix::fs::PermissionsExt;
    std::env::set_var("SBX_TEST_HOST_SECRET_C", "value-c");
    let data = std::env::temp_dir().join(format!("sbx-secrets-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&data).unwrap();
    let id = "sbx-0123456789ab";
    let kept = prepare(id, &spec(&["C@a.example=env:SBX_TEST_HOST_SECRET_C"]), &mut Vec::new()).unwrap().unwrap();
    let b = write(&data, id, &kept).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data.join("secrets")), 0o700);
    assert_eq!(mode(&data.join("secrets").join(format!("{id}.json"))), 0o600);
    assert_eq!(mode(&b.join(BUNDLE_FILE)), 0o644);
    assert!(!std::fs::read_to_string(b.join(BUNDLE_FILE)).unwrap().contains("value-c"));
    let set = set_value(&data, id, "C", "value-d".into()).unwrap();
    assert_eq!(set.secrets[0].value, "value-d");
    assert_eq!(load(&data, id).unwrap().unwrap().secrets[0].placeholder, kept.secrets[0].placeholder);
    let e = set_value(&data, id, "NOPE", "x".into()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let other = "sbx-ba9876543210";
    write(&data, other, &kept).unwrap();
    assert_eq!(remove_all_but(&data, &|i| i == other).unwrap(), [id]);
    assert!(load(&data, id).unwrap().is_none() && !b.exists());
    remove(&data, other).unwrap();
    remove(&data, other).unwrap();
    assert!(load(&data, other).unwrap().is_none());
    std::fs::remove_dir_all(&data).unwrap();
}
