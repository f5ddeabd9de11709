//! A CA made for one test and leaf certificates it signs, as PEM.

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

pub(crate) struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    pub(crate) fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "sbx test CA");
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    pub(crate) fn pem(&self) -> String {
        self.cert.pem()
    }

    /// (certificate PEM, key PEM) for `host`.
    pub(crate) fn leaf(&self, host: &str) -> (String, String) {
        let params = CertificateParams::new(vec![host.to_string()]).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}
