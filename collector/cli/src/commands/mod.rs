//! One module per `collector` subcommand, each with its own `Args` and `run`.

pub mod analyze;
pub mod capture;
mod check_fixes;
pub mod cluster;
pub mod dataset;
pub mod deploy;
pub mod env;
pub mod eval;
pub mod harbor;
pub mod inject;
pub mod inject_kube;
pub mod job;
pub mod limits;
pub mod live;
pub mod mcp;
pub mod problems;
pub mod replay;
pub mod sandbox;
pub mod serve;
pub mod shard;
pub mod snapshot;
pub mod sweep;
