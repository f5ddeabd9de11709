//! A sandbox's own CA: name-constrained to the hosts its gate terminates
//! (a leaked key then signs for nothing else), valid for ten years (the
//! sandbox trusts it for its whole life), its key kept only in the data
//! dir's 0600 copy; and the short-lived leaf certificates the gate shows,
//! signed again at every push.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa,
    KeyPair, KeyUsagePurpose, NameConstraints, SerialNumber,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::egress::vault::HostCert;

const CA_DAYS: i64 = 3650;
/// A leaf lives a month; every push (create, start, `sbx secret set`) renews it.
const LEAF_DAYS: i64 = 30;

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ca {
    pub id: String,
    /// The names it may sign for (its name constraints).
    pub hosts: Vec<String>,
    /// Days since the epoch: its validity, so the same issuer can be made again.
    pub from_day: i64,
    pub to_day: i64,
    pub cert_pem: String,
    pub key_pem: String,
}

fn failed(what: &str, e: rcgen::Error) -> Error {
    Error::io(format!("making the sandbox's {what}"), std::io::Error::other(e.to_string()))
}

fn today() -> i64 {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    (secs / 86_400) as i64
}

/// Days since 1970-01-01 as a UTC midnight (the civil calendar).
pub(super) fn ymd(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (y, m, d)
}

macro_rules! day {
    ($days:expr) => {{
        let (y, m, d) = ymd($days);
        rcgen::date_time_ymd(y, m, d)
    }};
}

impl Ca {
    /// A new CA for sandbox `id`, for exactly `hosts`.
    pub fn make(id: &str, hosts: &[String]) -> Result<Ca> {
        let key = KeyPair::generate().map_err(|e| failed("CA key", e))?;
        let from_day = today() - 1;
        let ca = Ca {
            id: id.to_string(),
            hosts: hosts.to_vec(),
            from_day,
            to_day: from_day + CA_DAYS,
            cert_pem: String::new(),
            key_pem: key.serialize_pem(),
        };
        let cert = ca.params().self_signed(&key).map_err(|e| failed("CA", e))?;
        Ok(Ca { cert_pem: cert.pem(), ..ca })
    }

    /// The CA's parameters: the same each time, so a CA made again from
    /// them and its key signs leaves the first one's certificate verifies.
    fn params(&self) -> CertificateParams {
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, format!("sbx sandbox {} egress CA", self.id));
        p.distinguished_name = dn;
        p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        p.name_constraints = Some(NameConstraints {
            permitted_subtrees: self.hosts.iter().map(|h| GeneralSubtree::DnsName(h.clone())).collect(),
            excluded_subtrees: Vec::new(),
        });
        p.not_before = day!(self.from_day);
        p.not_after = day!(self.to_day);
        p
    }

    /// A leaf for each host, each with a key of its own, valid from
    /// yesterday for `LEAF_DAYS` (never past the CA).
    pub fn leaves(&self) -> Result<Vec<HostCert>> {
        let key = KeyPair::from_pem(&self.key_pem).map_err(|e| failed("CA key", e))?;
        let issuer = self.params().self_signed(&key).map_err(|e| failed("CA", e))?;
        let from = today() - 1;
        let to = (from + 1 + LEAF_DAYS).min(self.to_day);
        self.hosts
            .iter()
            .map(|host| {
                let leaf_key = KeyPair::generate().map_err(|e| failed("certificate key", e))?;
                let mut p = CertificateParams::new(vec![host.clone()]).map_err(|e| failed("certificate", e))?;
                let mut dn = DistinguishedName::new();
                dn.push(DnType::CommonName, host.clone());
                p.distinguished_name = dn;
                p.is_ca = IsCa::ExplicitNoCa;
                p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                let mut serial = rand::random::<[u8; 16]>();
                serial[0] &= 0x7f;
                p.serial_number = Some(SerialNumber::from_slice(&serial));
                p.not_before = day!(from);
                p.not_after = day!(to);
                let cert = p.signed_by(&leaf_key, &issuer, &key).map_err(|e| failed("certificate", e))?;
                Ok(HostCert { host: host.clone(), cert_pem: cert.pem(), key_pem: leaf_key.serialize_pem() })
            })
            .collect()
    }
}
