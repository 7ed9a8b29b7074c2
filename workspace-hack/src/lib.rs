//! Nothing to call: this crate exists for its dependency lines (see its Cargo.toml).
