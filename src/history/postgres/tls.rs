//! TLS to PostgreSQL as a connection URL asks for it, in libpq's terms:
//! `sslmode` decides whether the connection is encrypted and what of the
//! server's certificate is checked, `sslrootcert` which authorities it is
//! checked against.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::storage;
use crate::history::HistoryError;

/// How a URL's `sslmode` has the connection encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tls {
    /// Unset or `disable`: plain TCP, as on a private network or loopback.
    Off,
    /// `prefer`, and `require` without `sslrootcert`: encrypted, the
    /// certificate unchecked (libpq's meaning of these modes).
    Encrypt,
    /// `verify-ca` (and `require` with `sslrootcert`, as libpq has it):
    /// encrypted, the certificate checked against the roots, whatever name
    /// it is for.
    VerifyCa,
    /// `verify-full`: as `VerifyCa`, and the certificate's name is the
    /// host's.
    VerifyFull,
}

/// What a URL asks of TLS, and the URL as tokio-postgres reads it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Asked {
    pub(super) tls: Tls,
    /// The authorities' certificates (PEM) from `sslrootcert`; `None` for
    /// the Mozilla roots (unset, or `system`).
    pub(super) roots: Option<PathBuf>,
    /// tokio-postgres knows `sslmode` up to `require` and no `sslrootcert`:
    /// the verifying modes become `require` (the checking is the
    /// connector's), and `sslrootcert` is left out.
    pub(super) url: String,
}

/// What `url` (a URL or key-value string) asks of TLS.
pub(super) fn asked(url: &str) -> Asked {
    let value = |key: &str| {
        url.split(['?', '&', ' '])
            .filter_map(|pair| pair.strip_prefix(key))
            .next_back()
            .map(|value| value.trim_matches('\''))
    };
    // `%XX` is an escape in a URL's query, not in key-value pairs.
    let url_form = url.contains("://");
    let roots = value("sslrootcert=")
        .filter(|path| *path != "system")
        .map(|path| {
            PathBuf::from(if url_form {
                decoded(path)
            } else {
                path.to_owned()
            })
        });
    let mut url = without_param(url, "sslrootcert");
    let tls = match value("sslmode=") {
        Some("prefer") => Tls::Encrypt,
        Some("require") if roots.is_none() => Tls::Encrypt,
        // libpq: "if a root CA file exists, sslmode=require behaves as verify-ca".
        Some("require") => Tls::VerifyCa,
        Some(mode @ ("verify-ca" | "verify-full")) => {
            url = url.replace(&format!("sslmode={mode}"), "sslmode=require");
            if mode == "verify-ca" {
                Tls::VerifyCa
            } else {
                Tls::VerifyFull
            }
        }
        // Unset is plain TCP, not tokio-postgres's `prefer`; `disable`, and
        // what tokio-postgres will refuse by name.
        _ => Tls::Off,
    };
    Asked { tls, roots, url }
}

/// `%XX` escapes decoded, as in a URL's query.
fn decoded(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// `url` without its `key=…` parameter, in either form.
fn without_param(url: &str, key: &str) -> String {
    let prefix = format!("{key}=");
    if let Some((base, query)) = url.split_once('?') {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| !pair.starts_with(&prefix))
            .collect();
        return match kept.is_empty() {
            true => base.to_owned(),
            false => format!("{base}?{}", kept.join("&")),
        };
    }
    url.split(' ')
        .filter(|pair| !pair.starts_with(&prefix))
        .collect::<Vec<_>>()
        .join(" ")
}

/// rustls with ring (ferrobot's crypto provider, whatever the process
/// installed), checking the server's certificate as `tls` says, against
/// the authorities in `roots` (else the Mozilla roots).
pub(super) fn config(tls: Tls, roots: Option<&Path>) -> Result<rustls::ClientConfig, HistoryError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| storage("could not set up TLS for PostgreSQL", e))?;
    let roots = match (tls, roots) {
        (Tls::Encrypt, _) => None,
        (_, Some(path)) => Some(read_roots(path)?),
        (_, None) => Some(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        }),
    };
    let chain = match (tls, roots) {
        (Tls::VerifyFull, Some(roots)) => {
            return Ok(builder.with_root_certificates(roots).with_no_client_auth());
        }
        (_, Some(roots)) => Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .build()
                .map_err(|e| storage("could not set up TLS for PostgreSQL", e))?,
        ),
        (_, None) => None,
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyName { chain, provider }))
        .with_no_client_auth())
}

/// The certificates of the PEM file `sslrootcert` names.
fn read_roots(path: &Path) -> Result<RootCertStore, HistoryError> {
    let shown = path.display();
    let unreadable = |why: String| HistoryError::Storage {
        message: format!(
            "sslrootcert names {shown}, {why}: name a PEM file holding the certificate of the \
             authority that signed the server's (or `sslrootcert=system` for the Mozilla roots)"
        ),
        source: None,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| unreadable(format!("which could not be read ({e})")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(format!("which is not PEM ({e})")))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(unreadable("which holds no certificate".to_owned()));
    }
    Ok(roots)
}

/// The certificate check of `sslmode=require` and of `verify-ca`. With no
/// `chain` (`require`), none, as libpq does, since managed servers often
/// present certificates of their own authorities; with one (`verify-ca`),
/// the chain up to the roots, its dates and use — all but the name. The
/// handshake's signatures are checked either way, so the connection is
/// encrypted with whoever holds the certificate's key.
#[derive(Debug)]
struct AnyName {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            // The name is checked last, once the chain was found good.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            verified => verified,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(url: &str) -> Tls {
        asked(url).tls
    }

    #[test]
    fn sslmode_and_sslrootcert_choose_the_check() {
        assert_eq!(tls("postgres://db/x"), Tls::Off);
        assert_eq!(tls("postgres://db/x?sslmode=disable"), Tls::Off);
        assert_eq!(tls("postgres://db/x?sslmode=prefer"), Tls::Encrypt);
        assert_eq!(tls("postgres://db/x?sslmode=require"), Tls::Encrypt);
        assert_eq!(tls("postgres://db/x?sslmode=verify-ca"), Tls::VerifyCa);
        assert_eq!(tls("postgres://db/x?sslmode=verify-full"), Tls::VerifyFull);
        // libpq's rule: a root file makes `require` check the authority.
        assert_eq!(
            tls("postgres://db/x?sslrootcert=/ca.pem&sslmode=require"),
            Tls::VerifyCa
        );
        assert_eq!(
            tls("postgres://db/x?sslrootcert=system&sslmode=require"),
            Tls::Encrypt
        );
    }

    #[test]
    fn tokio_postgres_gets_the_url_without_what_it_cant_read() {
        assert_eq!(
            asked("postgres://db/x?a=b&sslmode=verify-full"),
            Asked {
                tls: Tls::VerifyFull,
                roots: None,
                url: "postgres://db/x?a=b&sslmode=require".to_owned(),
            }
        );
        assert_eq!(
            asked("postgres://db/x?sslmode=verify-ca&sslrootcert=%2Fetc%2Fmy%20ca.pem"),
            Asked {
                tls: Tls::VerifyCa,
                roots: Some(PathBuf::from("/etc/my ca.pem")),
                url: "postgres://db/x?sslmode=require".to_owned(),
            }
        );
        assert_eq!(
            asked("postgres://db/x?sslrootcert=/ca.pem").url,
            "postgres://db/x"
        );
        assert_eq!(
            asked("host=db sslrootcert=/my%20ca.pem").roots,
            Some(PathBuf::from("/my%20ca.pem"))
        );
        assert_eq!(
            asked("host=db sslrootcert='/ca.pem' sslmode=verify-full"),
            Asked {
                tls: Tls::VerifyFull,
                roots: Some(PathBuf::from("/ca.pem")),
                url: "host=db sslmode=require".to_owned(),
            }
        );
    }

    #[test]
    fn a_root_file_that_cant_be_used_says_what_to_name() {
        let missing = config(Tls::VerifyFull, Some(Path::new("/nonexistent/ca.pem")))
            .expect_err("no such file");
        let text = crate::error::chain(&missing);
        assert!(
            text.contains("sslrootcert names /nonexistent/ca.pem, which could not be read")
                && text.contains("name a PEM file"),
            "{text}"
        );
        let empty = std::env::temp_dir().join(format!("ferrobot-no-ca-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").expect("written");
        let error = config(Tls::VerifyCa, Some(&empty)).expect_err("no certificate");
        let _ = std::fs::remove_file(&empty);
        assert!(
            crate::error::chain(&error).contains("which holds no certificate"),
            "{}",
            crate::error::chain(&error)
        );
    }
}
