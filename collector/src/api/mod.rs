//! The API facades an agent talks to. Each is an axum router over the in-memory stores and the
//! virtual clock; none can change anything.

pub mod kube;
pub mod prometheus;
