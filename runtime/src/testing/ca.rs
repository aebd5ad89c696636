//! A test certificate authority (rcgen).

use std::fmt;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

fn provider() -> Arc<CryptoProvider> {
    crate::tls::crypto_provider()
}

/// A certificate authority made for one test: it issues server
/// certificates for names and gives its root to trust, so a test runs
/// every connection over real TLS without a file, a system root or a
/// skipped verification.
///
/// ```
/// let ca = humus::testing::Ca::new();
/// let carts = ca.issue("carts");
/// let _server = carts.server_config();   // ALPN h2, the certificate for carts
/// let _client = ca.client_config();      // trusts this CA only
/// ```
///
/// Design: [testing](crate::design::client#testing).
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    root: CertificateDer<'static>,
    root_pem: String,
}

impl fmt::Debug for Ca {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("testing::Ca").finish_non_exhaustive()
    }
}

impl Default for Ca {
    fn default() -> Self {
        Ca::new()
    }
}

impl Ca {
    /// A new CA with a fresh key.
    ///
    /// # Panics
    ///
    /// If rcgen fails to make a key or sign, which only a broken build does.
    pub fn new() -> Ca {
        let key = KeyPair::generate().expect("rcgen generates a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names to parse");
        params
            .distinguished_name
            .push(DnType::CommonName, "humus test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let root = params.self_signed(&key).expect("rcgen signs the CA");
        Ca {
            issuer: Issuer::new(params, key),
            root: root.der().clone(),
            root_pem: root.pem(),
        }
    }

    /// Issues a server certificate for `name`, a DNS name (`carts`) or an IP
    /// address (`10.0.0.7`), signed by this CA.
    ///
    /// # Panics
    ///
    /// If `name` is neither a DNS name nor an IP address: a test's bug.
    pub fn issue(&self, name: &str) -> Issued {
        self.issue_for(name, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// Issues a client certificate for `name` (for mutual TLS: a server
    /// that verifies its clients against this CA accepts it), signed by
    /// this CA. Its [`Issued::client_config`] presents it.
    ///
    /// # Panics
    ///
    /// If `name` is neither a DNS name nor an IP address: a test's bug.
    pub fn issue_client(&self, name: &str) -> Issued {
        self.issue_for(name, ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A certificate for `name` whose extended key usage is `usage`.
    fn issue_for(&self, name: &str, usage: ExtendedKeyUsagePurpose) -> Issued {
        let key = KeyPair::generate().expect("rcgen generates a key");
        let mut params = CertificateParams::new(vec![name.to_owned()])
            .unwrap_or_else(|err| panic!("testing::Ca: cannot issue for {name:?}: {err}"));
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("rcgen signs the certificate");
        Issued {
            chain: vec![cert.der().clone(), self.root.clone()],
            chain_pem: format!("{}{}", cert.pem(), self.root_pem),
            key: key.serialize_der(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A server TLS config serving `server`'s certificate, with `h2` in
    /// ALPN, that requires every client to present a certificate this CA
    /// issued ([`Ca::issue_client`]): mutual TLS.
    ///
    /// # Panics
    ///
    /// Never for certificates this CA issued.
    pub fn mtls_server_config(&self, server: &Issued) -> rustls::ServerConfig {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(self.roots()),
            provider(),
        )
        .build()
        .expect("the CA is a valid root");
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .with_client_cert_verifier(verifier)
            .with_single_cert(server.chain(), server.key())
            .expect("the key matches the certificate");
        config.alpn_protocols = vec![b"h2".to_vec()];
        config
    }

    /// The CA's certificate: the root to trust.
    pub fn root(&self) -> CertificateDer<'static> {
        self.root.clone()
    }

    /// The CA's certificate, PEM-encoded, as a CA file holds it.
    pub fn root_pem(&self) -> String {
        self.root_pem.clone()
    }

    /// A root store holding this CA only.
    ///
    /// # Panics
    ///
    /// Never for a certificate this CA made.
    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots
            .add(self.root.clone())
            .expect("the CA certificate is a valid root");
        roots
    }

    /// A client TLS config that trusts this CA and nothing else, with no
    /// client certificate and no ALPN (the humus client adds `h2`).
    ///
    /// # Panics
    ///
    /// Never: ring's provider supports the default protocol versions.
    pub fn client_config(&self) -> rustls::ClientConfig {
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .with_root_certificates(self.roots())
            .with_no_client_auth()
    }
}

/// A server certificate a [`Ca`] issued, with its private key.
#[derive(Clone)]
pub struct Issued {
    chain: Vec<CertificateDer<'static>>,
    chain_pem: String,
    key: Vec<u8>,
    key_pem: String,
}

impl fmt::Debug for Issued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("testing::Issued").finish_non_exhaustive()
    }
}

impl Issued {
    /// The certificate chain: the certificate, then the CA's.
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.chain.clone()
    }

    /// The certificate's private key (PKCS #8).
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone()))
    }

    /// The chain and the key, PEM-encoded in one file, as a server's
    /// `tls.pem` holds them.
    pub fn pem(&self) -> String {
        format!("{}{}", self.chain_pem, self.key_pem)
    }

    /// A server TLS config serving this certificate, with `h2` in ALPN, and
    /// no client authentication.
    ///
    /// # Panics
    ///
    /// Never for a certificate a [`Ca`] issued.
    pub fn server_config(&self) -> rustls::ServerConfig {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .with_no_client_auth()
            .with_single_cert(self.chain(), self.key())
            .expect("the key matches the certificate");
        config.alpn_protocols = vec![b"h2".to_vec()];
        config
    }

    /// A client TLS config that trusts `ca` and presents this certificate
    /// (one from [`Ca::issue_client`]), for mutual TLS.
    ///
    /// # Panics
    ///
    /// Never for a certificate a [`Ca`] issued.
    pub fn client_config(&self, ca: &Ca) -> rustls::ClientConfig {
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .with_root_certificates(ca.roots())
            .with_client_auth_cert(self.chain(), self.key())
            .expect("the key matches the certificate")
    }

    /// A TLS acceptor of [`server_config`](Issued::server_config), for
    /// [`Listener::tls`](super::Listener::tls).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(Arc::new(self.server_config()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Host as _;
    use rustls_pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn handshake(ca: &Ca, cert_for: &str, dial_name: &str) -> std::io::Result<()> {
        let host = crate::testing::Host::new();
        let mut listener = host.listen("carts:9090");
        let acceptor = ca.issue(cert_for).acceptor();
        let server = tokio::spawn(async move {
            let conn = listener.accept().await;
            let mut tls = acceptor.accept(conn).await?;
            tls.write_all(b"ok").await?;
            tls.flush().await?;
            std::io::Result::Ok(())
        });
        let io = host.dial("carts:9090").await?;
        let mut config = ca.client_config();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let name = ServerName::try_from(dial_name.to_owned()).unwrap();
        let mut tls = connector.connect(name, io).await?;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let mut buf = [0; 2];
        tls.read_exact(&mut buf).await?;
        server.await.unwrap()
    }

    #[tokio::test]
    async fn a_client_trusting_the_ca_verifies_an_issued_certificate() {
        let ca = Ca::new();
        handshake(&ca, "carts", "carts").await.unwrap();
    }

    #[tokio::test]
    async fn a_certificate_for_another_name_fails() {
        let ca = Ca::new();
        assert!(handshake(&ca, "orders", "carts").await.is_err());
    }

    #[tokio::test]
    async fn another_ca_is_not_trusted() {
        let ca = Ca::new();
        let other = Ca::new();
        let host = crate::testing::Host::new();
        let mut listener = host.listen("carts:9090");
        let acceptor = other.issue("carts").acceptor();
        tokio::spawn(async move {
            let conn = listener.accept().await;
            let _ = acceptor.accept(conn).await;
        });
        let io = host.dial("carts:9090").await.unwrap();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(ca.client_config()));
        let name = ServerName::try_from("carts").unwrap();
        assert!(connector.connect(name, io).await.is_err());
    }

    #[test]
    fn pems_hold_the_chain_and_the_key() {
        let ca = Ca::new();
        let issued = ca.issue("carts");
        let pem = issued.pem();
        assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(pem.contains("BEGIN PRIVATE KEY"));
        assert!(pem.contains(&ca.root_pem()));
        assert!(ca.root_pem().starts_with("-----BEGIN CERTIFICATE-----\n"));
    }
}
