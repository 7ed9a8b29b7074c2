//! faultline's problems as an OpenEnv environment (`collector serve openenv`): each episode is a
//! live session of one problem, driven by a stock OpenEnv client over a WebSocket. `reset` starts
//! it and shows the task, the endpoints and the tools; each `step` calls one of the session's
//! tools (kubectl, PromQL, traces, logs, the analysis tools, `submit`); the last stage's `submit`
//! grades the session and answers the reward with the run record.
//!
//! What flows through it: a client's message is parsed ([`protocol`], IO-free), answered by its
//! slot's [`episode`], and carried by the axum transport ([`server`]).

pub mod episode;
pub mod protocol;
pub mod server;

pub use episode::Settings;
pub use server::router;
