//! The APIs an agent talks to: the Kubernetes API, the Prometheus HTTP API, the Jaeger query APIs
//! (v1 and api_v3) and the Loki API. Each is an axum router over the signal stores (the `stores`
//! crate; metrics through `promql`) and the virtual clock ([`schemas::time::Clock`]); the Kubernetes
//! API takes writes when given a cluster to write to. [`audit`] wraps any of them so that every
//! request is recorded as a Kubernetes audit event. [`llm_proxy`] stands between an agent and its LLM
//! provider and counts the tokens the agent used. [`replay`] puts the four on loopback ports over a
//! recorded dataset ([`replay::Endpoints`]: where each API listens, also for live environments).
//!
//! Protocol logic (selectors, printers, discovery, status, LogQL evaluation) is kept apart from the
//! handlers so that it can be tested and reused without a server.

pub mod audit;
pub mod jaeger;
pub mod kube;
pub mod limits;
pub mod llm_proxy;
pub mod loki;
pub mod prometheus;
pub mod replay;
pub mod tls;
