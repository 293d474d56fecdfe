//! The TLS set-up of every HTTP client the library builds (the provider
//! dialects, MCP over HTTP): rustls on *ring*, the system's root
//! certificates, and only what a client that presents no certificate of its
//! own needs.
//!
//! ring's stock provider carries the code that signs with private keys
//! (RSA, ECDSA, Ed25519: a client certificate) and ChaCha20-Poly1305, over
//! 100 KB of every program between them, and installing it as the
//! process's default would also decide for the application's own rustls
//! connections. So the clients get a provider of their own instead: the
//! AES-GCM suites (every TLS 1.3 server must offer `TLS_AES_128_GCM_SHA256`;
//! ECDHE with AES-GCM is what TLS 1.2 servers answer), X25519 and P-256 for
//! the key exchange (RFC 8446 has every server take P-256), and every
//! signature scheme ring verifies — a server's certificate chain may use any
//! of them. An application that installed a provider of its own
//! ([`CryptoProvider::install_default`]) gets that one instead.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::ring::{cipher_suite, kx_group};
use rustls::crypto::{
    CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::SigningKey;
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use webpki::ring as algs;

/// The client TLS configuration: the application's default provider if it
/// installed one, else [`provider`]; the system's roots through the
/// platform verifier, read at the first certificate to check; HTTP/1.1
/// (and h2 with the `http2` feature) offered by ALPN, as reqwest would.
pub(crate) fn client_config() -> Result<ClientConfig, String> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(provider()));
    let verifier = SystemRoots {
        provider: Arc::clone(&provider),
        verifier: OnceLock::new(),
    };
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("the TLS provider offers no usable protocol version: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![
        #[cfg(feature = "http2")]
        b"h2".to_vec(),
        b"http/1.1".to_vec(),
    ];
    Ok(config)
}

/// The platform verifier on the system's roots, made at the first
/// certificate to check: making it reads every root the system has (some
/// 1,300 file operations and 2 ms here, and the pages of code that parse
/// them), which a program that talks to a local server over plain HTTP
/// never needs. Signatures are checked with the provider's algorithms, as
/// the platform verifier does, so a handshake can start without the roots.
struct SystemRoots {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<rustls_platform_verifier::Verifier, String>>,
}

impl SystemRoots {
    fn verifier(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.verifier
            .get_or_init(|| {
                rustls_platform_verifier::Verifier::new(Arc::clone(&self.provider)).map_err(|e| {
                    format!(
                        "could not read the system's root certificates ({e}): install the \
                         system's CA certificates (Debian: `ca-certificates`) or name a \
                         bundle in SSL_CERT_FILE"
                    )
                })
            })
            .as_ref()
            .map_err(|message| rustls::Error::General(message.clone()))
    }
}

/// Not derived: the verifier's and its errors' `Debug` code would come
/// with it, for a value nobody prints.
impl std::fmt::Debug for SystemRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SystemRoots")
    }
}

impl ServerCertVerifier for SystemRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The library's own crypto provider: see the module's documentation.
fn provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ],
        kx_groups: vec![kx_group::X25519, kx_group::SECP256R1],
        signature_verification_algorithms: VERIFY,
        secure_random: &Random,
        key_provider: &NoKeys,
    }
}

/// What ring verifies, as its stock provider lists it (which rustls keeps
/// private).
static VERIFY: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        algs::ECDSA_P256_SHA256,
        algs::ECDSA_P256_SHA384,
        algs::ECDSA_P384_SHA256,
        algs::ECDSA_P384_SHA384,
        algs::ED25519,
        algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        algs::RSA_PKCS1_2048_8192_SHA256,
        algs::RSA_PKCS1_2048_8192_SHA384,
        algs::RSA_PKCS1_2048_8192_SHA512,
        algs::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
        algs::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
        algs::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    ],
    mapping: &[
        // In TLS 1.2 the scheme doesn't fix the curve; in TLS 1.3 it does.
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[algs::ECDSA_P384_SHA384, algs::ECDSA_P256_SHA384],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[algs::ECDSA_P256_SHA256, algs::ECDSA_P384_SHA256],
        ),
        (SignatureScheme::ED25519, &[algs::ED25519]),
        (
            SignatureScheme::RSA_PSS_SHA512,
            &[algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA384,
            &[algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA512,
            &[algs::RSA_PKCS1_2048_8192_SHA512],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA384,
            &[algs::RSA_PKCS1_2048_8192_SHA384],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[algs::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};

/// The system's random numbers, through ring.
#[derive(Debug)]
struct Random;

impl SecureRandom for Random {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), buf)
            .map_err(|_| GetRandomFailed)
    }
}

/// The clients present no certificate, so they load no private key.
#[derive(Debug)]
struct NoKeys;

impl KeyProvider for NoKeys {
    fn load_private_key(
        &self,
        _key: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, rustls::Error> {
        Err(rustls::Error::General(
            "ferrobot's HTTP clients present no client certificate".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_ring_verifies_is_offered() {
        let stock = rustls::crypto::ring::default_provider().signature_verification_algorithms;
        assert_eq!(
            VERIFY.supported_schemes(),
            stock.supported_schemes(),
            "the schemes offered to servers differ from ring's stock provider"
        );
        assert_eq!(VERIFY.all.len(), stock.all.len());
    }

    #[test]
    fn only_aes_gcm_suites_and_no_private_keys() {
        let ours = provider();
        assert!(ours.cipher_suites.iter().all(|s| {
            let name = format!("{:?}", s.suite());
            name.contains("AES") && name.contains("GCM")
        }));
        assert!(
            ours.key_provider
                .load_private_key(PrivateKeyDer::Pkcs8(Vec::new().into()))
                .is_err()
        );
        let config = client_config().expect("client config");
        assert!(config.alpn_protocols.contains(&b"http/1.1".to_vec()));
    }
}
