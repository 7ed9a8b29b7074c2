//! PromQL engine over an in-memory series store, and the Prometheus HTTP API.
//!
//! Build a store with [`StorageBuilder`], evaluate with [`Engine`], or serve it with
//! [`api::router`].

pub mod api;
pub mod chunk;
pub mod eval;
pub mod labels;
pub mod promqltest;
pub mod storage;
pub mod value;

pub use api::{PromApi, VirtualClock, router};
pub use eval::{Engine, EvalError, parse};
pub use labels::Labels;
pub use storage::{LabelMatcher, MemStorage, Storage, StorageBuilder};
pub use value::{Sample, Series, Value};
