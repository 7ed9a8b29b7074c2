//! PromQL engine over an in-memory series store, and the Prometheus HTTP API.
//!
//! Build a store with [`StorageBuilder`], evaluate with [`Engine`], or serve it with
//! [`router`], which answers as a Prometheus frozen at a virtual clock's "now" ([`Clock`]).
//!
//! ```
//! use std::sync::Arc;
//! use promql::{Clock, Engine, PromApi, StorageBuilder, StorageSource, Value, parse};
//!
//! let mut b = StorageBuilder::new();
//! b.set_metadata("http_requests_total", "counter", "Requests served.", "");
//! for k in 0..20 {
//!     // metric name, labels (any order), time in ms since the epoch, value
//!     b.add_sample("http_requests_total", [("job", "api"), ("code", "500")], k * 15_000, k as f64);
//! }
//! let store = b.build();
//!
//! let expr = parse("sum by (code) (rate(http_requests_total[1m]))").unwrap();
//! let Value::Vector(v) = Engine::default().instant(&store, &expr, 285_000).unwrap() else { panic!() };
//! assert_eq!(v[0].labels.get("code"), "500");
//!
//! // The HTTP API: merge more routes into the returned axum::Router as needed.
//! let storage: Arc<dyn StorageSource> = Arc::new(store);
//! let app: axum::Router = promql::router(PromApi::new(storage, Clock::frozen(300_000 * 1_000_000)));
//! # drop(app);
//! ```

pub mod api;
pub mod chunk;
pub mod disk;
pub mod eval;
pub mod labels;
pub mod limits;
pub mod live;
pub mod promqltest;
pub mod storage;
pub mod value;

pub use api::{PromApi, router};
pub use disk::{DiskConfig, DiskStorage};
pub use eval::{Engine, EvalError, parse};
pub use labels::Labels;
pub use limits::Cancel;
pub use live::LiveStorage;
/// The virtual clock the API answers by (shared with every other faultline API).
pub use schemas::time::Clock;
pub use storage::{LabelMatcher, MemStorage, Storage, StorageBuilder, StorageSource};
pub use value::{Sample, Series, Value};
