//! The problem runner for the simulator: snapshots (one problem, one seed, one dataset), sweeps
//! (many in parallel), and the checks made over what they write (capture quality, leak scan).

pub mod leak;
pub mod problem;
pub mod snapshot;
pub mod sweep;
pub mod visibility;
