//! Where sweeps and evaluations keep their runs, so that work split over shards (an Indexed Job's
//! pods, or processes on one machine) adds up to one result: the [`Plan`] every shard checks it
//! shares, the [`Shard`] of the work list each one does, and the [`Store`] (a directory or object
//! storage) each finished run is published to atomically, from which a board or an index is read
//! back with whatever is still missing.

pub mod plan;
pub mod shard;
pub mod store;

pub use plan::{Plan, check_key};
pub use shard::Shard;
pub use store::{OtherWork, Progress, Published, Store, worth_retrying};

/// Exit code of a shard that could not finish its share for a reason worth another try (a store
/// that did not answer, a session that could not start): EX_TEMPFAIL. An Indexed Job's
/// `podFailurePolicy` counts it against the index's retries; every other failure code fails the
/// index at once.
pub const EXIT_RETRY: u8 = 75;
