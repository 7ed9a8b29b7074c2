//! faultline's collector: environments (embedded simulator, real Kubernetes, recorded dataset),
//! capture, the API facades, the problem runner and the `collector` command line.

pub mod api;
pub mod capture;
pub mod cli;
pub mod clock;
pub mod env;
pub mod replay;
pub mod run;
pub mod sim;
pub mod store;
