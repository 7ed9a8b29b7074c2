//! PromQL engine over an in-memory series store, and the Prometheus HTTP API.
