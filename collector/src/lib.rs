//! faultline's collector: environments (embedded simulator, real Kubernetes, recorded dataset),
//! capture, the API facades, the problem runner and the `collector` command line.

pub mod cli;
