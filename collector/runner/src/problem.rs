//! One problem running in the simulator, a second at a time: a healthy baseline, the faults (and
//! decoys) at their onsets, the noise schedule, the faulty period. [`ProblemRun`] is the steppable
//! run a live environment ticks with the wall clock; [`simulate`] runs it to the end at full speed
//! for a snapshot.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use chrono::Duration;
use problems::{AppSpec, Catalog, Dur, NoiseProfile, ProblemSpec, Target};
use schemas::ground_truth::{Injection, NoiseEvent};
use schemas::manifest::TimeWindow;
use schemas::tables::Row;

use sim::faults::{self, Undo};
use sim::util::{NS_PER_SEC, instant};
use sim::{Sim, SimConfig};

/// First instant of seed 0's window; each seed starts an hour later (within a month).
const EPOCH_SECS: i64 = 1_793_610_000;

/// How to run a problem.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// Length of the run, baseline included; the problem's own duration when absent.
    pub duration: Option<Dur>,
    /// Turn the problem's noise profile off.
    pub no_noise: bool,
    pub sim: SimConfig,
    /// The simulated clock's start (ns since the Unix epoch). A fixed instant per seed when
    /// absent, so that a dataset is the same whenever it is made; a live environment starts it
    /// so that its "now" is the wall clock's, as every time a container prints must be.
    pub start_ns: Option<i64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            duration: None,
            no_noise: false,
            sim: SimConfig::default(),
            start_ns: None,
        }
    }
}

/// A run's length and how its baseline and the problem's times scale to it.
struct Scale {
    total_secs: i64,
    scale: f64,
    baseline: i64,
}

impl Scale {
    fn of(problem: &ProblemSpec, opts: &Options) -> anyhow::Result<Scale> {
        let total = opts.duration.unwrap_or(problem.duration);
        let total_secs = (total.as_millis() / 1000) as i64;
        if total_secs < 30 {
            bail!(
                "--duration {total} is too short: a run needs at least 30s (a baseline and a faulty period)"
            );
        }
        if total > problems::MAX_RUN_DURATION {
            bail!(
                "--duration {total} is longer than the limit of {} of simulated time",
                problems::MAX_RUN_DURATION
            );
        }
        // A shorter run keeps the problem's proportions.
        let scale =
            (total.as_millis() as f64 / problem.duration.as_millis().max(1) as f64).min(1.0);
        let baseline = scaled(problem.baseline, scale).max(10);
        Ok(Scale {
            total_secs,
            scale,
            baseline,
        })
    }
}

/// When the first (non-decoy) fault of `problem` is applied, in seconds since the run's start
/// (the end of the baseline when it injects none); what [`ProblemRun::onset_secs`] says of a
/// run built with `opts`, known before building it.
pub fn onset_secs(problem: &ProblemSpec, opts: &Options) -> anyhow::Result<i64> {
    let s = Scale::of(problem, opts)?;
    let applies = problem
        .injections()
        .filter(|(_, decoy)| !decoy)
        .map(|(f, _)| s.baseline + scaled(f.onset, s.scale));
    Ok(applies.min().unwrap_or(s.baseline))
}

/// What happened in a run, for the evaluator record.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub window: TimeWindow,
    pub namespaces: Vec<String>,
    pub injections: Vec<Injection>,
    pub noise: Vec<NoiseEvent>,
    /// Earliest fault onset (ns); the faulty period starts here.
    pub onset_ns: i64,
    pub simulated_secs: i64,
    /// Load generator requests and failures over the run.
    pub entry: (f64, f64),
}

#[derive(Debug, Clone)]
enum Action {
    Apply(usize),
    Revert(usize),
    NoiseOn(usize),
    NoiseOff(usize),
}

fn scaled(d: Dur, scale: f64) -> i64 {
    (d.as_millis() as f64 * scale / 1000.0).round() as i64
}

/// A problem in progress: the simulation, its schedule of fault and noise actions (in seconds
/// since the start), and what has been applied so far.
#[derive(Clone)]
pub struct ProblemRun {
    pub sim: Sim,
    pub problem: ProblemSpec,
    start_ns: i64,
    /// Seconds simulated so far.
    elapsed: i64,
    baseline: i64,
    injections: Vec<(problems::FaultSpec, bool)>,
    noise_plan: Vec<problems::noise::PlannedNoise>,
    actions: Vec<(i64, Action)>,
    next: usize,
    undos: Vec<Option<Undo>>,
    noise_undos: Vec<Option<Undo>>,
    records: Vec<Injection>,
    record_of: Vec<Option<usize>>,
    /// Server-side p99 latency of each service summed over the healthy baseline, and the count
    /// of seconds summed: what a fixed system must return to.
    baseline_latency: BTreeMap<String, (f64, u32)>,
    /// Someone else changes this world too (a live environment's clients): a fault whose target
    /// they removed before its onset is skipped, not an error.
    shared: bool,
}

impl ProblemRun {
    /// Builds the simulation and the schedule. `total_secs` is the length of the schedule (the
    /// run's duration, baseline included), which scales a shortened problem.
    pub fn new(catalog: &Catalog, problem: &ProblemSpec, opts: &Options) -> anyhow::Result<Self> {
        Self::build(catalog, problem, opts, true)
    }

    /// The same without the app's objects in the cluster (see [`Sim::new_bare`]): for a problem
    /// with nothing injected, onto which clients deploy the app.
    pub fn new_bare(
        catalog: &Catalog,
        problem: &ProblemSpec,
        opts: &Options,
    ) -> anyhow::Result<Self> {
        if problem.injections().next().is_some() {
            bail!(
                "problem `{}` injects faults into the app's objects: it needs the app deployed",
                problem.id
            );
        }
        Self::build(catalog, problem, opts, false)
    }

    fn build(
        catalog: &Catalog,
        problem: &ProblemSpec,
        opts: &Options,
        deployed: bool,
    ) -> anyhow::Result<Self> {
        let app = app_of(catalog, problem)?;
        let Scale {
            total_secs,
            scale,
            baseline,
        } = Scale::of(problem, opts)?;
        let start_ns = opts
            .start_ns
            .unwrap_or((EPOCH_SECS + (opts.seed % 720) as i64 * 3600) * NS_PER_SEC);
        let sim = if deployed {
            Sim::new(app, opts.seed, start_ns, opts.sim.clone())
        } else {
            Sim::new_bare(app, opts.seed, start_ns, opts.sim.clone())
        };

        let injections: Vec<(problems::FaultSpec, bool)> = problem
            .injections()
            .map(|(f, decoy)| (f.clone(), decoy))
            .collect();
        let mut actions: Vec<(i64, Action)> = vec![];
        for (i, (f, _)) in injections.iter().enumerate() {
            let at = baseline + scaled(f.onset, scale);
            actions.push((at, Action::Apply(i)));
            if let Some(d) = f.duration {
                actions.push((at + scaled(d, scale).max(1), Action::Revert(i)));
            }
        }
        let noise_plan = if opts.no_noise {
            vec![]
        } else {
            noise_schedule(catalog, problem, app, opts.seed, total_secs)?
        };
        for (i, n) in noise_plan.iter().enumerate() {
            actions.push(((n.start.as_millis() / 1000) as i64, Action::NoiseOn(i)));
            actions.push(((n.end.as_millis() / 1000) as i64, Action::NoiseOff(i)));
        }
        // Stable order: by time, reverts before applies at the same instant.
        actions.sort_by_key(|(t, a)| {
            (
                *t,
                match a {
                    Action::Revert(_) | Action::NoiseOff(_) => 0,
                    _ => 1,
                },
            )
        });
        Ok(ProblemRun {
            sim,
            problem: problem.clone(),
            start_ns,
            elapsed: 0,
            baseline,
            undos: vec![None; injections.len()],
            noise_undos: vec![None; noise_plan.len()],
            record_of: vec![None; injections.len()],
            records: vec![],
            injections,
            noise_plan,
            actions,
            next: 0,
            baseline_latency: BTreeMap::new(),
            shared: false,
        })
    }

    /// Marks the world as changed by clients too (see `shared`).
    pub fn share(&mut self) {
        self.shared = true;
    }

    /// Seconds simulated so far.
    pub fn elapsed_secs(&self) -> i64 {
        self.elapsed
    }

    /// When the first (non-decoy) fault is scheduled (ns): where the faulty period starts, known
    /// before the run gets there (a run applies each fault at its scheduled second).
    pub fn onset_ns(&self) -> i64 {
        self.start_ns + self.onset_secs() * NS_PER_SEC
    }

    /// When the first (non-decoy) fault is scheduled, in seconds since the start.
    pub fn onset_secs(&self) -> i64 {
        self.actions
            .iter()
            .find_map(|(t, a)| match a {
                Action::Apply(i) if !self.injections[*i].1 => Some(*t),
                _ => None,
            })
            .unwrap_or(self.baseline)
    }

    /// Applies what is due, simulates one second and hands its rows to `sink`.
    pub fn step(&mut self, sink: &mut dyn FnMut(Row) -> anyhow::Result<()>) -> anyhow::Result<()> {
        while let Some((at, action)) = self.actions.get(self.next).cloned() {
            if at > self.elapsed {
                break;
            }
            self.act(&action)?;
            self.next += 1;
        }
        self.sim.step();
        for row in self.sim.drain() {
            sink(row)?;
        }
        if self.elapsed < self.baseline {
            for (service, (_, _, p99)) in &self.sim.workload.service_health {
                let e = self.baseline_latency.entry(service.clone()).or_default();
                e.0 += p99;
                e.1 += 1;
            }
        }
        self.elapsed += 1;
        Ok(())
    }

    /// Mean server-side p99 latency (seconds) of each service over the healthy baseline.
    pub fn baseline_p99(&self) -> BTreeMap<String, f64> {
        self.baseline_latency
            .iter()
            .map(|(s, (sum, n))| (s.clone(), sum / f64::from((*n).max(1))))
            .collect()
    }

    /// Ends the noise in this run (a fork being graded): active noise is reverted and none is
    /// left scheduled, so that only the faults and what was done about them decide the grade.
    pub fn quiet_noise(&mut self) {
        for u in self.noise_undos.iter_mut().filter_map(Option::take) {
            faults::revert(&mut self.sim.world, u);
        }
        let next = self.next;
        let mut i = 0;
        self.actions.retain(|(_, a)| {
            i += 1;
            i <= next || !matches!(a, Action::NoiseOn(_) | Action::NoiseOff(_))
        });
    }

    /// Schedules the timed faults (the triggers of a metastable failure) once more from now,
    /// each for its duration; returns the seconds until the last of them is reverted.
    pub fn replay_triggers(&mut self) -> i64 {
        let now = self.elapsed;
        let mut last = 0;
        let mut due = vec![];
        for (i, (f, decoy)) in self.injections.iter().enumerate() {
            if let (Some(d), false) = (f.duration, decoy) {
                let secs = (d.as_millis() / 1000).max(1) as i64;
                due.push((now, Action::Apply(i)));
                due.push((now + secs, Action::Revert(i)));
                last = last.max(secs);
            }
        }
        let mut pending = self.actions.split_off(self.next);
        pending.extend(due);
        pending.sort_by_key(|(t, a)| (*t, !matches!(a, Action::Revert(_) | Action::NoiseOff(_))));
        self.actions.extend(pending);
        last
    }

    fn act(&mut self, action: &Action) -> anyhow::Result<()> {
        let sim = &mut self.sim;
        match *action {
            Action::Apply(i) => {
                let (f, decoy) = &self.injections[i];
                let applied =
                    faults::apply(&mut sim.world, &sim.app, &f.primitive).with_context(|| {
                        format!(
                            "problem `{}`: cannot apply {} #{} ({})",
                            self.problem.id,
                            if *decoy { "decoy" } else { "fault" },
                            i,
                            f.primitive.name()
                        )
                    });
                let undo = match applied {
                    Ok(undo) => undo,
                    Err(e) if self.shared => {
                        tracing::warn!("{e:#}: its target was changed by a client; skipped");
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                self.undos[i] = Some(undo);
                self.record_of[i] = Some(self.records.len());
                self.records.push(Injection {
                    primitive: f.primitive.name().to_string(),
                    target: f.primitive.target_ref(),
                    params: f.primitive.params(),
                    onset: instant(sim.now()),
                    reverted: None,
                    decoy: *decoy,
                });
            }
            Action::Revert(i) => {
                if let Some(u) = self.undos[i].take() {
                    faults::revert(&mut sim.world, u);
                    if let Some(r) = self.record_of[i] {
                        self.records[r].reverted = Some(instant(sim.now()));
                    }
                }
            }
            Action::NoiseOn(i) => {
                let n = &self.noise_plan[i];
                self.noise_undos[i] = Some(faults::apply_noise(
                    &mut sim.world,
                    &sim.app,
                    &n.kind,
                    &n.target,
                ));
            }
            Action::NoiseOff(i) => {
                if let Some(u) = self.noise_undos[i].take() {
                    faults::revert(&mut sim.world, u);
                }
            }
        }
        Ok(())
    }

    /// The run so far, for the evaluator record. The window ends 30 s after the last simulated
    /// second, so that the last step's rows (log lines inside it, spans ending after it) lie in it.
    pub fn outcome(&self) -> Outcome {
        let start_ns = self.start_ns;
        let end_ns = start_ns + (self.elapsed + 30) * NS_PER_SEC;
        let onset_ns = self
            .records
            .iter()
            .filter(|r| !r.decoy)
            .map(|r| r.onset.timestamp_nanos_opt().unwrap_or(0))
            .min()
            .unwrap_or(start_ns + self.baseline * NS_PER_SEC);
        Outcome {
            window: TimeWindow {
                start: instant(start_ns),
                end: instant(end_ns),
            },
            namespaces: self.sim.namespaces.clone(),
            injections: self.records.clone(),
            noise: self
                .noise_plan
                .iter()
                .filter(|n| ((n.start.as_millis() / 1000) as i64) < self.elapsed)
                .map(|n| NoiseEvent {
                    kind: n.kind.name().to_string(),
                    target: format!("deployment/{}", n.target),
                    start: instant(start_ns) + Duration::milliseconds(n.start.as_millis() as i64),
                    end: instant(start_ns) + Duration::milliseconds(n.end.as_millis() as i64),
                })
                .collect(),
            onset_ns,
            simulated_secs: self.elapsed,
            entry: self.sim.entry_totals(),
        }
    }
}

fn app_of<'c>(catalog: &'c Catalog, problem: &ProblemSpec) -> anyhow::Result<&'c AppSpec> {
    catalog.app(&problem.application).with_context(|| {
        format!(
            "problem `{}` names application `{}`, which the catalog does not have",
            problem.id, problem.application
        )
    })
}

/// The problem's noise over a run of `total_secs` from `seed`, on services other than the faults'
/// targets when the profile asks (the same schedule on the simulator and on a cluster).
pub fn noise_schedule(
    catalog: &Catalog,
    problem: &ProblemSpec,
    app: &AppSpec,
    seed: u64,
    total_secs: i64,
) -> anyhow::Result<Vec<problems::noise::PlannedNoise>> {
    if problem.noise == problems::noise::NO_NOISE {
        return Ok(vec![]);
    }
    let profile: &NoiseProfile = catalog.noise(&problem.noise).with_context(|| {
        format!(
            "problem `{}` names noise profile `{}`, which the catalog does not have",
            problem.id, problem.noise
        )
    })?;
    let avoid: Vec<&str> = if profile.avoid_fault_targets {
        problem
            .injections()
            .flat_map(|(f, _)| f.primitive.targets())
            .filter_map(|t| match t {
                Target::Service(s) => Some(s),
                _ => None,
            })
            .collect()
    } else {
        vec![]
    };
    let candidates: Vec<&str> = app
        .services
        .iter()
        .filter(|s| {
            !matches!(
                s.role,
                problems::app::Role::Loadgen | problems::app::Role::Infra
            )
        })
        .map(|s| s.name.as_str())
        .filter(|s| !avoid.contains(s))
        .collect();
    Ok(profile.schedule(seed, Dur::from_secs(total_secs as u64), &candidates))
}

/// Runs `problem` to its end and hands every row to `sink`; `progress` gets (simulated seconds
/// done, total).
pub fn simulate(
    catalog: &Catalog,
    problem: &ProblemSpec,
    opts: &Options,
    sink: &mut dyn FnMut(Row) -> anyhow::Result<()>,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<Outcome> {
    let run = ProblemRun::new(catalog, problem, opts)?;
    run_to_end(run, problem, opts, sink, progress)
}

/// Steps a run built for `problem` and `opts` to its end.
pub fn run_to_end(
    mut run: ProblemRun,
    problem: &ProblemSpec,
    opts: &Options,
    sink: &mut dyn FnMut(Row) -> anyhow::Result<()>,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<Outcome> {
    let total_secs = (opts.duration.unwrap_or(problem.duration).as_millis() / 1000) as i64;
    for t in 0..total_secs {
        run.step(sink)?;
        progress((t + 1) as u64, total_secs as u64);
    }
    Ok(run.outcome())
}
