use super::*;
use crate::gate::tests::pki::Ca;
use crate::spec::egress::vault::{HostCert, SecretValue};

pub(crate) fn vault(ca: &Ca, host: &str, port: u16, roots: &str) -> Vault {
    let (cert_pem, key_pem) = ca.leaf(host);
    Vault {
        secrets: vec![SecretValue {
            name: "API_KEY".into(),
            host: host.into(),
            port,
            header: "Authorization".into(),
            placeholder: "sbx-ph-0123456789abcdef".into(),
            value: "real-value-s3cr3t".into(),
        }],
        certs: vec![HostCert { host: host.into(), cert_pem, key_pem }],
        roots_pem: roots.into(),
    }
}

#[test]
fn a_vault_is_checked_and_its_errors_never_hold_a_value() {
    let ca = Ca::new();
    let good = vault(&ca, "api.example", 443, &ca.pem());
    let armed = arm(good.clone()).unwrap();
    assert!(armed.servers.contains_key("api.example"));
    type Change = Box<dyn Fn(&mut Vault)>;
    let cases: Vec<(Change, &str)> = vec![
        (Box::new(|v| v.secrets[0].value = "a\r\nX-Evil: real-value".into()), "control"),
        (Box::new(|v| v.secrets[0].placeholder.clear()), "non-empty"),
        (Box::new(|v| v.secrets[0].header = "Bad Header".into()), "token"),
        (Box::new(|v| v.secrets[0].host = "API.example".into()), "canonical"),
        (Box::new(|v| v.secrets[0].header = "Content-Length".into()), "frames or routes"),
        (Box::new(|v| v.secrets[0].value = "xsbx-ph-0123456789abcdefx".into()), "overlap"),
        (Box::new(|v| v.certs[0].cert_pem = "real-value-s3cr3t".into()), "certificate"),
        (Box::new(|v| v.certs[0].key_pem = "real-value-s3cr3t".into()), "key"),
        (Box::new(|v| v.roots_pem = String::new()), "no root"),
        (Box::new(|v| v.certs.push(v.certs[0].clone())), "two certificates"),
    ];
    for (change, want) in cases {
        let mut v = good.clone();
        change(&mut v);
        let err = arm(v).err().unwrap_or_else(|| panic!("{want}: accepted"));
        assert!(err.contains(want), "{want}: {err}");
        assert!(!err.contains("real-value") && !err.contains("sbx-ph-"), "{err}");
    }
    let err = parse(br#"{"secrets": [{"name": 7, "value": "real-value-s3cr3t"}]}"#).unwrap_err();
    assert!(!err.contains("real-value"), "{err}");
}

#[tokio::test]
async fn a_push_over_the_socket_replaces_the_vault_and_bad_ones_keep_it() {
    let name = format!("sbx-test-vault-{}-{}", std::process::id(), rand::random::<u64>());
    let (tx, mut rx) = watch::channel(None);
    tokio::spawn(listen(bind(&name).unwrap(), tx));
    let ca = Ca::new();
    let json = serde_json::to_vec(&vault(&ca, "api.example", 443, &ca.pem())).unwrap();
    let push_blocking = |bytes: Vec<u8>| {
        let name = name.clone();
        tokio::task::spawn_blocking(move || push(&name, &mut bytes.as_slice()).unwrap())
    };
    assert_eq!(push_blocking(json.clone()).await.unwrap(), "ok");
    rx.changed().await.unwrap();
    let first = rx.borrow_and_update().clone().unwrap();
    assert_eq!(first.vault.secrets[0].value, "real-value-s3cr3t");
    let answer = push_blocking(b"{not json real-value".to_vec()).await.unwrap();
    assert!(answer.starts_with("error: ") && !answer.contains("real-value"), "{answer}");
    assert!(!rx.has_changed().unwrap());
    let big = vec![b' '; MAX_VAULT + 1];
    assert!(push_blocking(big).await.unwrap().starts_with("error: the vault is over"));
    // Rotation: a second good push replaces the whole vault.
    let mut v = vault(&ca, "api.example", 443, &ca.pem());
    v.secrets[0].value = "rotated-value".into();
    assert_eq!(push_blocking(serde_json::to_vec(&v).unwrap()).await.unwrap(), "ok");
    rx.changed().await.unwrap();
    assert_eq!(rx.borrow().as_ref().unwrap().vault.secrets[0].value, "rotated-value");
}

#[test]
fn nothing_listens_means_an_error_not_an_ok() {
    let name = format!("sbx-test-none-{}", rand::random::<u64>());
    assert!(push(&name, &mut &b"{}"[..]).is_err());
}
