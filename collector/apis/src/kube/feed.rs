//! The objects the Kubernetes API serves: every version (for watches) and the cluster now. A
//! replay's never change; a live environment appends what its simulation and its clients' writes
//! produce, and watches wake up on each append.

use std::sync::{RwLock, RwLockReadGuard};

use schemas::tables::{EventRow, ObjectRow};
use stores::objects::{ClusterState, ObjectTimeline};
use tokio::sync::watch;

/// Every version, and the state the API reads as "now".
pub struct Objects {
    pub timeline: ObjectTimeline,
    pub state: ClusterState,
}

pub struct ObjectFeed {
    objects: RwLock<Objects>,
    /// The newest resource version, for watches waiting on changes.
    changed: watch::Sender<u64>,
}

impl ObjectFeed {
    /// A recording served as of `at_ns` (the timeline must be sealed).
    pub fn fixed(timeline: ObjectTimeline, at_ns: i64) -> Self {
        let state = timeline.state_at(at_ns);
        Self::with(timeline, state)
    }

    /// A live cluster's objects so far (the timeline must be sealed); [`Self::append`] adds more.
    pub fn live(timeline: ObjectTimeline) -> Self {
        let state = timeline.state_at(i64::MAX);
        Self::with(timeline, state)
    }

    fn with(timeline: ObjectTimeline, state: ClusterState) -> Self {
        let (changed, _) = watch::channel(state.resource_version);
        ObjectFeed {
            objects: RwLock::new(Objects { timeline, state }),
            changed,
        }
    }

    /// The objects, locked for reading (keep it short: appends wait for it).
    pub fn read(&self) -> RwLockReadGuard<'_, Objects> {
        // A writer that panicked left whole versions behind (appends are row by row).
        self.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends the newest rows and wakes the watches. Returns the newest resource version.
    pub fn append(&self, objects: Vec<ObjectRow>, events: Vec<EventRow>) -> Result<u64, String> {
        if objects.is_empty() && events.is_empty() {
            return Ok(self.read().state.resource_version);
        }
        let (result, newest) = {
            let mut guard = self.objects.write().unwrap_or_else(|e| e.into_inner());
            let o = &mut *guard;
            let result = o.timeline.append(objects, events, &mut o.state);
            (result, o.state.resource_version)
        };
        // Whatever was appended before an error is served: tell the watches either way.
        self.changed.send_replace(newest);
        result.map(|()| newest)
    }

    /// A receiver that sees the newest resource version after every append.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}
