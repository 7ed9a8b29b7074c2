//! The API facades an agent talks to. Each is an axum router over the in-memory stores and the
//! virtual clock; none can change anything.

pub mod duration;
pub mod jaeger;
pub mod kube;
pub mod loki;
pub mod prometheus;
