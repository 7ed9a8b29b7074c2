//! Real clusters: a problem's faults injected through the Kubernetes API and reverted
//! (`faults`), the catalog's apps deployed (`deploy`), datasets made on a cluster (`snapshot`)
//! and sessions run against one (`session`). The injection itself lives in `inject::api`; this
//! module puts problems, schedules and the other commands' machinery around it.

pub mod faults;
pub mod snapshot;
