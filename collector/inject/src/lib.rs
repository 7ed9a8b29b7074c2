//! Faults into real systems. eBPF programs (C in `bpf/`, compiled by clang in build.rs, loaded with
//! aya) make system calls fail and packets drop for the processes of one cgroup v2 directory:
//!
//! - [`request`]: what an injection asks for (IO-free), and which programs carry it out;
//! - [`probe`]: what this kernel allows, measured by loading and attaching every program;
//! - [`bpf`]: loading the objects with one injection's parameters, attaching, counting;
//! - [`cgroup`]: the cgroup v2 hierarchy and the directories faults are scoped to;
//! - [`journal`]: the durable undo journal every change is written to before it is made, generic
//!   over the undo action; [`undo`]: the changes this crate makes and how each is undone;
//! - [`injection`]: one injection from load to verified detach;
//! - [`catalog`]: the catalog's node-level primitives as injector requests, and which problems a
//!   host can run;
//! - [`api`]: the catalog's Kubernetes and configuration primitives on a real cluster, through its
//!   API (kube-rs), journaled in the same journal;
//! - [`crash`]: the crash points tests kill an injector at.

pub mod api;
pub mod bpf;
pub mod catalog;
pub mod cgroup;
pub mod crash;
pub mod errno;
pub mod injection;
pub mod journal;
pub mod probe;
pub mod request;
pub mod undo;

pub use errno::Errno;
pub use journal::Journal;
pub use request::{Direction, Fault, Hook, Op, Peer, Proto, Rate, Tier};
