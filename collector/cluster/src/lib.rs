//! The simulated cluster's state and control plane, below the simulation that drives it (`sim`):
//! Kubernetes objects typed for the code that works on them and rendered as the JSON the API server
//! returns ([`objects`]); the one list of kinds and the generic access to an object of any kind
//! ([`kinds`]); the world that holds every object, the virtual clock, the seeded generator and the
//! hidden runtime conditions faults act on ([`world`], [`runtime`]); the controllers that reconcile
//! deployments, replica sets, stateful sets, scheduling, endpoints and endpoint slices, node
//! lifecycle and quotas
//! ([`controllers`]); and the bootstrap that builds an application's objects ([`bootstrap`]).
//!
//! Kept apart from `sim` so that what reads or writes objects (the simulator, and the writable
//! Kubernetes API to come) shares one model without depending on the whole simulation.

pub mod bootstrap;
pub mod controllers;
pub mod decode;
pub mod kinds;
pub mod objects;
pub mod quantity;
pub mod runtime;
pub mod strategies;
pub mod util;
pub mod validate;
pub mod world;
pub mod writes;
