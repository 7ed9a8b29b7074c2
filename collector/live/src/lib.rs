//! The live environment (`collector env up`): a problem running in the simulator in real time
//! behind the Kubernetes, Prometheus, Jaeger and Loki APIs, the Kubernetes API writable.
//!
//! The history before "now" (a healthy baseline, the fault's onset, some minutes of the failure)
//! is simulated at full speed before the APIs open, so that an agent arriving finds history in
//! every signal. Then a ticker thread advances the world with the wall clock (times `speed`),
//! routing each simulated second's rows into the live stores every API reads; clients' writes
//! change the same world under the same lock. When the environment stops, everything it
//! produced can be written as a normal dataset, ground truth beside it.
//!
//! Every request to the four APIs is recorded as a Kubernetes audit event (`apis::audit`). The
//! events wait in memory, out of every API's reach, and become the dataset's `audit` table when
//! the run is kept (without `--out` nothing is recorded).

mod exec;
pub mod mitigation;
pub mod proof;
mod stores;
mod writes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use problems::{Catalog, Dur, ProblemSpec};
use schemas::time::{Clock, LiveNow, real_now_ns};

use apis::audit::layer::{AuditLog, AuditSink, audited};
use apis::audit::{Api, AuditEvent};
use apis::jaeger::{self, JaegerFacade};
use apis::kube::{KubeFacade, router as kube_router};
use apis::loki::{self, LokiFacade};
use apis::prometheus;
use apis::replay::Endpoints;
use runner::problem::{Options, ProblemRun};
use sim::util::NS_PER_SEC;
pub use stores::LiveStores;
use writes::LiveCluster;

/// How to run a live environment.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub seed: u64,
    /// Virtual seconds per wall-clock second.
    pub speed: f64,
    /// How long the failure has been going on when the APIs open.
    pub since_onset: Dur,
    pub no_noise: bool,
    /// Host and first port (Kubernetes; then Prometheus, Jaeger, Loki); port 0 picks free ports.
    pub listen: SocketAddr,
    /// Keep the run as a dataset in this directory.
    pub out: Option<PathBuf>,
    /// Keep a recording of every row as it comes, for the analysis tools of a session (the
    /// tables so far, readable while the run goes on).
    pub record: bool,
    /// Start the cluster without the app's objects (clients deploy them).
    pub bare: bool,
    /// What one request to the APIs may cost.
    pub limits: apis::limits::Limits,
}

/// A running environment.
pub struct LiveEnv {
    pub endpoints: Endpoints,
    pub problem: ProblemSpec,
    run: Arc<Mutex<ProblemRun>>,
    stores: Arc<LiveStores>,
    clock: Clock,
    out: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
    servers: Vec<tokio::task::JoinHandle<std::io::Result<()>>>,
    /// The audit events, when the run is kept.
    audit: Option<mpsc::Receiver<AuditEvent>>,
}

/// How virtual time follows the wall clock: `speed` virtual seconds per wall second from
/// `virtual_start` at `started`. The simulation steps whole seconds as they fall due; the pace
/// places a request within the second it arrived in.
#[derive(Debug, Clone, Copy)]
struct Pace {
    started: Instant,
    virtual_start: i64,
    speed: f64,
}

impl Pace {
    /// The virtual time due at this instant of the wall clock.
    fn due(&self) -> i64 {
        self.virtual_start + (self.started.elapsed().as_secs_f64() * self.speed * 1e9) as i64
    }

    /// The virtual time of a request arriving now: inside the simulated second the world stands
    /// at (`sim_now`), as far into it as the wall clock says (the world may be behind).
    fn request_time(&self, sim_now: i64) -> i64 {
        self.due()
            .clamp(sim_now, sim_now.saturating_add(NS_PER_SEC - 1))
    }
}

impl LiveEnv {
    /// Simulates the history, opens the APIs and starts the clock.
    pub async fn start(
        catalog: &Catalog,
        problem: &ProblemSpec,
        opts: &LiveOptions,
    ) -> anyhow::Result<LiveEnv> {
        if !(opts.speed > 0.0 && opts.speed <= 1000.0) {
            bail!(
                "--speed {}: expected a factor above 0 and at most 1000",
                opts.speed
            );
        }
        let dataset = match &opts.out {
            Some(out) => Some(runner::snapshot::create_dataset(out)?),
            None => None,
        };
        let recording = if opts.record {
            Some(Arc::new(recording()?))
        } else {
            None
        };
        let stores = Arc::new(LiveStores::new(dataset, recording));
        let mut run_opts = Options {
            seed: opts.seed,
            no_noise: opts.no_noise,
            ..Options::default()
        };
        // The history ends at the wall clock's now: a container's `date`, its log lines and
        // its HTTP answers tell the same time as the API.
        let onset = runner::problem::onset_secs(problem, &run_opts)?;
        let history = onset + (opts.since_onset.as_millis() / 1000) as i64;
        run_opts.start_ns = Some(real_now_ns() - history * NS_PER_SEC);
        let mut run = if opts.bare {
            ProblemRun::new_bare(catalog, problem, &run_opts)?
        } else {
            ProblemRun::new(catalog, problem, &run_opts)?
        };
        run.share();
        debug_assert_eq!(run.onset_secs(), onset);
        let route_stores = stores.clone();
        let mut sink_rows = Vec::new();
        for _ in 0..history {
            run.step(&mut |row| {
                sink_rows.push(row);
                Ok(())
            })?;
            route_stores.route(std::mem::take(&mut sink_rows))?;
        }
        let virtual_now = run.sim.now();
        let now = LiveNow::leak(virtual_now);
        // Served times are wall-clock times at 1x: shifted by the distance between the two now.
        let clock = Clock::live(now, real_now_ns() - virtual_now);
        let pace = Pace {
            started: Instant::now(),
            virtual_start: virtual_now,
            speed: opts.speed,
        };
        let (audit_log, audit) = audit_log(clock, now, pace, opts.out.is_some());
        let run = Arc::new(Mutex::new(run));
        let mut kube =
            KubeFacade::new(stores.objects.clone(), stores.logs.clone(), clock, &kinds());
        kube.metrics = Some(stores.metrics.clone());
        kube.writer = Some(Arc::new(LiveCluster {
            run: run.clone(),
            stores: stores.clone(),
        }));
        let containers = Arc::new(exec::LiveContainers { run: run.clone() });
        kube.exec = Some(containers.clone());
        kube.ports = Some(containers);
        let traces = Arc::new(JaegerFacade {
            spans: stores.spans.clone(),
            clock,
            max_traces: opts.limits.max_traces,
        });
        let logs = Arc::new(LokiFacade::new(
            stores.logs.clone(),
            stores.objects.clone(),
            clock,
        ));
        let routers = [
            audited(
                kube_router(Arc::new(kube)),
                Api::Kubernetes,
                audit_log.clone(),
            ),
            audited(
                prometheus::router(
                    stores.metrics.clone(),
                    stores.alerts.clone(),
                    clock,
                    &opts.limits,
                ),
                Api::Prometheus,
                audit_log.clone(),
            ),
            audited(jaeger::router(traces), Api::Jaeger, audit_log.clone()),
            audited(loki::router(logs), Api::Loki, audit_log),
        ];
        let (endpoints, servers) = apis::replay::listen(opts.listen, routers).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (run, stores, stop) = (run.clone(), stores.clone(), stop.clone());
            std::thread::Builder::new()
                .name("live-ticker".into())
                .spawn(move || tick(&run, &stores, now, pace, &stop))
                .context("starting the simulation thread")?
        };
        Ok(LiveEnv {
            endpoints,
            problem: problem.clone(),
            run,
            stores,
            clock,
            out: opts.out.clone(),
            stop,
            ticker: Some(ticker),
            servers,
            audit,
        })
    }

    /// The tables recorded so far, for the analysis tools, served by the environment's clock
    /// (when started with `record`).
    pub fn analysis(&self) -> Option<analysis::Source> {
        let recording: Arc<dyn analysis::Tables> = self.stores.recording.clone()?;
        Some(analysis::Source::new(recording, self.clock))
    }

    /// Virtual seconds simulated so far.
    pub fn elapsed_secs(&self) -> i64 {
        self.run
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed_secs()
    }

    /// A copy of the world as it is now, to fast-forward without touching the live one.
    pub fn fork(&self) -> ProblemRun {
        self.run.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The ground truth, kept in memory (it is written beside the dataset when the run stops).
    pub fn ground_truth(&self) -> schemas::GroundTruth {
        ground_truth_of(&self.run.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The application the problem runs in.
    pub fn app(&self) -> problems::AppSpec {
        self.run
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sim
            .app
            .clone()
    }

    /// Stops the clock and the APIs; writes the dataset and ground truth when asked to keep
    /// the run.
    pub async fn stop(mut self) -> anyhow::Result<Stopped> {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.ticker.take() {
            let result = tokio::task::spawn_blocking(move || t.join())
                .await
                .context("waiting for the simulation thread")?;
            match result {
                Ok(r) => r.context("the simulation stopped with an error")?,
                Err(_) => bail!("the simulation thread panicked"),
            }
        }
        for s in &self.servers {
            s.abort();
        }
        // The session's tools may still hold the recording: its files go now.
        if let Some(r) = &self.stores.recording {
            r.close();
        }
        let writer = self
            .stores
            .dataset
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(mut writer) = writer else {
            return Ok(Stopped::default());
        };
        writer.include(schemas::tables::Table::Audit);
        let audit: Vec<AuditEvent> = self.audit.iter().flat_map(|a| a.try_iter()).collect();
        for event in &audit {
            writer.push(schemas::tables::Row::Audit(event.to_row()))?;
        }
        let run = self.run.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let out = self
            .out
            .clone()
            .context("a dataset is written only with --out")?;
        let dir = finish_dataset(writer, &run, &out)?;
        Ok(Stopped {
            dataset: Some(dir),
            audit,
        })
    }
}

/// What a stopped environment leaves.
#[derive(Debug, Default)]
pub struct Stopped {
    /// The dataset directory, when the run was kept.
    pub dataset: Option<PathBuf>,
    /// Every request the APIs answered, in order (kept runs only).
    pub audit: Vec<AuditEvent>,
}

/// The audit log the four APIs share, and where its events wait until the run is written (none
/// when the run is not kept: events are then dropped as they come).
fn audit_log(
    clock: Clock,
    now: &'static LiveNow,
    pace: Pace,
    keep: bool,
) -> (Arc<AuditLog>, Option<mpsc::Receiver<AuditEvent>>) {
    let (sink, events): (AuditSink, _) = if keep {
        let (tx, rx) = mpsc::channel();
        // A send on an unbounded channel never waits; it fails only once the environment has
        // stopped reading, when the event has nowhere to go anyway.
        (
            Arc::new(move |e: AuditEvent| {
                let _ = tx.send(e);
            }),
            Some(rx),
        )
    } else {
        (Arc::new(|_: AuditEvent| {}), None)
    };
    let request_time = Arc::new(move || pace.request_time(now.get()));
    (AuditLog::new(request_time, clock, sink), events)
}

/// The kinds the simulated cluster can hold, served even while none exists.
fn kinds() -> Vec<(&'static str, &'static str, bool)> {
    sim::kinds::Kind::ALL
        .iter()
        .map(|k| (k.api_version(), k.name(), k.namespaced()))
        .collect()
}

/// Advances the world with the wall clock until told to stop: each simulated second's rows go
/// to the stores as soon as it is done.
fn tick(
    run: &Mutex<ProblemRun>,
    stores: &LiveStores,
    now: &LiveNow,
    pace: Pace,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let due = pace.due();
        let behind = {
            let mut run = run.lock().unwrap_or_else(|e| e.into_inner());
            if run.sim.now() + NS_PER_SEC <= due {
                run.step(&mut |row| {
                    rows.push(row);
                    Ok(())
                })?;
                now.set(run.sim.now());
                // Under the world's lock, as a write's flush is: rows reach the stores in the
                // order the world produced them.
                stores.route(std::mem::take(&mut rows))?;
                true
            } else {
                false
            }
        };
        if behind {
            continue;
        }
        // Nothing due: wait for the next simulated second (or a stop), in short naps so that a
        // stop is noticed quickly.
        let wait = Duration::from_secs_f64((1.0 / pace.speed).min(0.05));
        std::thread::sleep(wait);
    }
    Ok(())
}

/// A recording in a fresh directory under the system's temporary directory (removed with it).
fn recording() -> anyhow::Result<datasets::Recording> {
    let dir = std::env::temp_dir().join(format!(
        "faultline-recording-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let recording = datasets::Recording::create(&dir)
        .with_context(|| format!("cannot start a recording in {}", dir.display()))?;
    // The recording holds every object's history, the fault's change included: no other user of
    // the machine (an agent run as one) may read it.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("making {} private", dir.display()))?;
    Ok(recording)
}

/// Writes the manifest and, beside the dataset, the ground truth of what ran.
fn finish_dataset(
    writer: datasets::DatasetWriter,
    run: &ProblemRun,
    out: &std::path::Path,
) -> anyhow::Result<PathBuf> {
    let outcome = run.outcome();
    let app = &run.sim.app;
    let dir = out.join("dataset");
    writer
        .finish(datasets::DatasetInfo {
            environment: "sim-live".into(),
            application: Some(app.name.clone()),
            namespaces: outcome.namespaces.clone(),
            window: outcome.window,
            virtual_now: outcome.window.end,
        })
        .with_context(|| format!("cannot finish dataset {}", dir.display()))?;
    let gt = ground_truth_of(run);
    datasets::write_atomically(
        &out.join("ground_truth.json"),
        &serde_json::to_vec_pretty(&gt)?,
    )?;
    Ok(dir)
}

/// The ground truth of what runs: the problem's, placed in the app's namespace and the run's window.
fn ground_truth_of(run: &ProblemRun) -> schemas::GroundTruth {
    run.problem
        .ground_truth(&run.sim.app.namespace, run.outcome().window.start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_placed_inside_the_second_the_world_stands_at() {
        // Ten wall seconds ago at 1x: ten virtual seconds are due.
        let Some(started) = Instant::now().checked_sub(Duration::from_secs(10)) else {
            return;
        };
        let pace = Pace {
            started,
            virtual_start: 0,
            speed: 1.0,
        };
        let due = pace.due();
        assert!((10 * NS_PER_SEC..11 * NS_PER_SEC).contains(&due), "{due}");
        // The world is behind: the request is placed at the end of the second it sees.
        assert_eq!(pace.request_time(5 * NS_PER_SEC), 6 * NS_PER_SEC - 1);
        // The world is on time: as far into the second as the wall clock says.
        let t = pace.request_time(10 * NS_PER_SEC);
        assert!((10 * NS_PER_SEC..11 * NS_PER_SEC).contains(&t), "{t}");
        // Never before the second the world has reached.
        assert_eq!(pace.request_time(20 * NS_PER_SEC), 20 * NS_PER_SEC);
    }
}
