//! The faultline problem catalog: applications, fault primitives, problems and noise profiles as
//! data (TOML), their validation, and the built-in catalog embedded from `catalog/`.
//!
//! ```
//! let catalog = problems::Catalog::builtin().expect("the built-in catalog is valid");
//! let app = catalog.app("hotel-reservation").unwrap();
//! assert!(app.service("frontend").is_some());
//! ```

pub mod app;
pub mod catalog;
pub mod catalog_md;
pub mod edits;
pub mod manifests;
pub mod noise;
pub mod primitive;
pub mod problem;
pub mod source;
pub mod units;
mod validate;

pub use app::AppSpec;
pub use catalog::{Catalog, CatalogError, SpecKind};
pub use noise::{NoiseKind, NoiseProfile, PlannedNoise};
pub use primitive::{Primitive, Target};
pub use problem::{
    Expectation, FaultSpec, GroundTruthSpec, HealthCondition, OracleSpec, ProblemSpec,
    ReferenceFix, StateAssertion,
};
pub use source::{Diagnostic, SourceFile};
pub use units::{Cpu, Dur, Memory};
pub use validate::{MAX_LOAD_MULTIPLIER, MAX_NOISE_PER_PERIOD, MAX_REPLICAS, MAX_RUN_DURATION};
