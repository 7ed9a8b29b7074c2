//! faultline's problems as Harbor tasks (`collector harbor ...`). Outside: [`export`] writes one
//! task folder per (problem, seed) from [`task`]'s rendering. Inside a task's environment: the
//! healthcheck starts the session once ([`control::up`], [`daemon`]); the agent works as an
//! unprivileged user against the session's fixed ports; the verifier grades
//! ([`control::grade`]) and the reference solution presents its token ([`control::solve`]).
//! What only the evaluator may know (the problem, the grading token) is in the root-only
//! [`episode`] file.

pub mod control;
pub mod daemon;
pub mod episode;
pub mod export;
pub mod task;
