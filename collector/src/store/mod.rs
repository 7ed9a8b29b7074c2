//! In-memory, indexed copies of the signals the API facades serve. Every environment (a recorded
//! dataset, the simulator) fills the same stores, so the facades cannot tell them apart.

pub mod logs;
pub mod objects;
pub mod spans;
