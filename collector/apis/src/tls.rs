//! The Kubernetes API over TLS, as a real apiserver serves it: a certificate authority made for
//! the environment signs a serving certificate for the loopback names (and the in-cluster names
//! `kubernetes.default.svc…`), and the kubeconfig carries that authority so clients verify the
//! server as they would a real one. Clients and proxies that insist on HTTPS then work unchanged;
//! plain HTTP stays served on its own port.
//!
//! Only HTTP/1.1 is offered by ALPN: kubectl and client-go then speak it (with its upgrades for
//! exec, attach and port-forward), as they do to an apiserver behind an HTTP/1.1 proxy.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The names the serving certificate is good for: the loopback the API listens on, and the names
/// a pod reaches its apiserver by.
const SERVER_NAMES: [&str; 6] = [
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// How long a client has to finish its handshake before the connection is dropped.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// A certificate authority and the serving certificate it signed.
#[derive(Clone)]
pub struct ServerTls {
    /// The authority's certificate (PEM): what a kubeconfig's `certificate-authority-data` holds.
    pub ca_pem: String,
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

impl ServerTls {
    /// A new authority and serving certificate (ECDSA P-256; rcgen's default validity, which
    /// no clock skew falls outside).
    pub fn generate() -> anyhow::Result<ServerTls> {
        let ca_key = KeyPair::generate().context("generating the CA's key")?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "kubernetes-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::CrlSign,
        ];
        let ca_cert = ca.self_signed(&ca_key).context("signing the CA")?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().context("generating the server's key")?;
        let names: Vec<String> = SERVER_NAMES.iter().map(|n| n.to_string()).collect();
        let mut server = CertificateParams::new(names)?;
        server
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        server.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = server
            .signed_by(&key, &issuer)
            .context("signing the serving certificate")?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key_der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
            .map_err(|e| anyhow::anyhow!("the server's key: {e}"))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone(), ca_cert.der().clone()], key_der)
            .context("the serving certificate")?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerTls {
            ca_pem: ca_cert.pem(),
            config: Arc::new(config),
        })
    }

    /// Serves `app` over TLS on `listener` (peers' addresses as connect info, as the plain
    /// listeners give them) until the task is aborted.
    pub fn serve(
        &self,
        listener: TcpListener,
        app: axum::Router,
    ) -> anyhow::Result<tokio::task::JoinHandle<std::io::Result<()>>> {
        use axum::serve::ListenerExt;
        let local = listener.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(self.config.clone());
        let accepting = tokio::spawn(accept(listener, acceptor, tx));
        let tls = TlsListener {
            rx,
            local,
            _accepting: AbortOnDrop(accepting),
        };
        let service = app.into_make_service_with_connect_info::<SocketAddr>();
        Ok(tokio::spawn(async move {
            axum::serve(tls.tap_io(|_| {}), service).await
        }))
    }
}

/// Accepts connections and shakes hands with each on its own task (a slow client holds up no
/// other), handing finished ones to the listener.
async fn accept(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::debug!("TLS listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = ready.send((stream, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
                Err(_) => tracing::debug!("TLS handshake with {peer} timed out"),
            }
        });
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Connections whose handshake is done, as axum's listener.
struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    _accepting: AbortOnDrop,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The accepting task ended (aborted with the server): nothing will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
