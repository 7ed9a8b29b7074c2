//! Problem specs: an application, the faults to inject (each a [`Primitive`] with an optional
//! onset offset and duration), harmless decoys, a noise profile, the mitigation oracle, the
//! structured ground truth and what the dataset must show.
//!
//! Time in a problem is relative: a run starts with `baseline` of healthy operation, then each
//! fault takes effect `onset` after the baseline ends, and the run lasts `duration` in all.

use std::fmt;

use chrono::{DateTime, Utc};
use schemas::ground_truth::{
    Change, Component, Fault, FaultTarget, GROUND_TRUTH_VERSION, GroundTruth, Layer, Propagation,
    Solution, Symptom,
};
use serde::{Deserialize, Serialize};

use crate::primitive::Primitive;
use crate::units::{Cpu, Dur, Memory};

/// One problem of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProblemSpec {
    /// Stable id (`[a-z0-9-]+`), the file's stem. Never written into a dataset.
    pub id: String,
    /// Name of the application spec.
    pub application: String,
    /// One line for listings.
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Healthy period before the faults' onsets are counted.
    #[serde(default = "ProblemSpec::default_baseline")]
    pub baseline: Dur,
    /// Default length of a run, baseline included.
    #[serde(default = "ProblemSpec::default_duration")]
    pub duration: Dur,
    /// Name of the noise profile (`none` for none).
    #[serde(default = "ProblemSpec::default_noise")]
    pub noise: String,
    pub faults: Vec<FaultSpec>,
    /// Harmless look-alike changes injected too; never a cause.
    #[serde(default)]
    pub decoys: Vec<FaultSpec>,
    pub oracle: OracleSpec,
    pub ground_truth: GroundTruthSpec,
    /// What the dataset must show for the problem to be diagnosable.
    pub visibility: Vec<Expectation>,
    /// How an operator fixes the problem through the Kubernetes API, for the catalog's
    /// mitigation proof. Evaluator-side like the oracle: never shown to agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_fix: Option<ReferenceFix>,
}

/// A known fix of a problem: `kubectl` command lines run in order (by `sh -c`, with KUBECONFIG
/// pointing at the environment), or why no fix is reachable through the Kubernetes API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceFix {
    #[serde(default)]
    pub commands: Vec<String>,
    /// Why the fix needs more than the Kubernetes API (then `commands` is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
}

impl ProblemSpec {
    fn default_baseline() -> Dur {
        Dur::from_secs(300)
    }
    fn default_duration() -> Dur {
        Dur::from_secs(900)
    }
    fn default_noise() -> String {
        crate::noise::DEFAULT_PROFILE.into()
    }

    /// The app running with nothing injected and no noise: a healthy cluster to inject into or
    /// deploy onto (`collector env up --app`).
    pub fn healthy(app: &str) -> ProblemSpec {
        ProblemSpec {
            id: format!("healthy-{app}"),
            application: app.to_string(),
            title: format!("{app}, healthy"),
            description: String::new(),
            tags: Vec::new(),
            baseline: Dur::from_secs(60),
            duration: Self::default_duration(),
            noise: crate::noise::NO_NOISE.into(),
            faults: Vec::new(),
            decoys: Vec::new(),
            oracle: OracleSpec {
                state: Vec::new(),
                health: HealthCondition::default(),
            },
            ground_truth: GroundTruthSpec {
                description: "nothing is injected".into(),
                components: Vec::new(),
                aliases: Vec::new(),
                faults: Vec::new(),
                propagations: Vec::new(),
                symptoms: Vec::new(),
                recommended_actions: Vec::new(),
            },
            visibility: Vec::new(),
            reference_fix: None,
        }
    }

    /// Faults then decoys, each with whether it is a decoy.
    pub fn injections(&self) -> impl Iterator<Item = (&FaultSpec, bool)> {
        self.faults
            .iter()
            .map(|f| (f, false))
            .chain(self.decoys.iter().map(|d| (d, true)))
    }

    /// Offset from the start of the run at which a fault takes effect.
    pub fn onset_offset(&self, fault: &FaultSpec) -> Dur {
        Dur::from_micros(self.baseline.as_micros() + fault.onset.as_micros())
    }

    /// Whether more than one fault acts or a fault is timed (trigger + constraint scenarios).
    pub fn is_compound(&self) -> bool {
        self.faults.len() > 1 || self.faults.iter().any(|f| f.duration.is_some())
    }

    /// Layers of the (non-decoy) faults, without duplicates, in order.
    pub fn layers(&self) -> Vec<Layer> {
        let mut out = Vec::new();
        for f in &self.faults {
            let l = f.primitive.layer();
            if !out.contains(&l) {
                out.push(l);
            }
        }
        out
    }

    /// The reference fix's command lines, or why there are none that go through the Kubernetes
    /// API (the fix needs a node or a shell, or the problem has none).
    pub fn fix_commands(&self) -> Result<&[String], String> {
        match &self.reference_fix {
            None => Err("the problem has no reference fix".into()),
            Some(f) => match &f.unreachable {
                Some(why) => Err(why.clone()),
                None => Ok(&f.commands),
            },
        }
    }

    /// The diagnosis the reference solution submits: the incident's description and its root
    /// causes by kind and name (what a correct diagnosis says; evaluator-side, like the truth).
    pub fn reference_diagnosis(&self, namespace: &str) -> String {
        let truth = self.ground_truth(namespace, DateTime::<Utc>::UNIX_EPOCH);
        let culprits: Vec<String> = truth
            .components
            .iter()
            .filter(|c| c.root_cause)
            .map(|c| {
                // A component known by a filter (the nodes `kind-worker.*`) is named by the
                // fault's target, as an SRE names what they found.
                let target = || {
                    truth
                        .faults
                        .iter()
                        .find(|f| f.target.component.as_deref() == Some(c.id.as_str()))
                        .map(|f| f.target.name.clone())
                };
                let name = c.name.clone().or_else(target).unwrap_or_default();
                format!("{} {name}", c.kind)
            })
            .collect();
        format!("{} Root cause: {}.", truth.description, culprits.join(", "))
    }

    /// The ground truth of a run whose window starts at `run_start`, in namespace `namespace`.
    pub fn ground_truth(&self, namespace: &str, run_start: DateTime<Utc>) -> GroundTruth {
        let gt = &self.ground_truth;
        let ns = |n: &Option<String>| Some(n.clone().unwrap_or_else(|| namespace.to_string()));
        GroundTruth {
            schema_version: GROUND_TRUTH_VERSION,
            description: gt.description.trim().to_string(),
            components: gt
                .components
                .iter()
                .map(|c| Component {
                    namespace: ns(&c.namespace),
                    ..c.clone()
                })
                .collect(),
            aliases: gt.aliases.clone(),
            faults: gt
                .faults
                .iter()
                .map(|f| {
                    let injected = self.faults.get(f.fault);
                    let onset =
                        injected.map(|i| {
                            run_start
                                + chrono::Duration::microseconds(
                                    self.onset_offset(i).as_micros() as i64
                                )
                        });
                    Fault {
                        target: FaultTarget {
                            namespace: ns(&f.target.namespace),
                            ..f.target.clone()
                        },
                        layer: f.layer.or(injected.map(|i| i.primitive.layer())),
                        category: f.category.clone(),
                        mechanism: f.mechanism.clone(),
                        condition: f.condition.clone(),
                        change: f.change.clone(),
                        onset,
                    }
                })
                .collect(),
            propagations: gt.propagations.clone(),
            symptoms: gt.symptoms.clone(),
            recommended_actions: gt.recommended_actions.clone(),
            extensions: Default::default(),
        }
    }
}

/// One injected change: a primitive, when it takes effect and for how long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultSpec {
    #[serde(flatten)]
    pub primitive: Primitive,
    /// Delay after the baseline before the change is made.
    #[serde(default)]
    pub onset: Dur,
    /// Reverted this long after onset (a transient trigger); stays until the end when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Dur>,
}

/// How to tell that an agent mitigated the problem: assertions on the state of the objects the
/// fault changed (so deleting or scaling to zero does not pass) plus a health condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleSpec {
    pub state: Vec<StateAssertion>,
    #[serde(default)]
    pub health: HealthCondition,
}

/// An assertion on cluster state after mitigation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "assert", rename_all = "snake_case", deny_unknown_fields)]
pub enum StateAssertion {
    /// The condition `faults[fault]` created no longer holds: its field no longer has the
    /// injected value and the object is in a working state (e.g. the targetPort is a port the
    /// container listens on, the memory limit is above the working set, the NetworkPolicy no
    /// longer blocks, the node is Ready). Reverting exactly passes; an equivalent fix does too.
    FaultCleared { fault: usize },
    /// The workload no longer runs `image`.
    ImageNot { service: String, image: String },
    /// A Service port targets `target_port`.
    TargetPortIs {
        service: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port_name: Option<String>,
        target_port: u16,
    },
    /// An environment variable has this value.
    EnvEquals {
        service: String,
        var: String,
        value: String,
    },
    /// A ConfigMap has the key (and the JSON field inside it, when given).
    ConfigMapHasKey {
        config_map: String,
        key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field: Option<String>,
    },
    /// A feature flag's default variant.
    FlagVariant { flag: String, variant: String },
    /// The memory limit is at least this (or unset).
    MemoryLimitAtLeast { service: String, limit: Memory },
    /// The CPU limit is at least this (or unset).
    CpuLimitAtLeast { service: String, limit: Cpu },
    /// The workload wants at least this many replicas (scaling to zero is not a fix).
    ReplicasAtLeast { service: String, replicas: u32 },
    /// The workload has all desired replicas ready.
    DeploymentReady { service: String },
    /// The Service exists and has ready endpoints backed by the workload's pods.
    EndpointsReady { service: String },
    /// The node is Ready.
    NodeReady { node: String },
}

/// The health the system must be back to, held for `sustain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCondition {
    /// Every pod of the app Running with all containers ready.
    #[serde(default = "yes")]
    pub all_pods_ready: bool,
    /// Highest error ratio of the load generator's requests.
    #[serde(default = "HealthCondition::default_error_ratio")]
    pub max_error_ratio: f64,
    /// Highest p99 latency of the load generator's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p99_latency: Option<Dur>,
    /// No alert of the app's namespace firing (except `exclude_alerts`).
    #[serde(default)]
    pub no_firing_alerts: bool,
    #[serde(default)]
    pub exclude_alerts: Vec<String>,
    /// How long the condition must hold.
    #[serde(default = "HealthCondition::default_sustain")]
    pub sustain: Dur,
    /// Replay the timed trigger faults after mitigation: the system must absorb them (metastable
    /// problems, where removing the trigger alone does not fix the vulnerability).
    #[serde(default)]
    pub replay_trigger: bool,
}

fn yes() -> bool {
    true
}

impl HealthCondition {
    fn default_error_ratio() -> f64 {
        0.01
    }
    fn default_sustain() -> Dur {
        Dur::from_secs(60)
    }
}

impl Default for HealthCondition {
    fn default() -> Self {
        HealthCondition {
            all_pods_ready: true,
            max_error_ratio: Self::default_error_ratio(),
            max_p99_latency: None,
            no_firing_alerts: false,
            exclude_alerts: Vec::new(),
            sustain: Self::default_sustain(),
            replay_trigger: false,
        }
    }
}

/// The ground truth as written in a spec; [`ProblemSpec::ground_truth`] turns it into a
/// [`GroundTruth`] for a run (namespaces filled in, onsets from the run's clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroundTruthSpec {
    pub description: String,
    /// Components; a missing namespace means the app's namespace.
    pub components: Vec<Component>,
    #[serde(default)]
    pub aliases: Vec<Vec<String>>,
    pub faults: Vec<GroundTruthFault>,
    #[serde(default)]
    pub propagations: Vec<Propagation>,
    #[serde(default)]
    pub symptoms: Vec<Symptom>,
    #[serde(default)]
    pub recommended_actions: Vec<Solution>,
}

/// A fault of the ground truth, tied to the injected fault it describes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroundTruthFault {
    /// Index into the problem's `faults` (for the onset and the default layer).
    #[serde(default)]
    pub fault: usize,
    pub target: FaultTarget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<Layer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub mechanism: String,
    #[serde(default)]
    pub condition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
}

/// Something the dataset must show, checked by the snapshot over its own tables (evaluator side).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case", deny_unknown_fields)]
pub enum Expectation {
    /// `kube_pod_container_status_restarts_total` of the service's pods rose by at least `min`.
    Restarts { service: String, min: u32 },
    /// The Service had no ready endpoint addresses during the faulty period.
    EndpointsEmpty { service: String },
    /// The Service's ready endpoint addresses included pods of `other` service during the faulty
    /// period (a selector that also matches another workload's pods).
    EndpointsInclude { service: String, other: String },
    /// Spans of `service` with error status (calling `peer`, when given).
    ErrorSpans {
        service: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer: Option<String>,
    },
    /// A Kubernetes Event with this reason on the service's pods/workload or on the node.
    Event {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        /// `Warning` (default) or `Normal`.
        #[serde(default = "Expectation::warning")]
        r#type: String,
    },
    /// The alert fired (for the service, when given).
    AlertFiring {
        alert: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service: Option<String>,
    },
    /// Some pod of the service was in this phase (`Pending`, `Failed`, `Unknown`).
    PodPhase { service: String, phase: String },
    /// A container of the service was waiting with this reason (`CrashLoopBackOff`,
    /// `ImagePullBackOff`, `ErrImagePull`, `CreateContainerConfigError`, `ContainerCreating`,
    /// `PodInitializing`); `init` for init containers.
    ContainerWaiting {
        service: String,
        reason: String,
        #[serde(default)]
        init: bool,
    },
    /// A container of the service terminated with this reason (`OOMKilled`, `Error`).
    ContainerTerminated { service: String, reason: String },
    /// A log line of the service contains `text`.
    LogContains { service: String, text: String },
    /// A counter of the service's pods (or node) increased by at least `min` over the faulty
    /// period (e.g. `container_cpu_cfs_throttled_periods_total`).
    MetricIncrease {
        metric: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        min: f64,
    },
    /// The service's server-side p99 latency exceeded this.
    LatencyAbove { service: String, p99: Dur },
    /// The service's server-side error ratio exceeded this.
    ErrorRatioAbove { service: String, ratio: f64 },
    /// The node was NotReady.
    NodeNotReady { node: String },
    /// The workload had fewer available replicas than desired.
    ReplicasUnavailable { service: String },
}

impl Expectation {
    fn warning() -> String {
        "Warning".into()
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Expectation::*;
        let opt = |o: &Option<String>| o.as_deref().map(|s| format!(" {s}")).unwrap_or_default();
        match self {
            Restarts { service, min } => write!(f, "restarts of {service} >= {min}"),
            EndpointsEmpty { service } => write!(f, "endpoints of service {service} empty"),
            EndpointsInclude { service, other } => {
                write!(f, "endpoints of service {service} include {other} pods")
            }
            ErrorSpans { service, peer } => match peer {
                Some(p) => write!(f, "error spans from {service} to {p}"),
                None => write!(f, "error spans in {service}"),
            },
            Event {
                reason,
                service,
                node,
                r#type,
            } => write!(f, "{type} event {reason} on{}{}", opt(service), opt(node)),
            AlertFiring { alert, service } => write!(f, "alert {alert} firing{}", opt(service)),
            PodPhase { service, phase } => write!(f, "pod of {service} {phase}"),
            ContainerWaiting {
                service,
                reason,
                init,
            } => {
                let which = if *init { "init container" } else { "container" };
                write!(f, "{which} of {service} waiting: {reason}")
            }
            ContainerTerminated { service, reason } => {
                write!(f, "container of {service} terminated: {reason}")
            }
            LogContains { service, text } => write!(f, "log of {service} contains {text:?}"),
            MetricIncrease {
                metric,
                service,
                node,
                min,
            } => write!(
                f,
                "{metric}{}{} increased by >= {min}",
                opt(service),
                opt(node)
            ),
            LatencyAbove { service, p99 } => write!(f, "p99 latency of {service} > {p99}"),
            ErrorRatioAbove { service, ratio } => write!(f, "error ratio of {service} > {ratio}"),
            NodeNotReady { node } => write!(f, "node {node} NotReady"),
            ReplicasUnavailable { service } => write!(f, "{service} short of available replicas"),
        }
    }
}
