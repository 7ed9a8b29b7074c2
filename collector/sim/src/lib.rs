//! The embedded simulator (environment `sim`): a deterministic, seeded model of a Kubernetes
//! cluster running a microservice application under load. Faults change the model's state and
//! symptoms follow from the model; every change and every signal is emitted as dataset rows.
//!
//! Time advances in one-second steps: controllers reconcile, kubelets sync, the workload moves
//! requests through the call graph, and every scrape interval the exporters are scraped and the
//! alert rules evaluated. Object changes are flushed at the end of each step.

pub mod alerts;
pub mod calls;
pub mod faults;
pub mod flags;
pub mod kubelet;
pub mod lifetimes;
pub mod logs;
pub mod network;
pub mod programs;
pub mod shell;
pub mod spans;
pub mod telemetry;
pub mod workload;

// The cluster's state and control plane live in their own crate; they are re-exported so that the
// simulation's modules and its users name them as before (`sim::objects`, `super::world`).
pub use cluster::{bootstrap, controllers, kinds, objects, runtime, util, world, writes};

use problems::AppSpec;
use schemas::tables::Row;

use util::NS_PER_SEC;
use world::World;

/// Knobs of a simulation run.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Prometheus scrape (and rule evaluation) interval in seconds.
    pub scrape_interval: i64,
    /// Share of load-generator requests traced end to end.
    pub trace_sample: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            scrape_interval: 15,
            trace_sample: 0.02,
        }
    }
}

/// A running simulation of one application.
#[derive(Clone)]
pub struct Sim {
    pub world: World,
    pub app: AppSpec,
    pub cfg: SimConfig,
    pub workload: workload::Workload,
    alerts: alerts::Alerts,
    next_scrape: i64,
    /// Namespaces whose objects and telemetry are captured.
    pub namespaces: Vec<String>,
}

impl Sim {
    /// Builds the cluster, brings the app up before `start_ns`, and positions the clock at
    /// `start_ns` with every object reported as added.
    pub fn new(app: &AppSpec, seed: u64, start_ns: i64, cfg: SimConfig) -> Sim {
        Sim::build(app, seed, start_ns, cfg, true)
    }

    /// The cluster the app runs on without the app's objects: clients deploy them (the programs
    /// their images run are the app's, recognised as when the simulator deploys them itself).
    pub fn new_bare(app: &AppSpec, seed: u64, start_ns: i64, cfg: SimConfig) -> Sim {
        Sim::build(app, seed, start_ns, cfg, false)
    }

    fn build(app: &AppSpec, seed: u64, start_ns: i64, cfg: SimConfig, deployed: bool) -> Sim {
        let warmup = 180;
        let mut world = World::new(
            seed,
            start_ns - warmup * NS_PER_SEC,
            runtime::Runtime::new(),
        );
        if deployed {
            bootstrap::build(&mut world, app);
        } else {
            bootstrap::build_cluster(&mut world, app);
        }
        let mut sim = Sim {
            workload: workload::Workload::new(app, cfg.trace_sample),
            world,
            app: app.clone(),
            cfg,
            alerts: alerts::Alerts::default(),
            next_scrape: start_ns,
            namespaces: vec![app.namespace.clone(), bootstrap::KUBE_SYSTEM.to_string()],
        };
        // The app was deployed a while ago: let it settle, without capturing.
        for _ in 0..warmup {
            sim.advance(false);
        }
        sim.world.now = start_ns;
        sim.world.restart_capture();
        sim.world.flush_objects();
        sim.world.out.extend(telemetry::metadata_rows());
        sim
    }

    /// Current virtual time in nanoseconds.
    pub fn now(&self) -> i64 {
        self.world.now
    }

    /// One second of cluster life; `capture` turns telemetry on.
    fn advance(&mut self, capture: bool) {
        let effects = flags::Effects::read(&self.world, &self.app);
        controllers::reconcile(&mut self.world);
        kubelet::sync(&mut self.world, &self.app, &effects, NS_PER_SEC);
        lifetimes::expire(&mut self.world, &self.app);
        let epoch = self.world.epoch;
        self.workload
            .step(&mut self.world, &self.app, &effects, epoch);
        // Client pods' commands run once the workload they may probe has moved this second.
        shell::main::run_started(self);
        if capture && self.world.now >= self.next_scrape {
            let mut rows = std::mem::take(&mut self.world.out);
            telemetry::scrape(
                &self.world,
                &self.app,
                &self.workload,
                &self.namespaces,
                &mut rows,
            );
            self.alerts.evaluate(
                &self.world,
                &self.app,
                &self.workload,
                &self.namespaces,
                &mut rows,
            );
            self.world.out = rows;
            self.next_scrape += self.cfg.scrape_interval * NS_PER_SEC;
        }
        if capture {
            self.world.flush_objects();
        } else {
            self.world.out.clear();
        }
        self.world.now += NS_PER_SEC;
    }

    /// Advances one second, capturing everything.
    pub fn step(&mut self) {
        self.advance(true);
    }

    /// Rows produced since the last call.
    pub fn drain(&mut self) -> Vec<Row> {
        std::mem::take(&mut self.world.out)
    }

    /// Alerts firing now: (alert name, labels).
    pub fn firing_alerts(&self) -> Vec<(&str, &schemas::tables::Labels)> {
        self.alerts.firing(self.world.now)
    }

    /// Load generator totals so far: (requests, failed).
    pub fn entry_totals(&self) -> (f64, f64) {
        self.workload.entry
    }
}
