//! The catalog's faults on a cluster through its Kubernetes API (`collector inject kube`), with
//! `collector env up --app`'s writable API as the cluster: every primitive that is an API change
//! injects and reverts exactly (the cluster's desired state compared field by field, read with the
//! real kubectl); kill -9 at random crash points of the injector (and of recovery itself), then
//! `collector recover`, restores it every time (read with kube-rs); a change someone else makes
//! after the fault is reported and left, never overwritten.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdout, Command, Output, Stdio};

use e2e::cluster::{self, differences, state};
use e2e::live::{self, Live};
use e2e::{binary, text};
use serde_json::Value;

const APPS: [&str; 3] = ["hotel-reservation", "astronomy-shop", "social-network"];

/// Every injection of the catalog that is an API change, on `app`: (problem, index, primitive).
fn injectable(app: &str) -> Vec<(String, usize, &'static str)> {
    let catalog = problems::Catalog::builtin().unwrap();
    let spec = catalog.app(app).unwrap();
    let mut out = Vec::new();
    for p in catalog.problems().filter(|p| p.application == app) {
        for (i, (f, _)) in p.injections().enumerate() {
            if inject::api::refusal(&f.primitive, spec).is_none() {
                out.push((p.id.clone(), i, f.primitive.name()));
            }
        }
    }
    out
}

fn namespace(app: &str) -> String {
    problems::Catalog::builtin()
        .unwrap()
        .app(app)
        .unwrap()
        .namespace
        .clone()
}

/// `collector inject kube` for one injection, with the environment's kubeconfig and a journal of
/// its own.
fn inject_cmd(l: &Live, problem: &str, index: usize) -> Command {
    inject_into(l, problem, index, &journal(l))
}

fn inject_into(l: &Live, problem: &str, index: usize, journal: &std::path::Path) -> Command {
    let mut c = Command::new(binary("collector"));
    c.args(["inject", "kube", "--json", "--problem", problem])
        .args(["--only", &index.to_string()])
        .arg("--kubeconfig")
        .arg(&l.kubeconfig)
        .arg("--journal")
        .arg(journal);
    c
}

fn journal(l: &Live) -> std::path::PathBuf {
    l.tmp.path().join("journal")
}

fn recover(l: &Live, crash_at: Option<u64>) -> Output {
    let mut c = Command::new(binary("collector"));
    c.args(["recover", "--json", "--kubeconfig"])
        .arg(&l.kubeconfig)
        .arg("--journal")
        .arg(journal(l));
    if let Some(k) = crash_at {
        c.env(inject::crash::CRASH_AT, k.to_string());
    }
    c.output().expect("collector runs")
}

fn journal_entries(l: &Live) -> usize {
    std::fs::read_dir(journal(l)).map_or(0, |d| d.count())
}

/// A held injection: the process and the JSON lines it prints.
struct Held {
    child: Child,
    lines: BufReader<ChildStdout>,
}

impl Held {
    fn start(l: &Live, problem: &str, index: usize) -> Held {
        let mut child = inject_cmd(l, problem, index)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("collector runs");
        let lines = BufReader::new(child.stdout.take().unwrap());
        Held { child, lines }
    }

    /// The next JSON line; on end of output, the process's stderr as the failure.
    fn line(&mut self) -> Value {
        let mut line = String::new();
        self.lines.read_line(&mut line).unwrap();
        if line.is_empty() {
            use std::io::Read;
            let mut err = String::new();
            if let Some(mut e) = self.child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("the injector printed nothing more: {err}");
        }
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    fn wait(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        (status, err)
    }
}

#[test]
fn every_api_primitive_injects_and_reverts_exactly() {
    let mut covered = BTreeSet::new();
    let mut expected = BTreeSet::new();
    // Injection and revert latency as the command measures them, by primitive (ms).
    let mut latency: std::collections::BTreeMap<&str, Vec<(f64, f64)>> = Default::default();
    for app in APPS {
        let l = live::up_app(app, &[]);
        let ns = namespace(app);
        for (problem, index, primitive) in injectable(app) {
            expected.insert(primitive);
            let what = format!("{problem} #{index} ({primitive})");
            let before = state(&l.kubeconfig, &ns);
            let mut held = Held::start(&l, &problem, index);
            let ready = held.line();
            assert_eq!(ready["event"], "in_effect", "{what}: {ready}");
            let during = state(&l.kubeconfig, &ns);
            let changed = differences(&before, &during);
            assert!(!changed.is_empty(), "{what} changed nothing");
            assert_eq!(
                journal_entries(&l),
                1,
                "{what}: one journal entry while in effect"
            );
            held.signal("-TERM");
            let done = held.line();
            let (status, err) = held.wait();
            assert!(status.success(), "{what}: {status:?} {err}");
            assert_eq!(done["kept"], serde_json::json!([]), "{what}: {done}");
            latency.entry(primitive).or_default().push((
                ready["inject_ms"].as_f64().expect("inject_ms"),
                done["revert_ms"].as_f64().expect("revert_ms"),
            ));
            let left = differences(&before, &state(&l.kubeconfig, &ns));
            assert!(
                left.is_empty(),
                "{what} was not reverted exactly (it changed {changed:?}):\n{}",
                left.join("\n")
            );
            assert_eq!(journal_entries(&l), 0, "{what}: the entry is removed");
            covered.insert(primitive);
        }
        l.assert_no_panic();
    }
    assert_eq!(covered, expected);
    assert!(
        covered.len() >= 30,
        "{} primitives: {covered:?}",
        covered.len()
    );
    eprintln!("primitive                      n  inject ms (median)  revert ms (median)");
    for (p, v) in latency {
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (i, r): (Vec<f64>, Vec<f64>) = v.into_iter().unzip();
        let n = i.len();
        eprintln!("{p:<30} {n:>2}  {:>18.1}  {:>18.1}", median(i), median(r));
    }
}

/// A deterministic stream of kill points (xorshift64*).
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n.max(1)
    }
}

/// How many crash points a run that ended on its own passed (its last line says).
fn crash_points(out: &Output) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().expect("the run printed its events");
    let done: Value = serde_json::from_str(last).expect("an event as JSON");
    done["crash_points"].as_u64().expect("crash_points")
}

/// Runs one injection to its end (`--for 0s`) with the crash point `at`; its output.
fn run_to(l: &Live, problem: &str, index: usize, at: u64) -> Output {
    inject_cmd(l, problem, index)
        .args(["--for", "0s"])
        .env(inject::crash::CRASH_AT, at.to_string())
        .output()
        .expect("collector runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_after_kill_9_at_random_points_restores_every_primitive() {
    let mut draw = Draw(0x5eed_0fc0_ffee);
    let mut kills = 0;
    let mut recover_kills = 0;
    let mut cycles = 0;
    let mut killed_primitives = BTreeSet::new();
    for (a, app) in APPS.iter().enumerate() {
        let l = live::up_app(app, &[]);
        let ns = namespace(app);
        let client = cluster::client(&l.kubeconfig).await;
        let cases = injectable(app);
        // How many crash points a whole run of each case passes.
        let mut points = Vec::new();
        for (problem, index, _) in &cases {
            let out = tokio::task::block_in_place(|| run_to(&l, problem, *index, u64::MAX));
            assert!(out.status.success(), "{problem} #{index}: {}", text(&out));
            points.push(crash_points(&out));
        }
        let quota = 70 * (a + 1);
        let mut case = 0;
        while kills < quota {
            let (problem, index, primitive) = &cases[case % cases.len()];
            let k = 1 + draw.below(points[case % cases.len()]);
            case += 1;
            cycles += 1;
            let what = format!("{problem} #{index} ({primitive}) killed at point {k}");
            let before = cluster::state_kube_rs(&client, &ns).await;
            let out = tokio::task::block_in_place(|| run_to(&l, problem, *index, k));
            if out.status.success() {
                // This run passed fewer points than the case's first (a write that met a
                // conflict there and was retried): it ended before point k, reverted on its
                // own. Not a kill; later draws stay below what it passed.
                let passed = crash_points(&out);
                assert!(passed < k, "{what}: ended after {passed} points");
                points[(case - 1) % cases.len()] = passed;
                let after = cluster::state_kube_rs(&client, &ns).await;
                assert_eq!(differences(&before, &after), Vec::<String>::new(), "{what}");
                continue;
            }
            assert_eq!(out.status.signal(), Some(9), "{what}: {}", text(&out));
            kills += 1;
            killed_primitives.insert(*primitive);
            // Now and then recovery itself is killed at its first undone change, and run again.
            if draw.below(4) == 0 {
                let first = tokio::task::block_in_place(|| recover(&l, Some(1)));
                if first.status.signal() == Some(9) {
                    recover_kills += 1;
                } else {
                    assert!(first.status.success(), "{what}: {}", text(&first));
                }
            }
            let out = tokio::task::block_in_place(|| recover(&l, None));
            assert!(out.status.success(), "{what}: recover: {}", text(&out));
            let report: Value = serde_json::from_slice(&out.stdout).unwrap();
            for r in report.as_array().unwrap() {
                assert_eq!(
                    r["kept"],
                    Value::Null,
                    "{what}: nobody else changed anything: {r}"
                );
            }
            let after = cluster::state_kube_rs(&client, &ns).await;
            let left = differences(&before, &after);
            assert!(
                left.is_empty(),
                "{what}: not restored:\n{}",
                left.join("\n")
            );
            assert_eq!(journal_entries(&l), 0, "{what}: the journal is empty");
            if cycles % 10 == 0 {
                let again = tokio::task::block_in_place(|| recover(&l, None));
                assert_eq!(
                    String::from_utf8_lossy(&again.stdout).trim(),
                    "[]",
                    "idempotent"
                );
            }
        }
        l.assert_no_panic();
    }
    assert!(kills >= 210, "{kills} kills");
    assert!(recover_kills > 0, "recovery itself was killed too");
    assert!(killed_primitives.len() >= 30, "{killed_primitives:?}");
    eprintln!(
        "{kills} injector kills and {recover_kills} recovery kills over {} primitives, all restored",
        killed_primitives.len()
    );
}

fn kubectl_ok(l: &Live, args: &[&str]) -> String {
    l.ok(args)
}

fn target_port(l: &Live) -> String {
    l.geo_target_port()
}

#[test]
fn a_change_made_after_the_fault_is_reported_not_overwritten() {
    let l = live::up_app("hotel-reservation", &[]);
    let ns = live::NS;
    // Revert on SIGTERM: the injector leaves someone else's targetPort and says so (exit 3).
    let mut held = Held::start(&l, "hotel-geo-target-port", 0);
    assert_eq!(held.line()["event"], "in_effect");
    assert_ne!(target_port(&l), "8083");
    kubectl_ok(
        &l,
        &[
            "-n",
            ns,
            "patch",
            "svc",
            "geo",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/ports/0/targetPort","value":7777}]"#,
        ],
    );
    held.signal("-TERM");
    let done = held.line();
    let (status, err) = held.wait();
    assert_eq!(status.code(), Some(3), "{err}");
    let kept = done["kept"].to_string();
    assert!(
        kept.contains("spec.ports[0].targetPort") && kept.contains("7777"),
        "{done}"
    );
    assert_eq!(target_port(&l), "7777", "someone else's value stays");
    assert_eq!(journal_entries(&l), 0);

    // A created NetworkPolicy edited by someone else, then kill -9: recovery leaves it and
    // reports it.
    let mut held = Held::start(&l, "hotel-recommendation-netpol", 0);
    assert_eq!(held.line()["event"], "in_effect");
    kubectl_ok(
        &l,
        &[
            "-n",
            ns,
            "patch",
            "networkpolicy",
            "recommendation-isolation",
            "--type=merge",
            "-p",
            r#"{"spec":{"podSelector":{"matchLabels":{"io.kompose.service":"frontend"}}}}"#,
        ],
    );
    held.signal("-KILL");
    let (status, _) = held.wait();
    assert_eq!(status.signal(), Some(9));
    assert_eq!(journal_entries(&l), 1);
    let out = recover(&l, None);
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report[0]["reverted"], true, "{report}");
    assert!(
        report[0]["kept"]
            .to_string()
            .contains("NetworkPolicy hotel-reservation/recommendation-isolation"),
        "{report}"
    );
    let selector = kubectl_ok(
        &l,
        &[
            "-n",
            ns,
            "get",
            "networkpolicy",
            "recommendation-isolation",
            "-o",
            "jsonpath={.spec.podSelector.matchLabels.io\\.kompose\\.service}",
        ],
    );
    assert_eq!(selector, "frontend", "the edited policy is left");
    assert_eq!(journal_entries(&l), 0);
    assert_eq!(
        String::from_utf8_lossy(&recover(&l, None).stdout).trim(),
        "[]"
    );
}

#[test]
fn node_and_kernel_faults_are_refused_before_anything_is_read() {
    let l = live::up_app("hotel-reservation", &[]);
    let before = state(&l.kubeconfig, live::NS);
    for (problem, needs) in [
        ("hotel-node-cpu-stress", "host process control"),
        ("hotel-geo-mongo-disk-errors", "BPF LSM programs"),
        ("hotel-search-geo-delay", "node agent"),
        ("hotel-geo-mongo-auth-revoked", "a database session"),
    ] {
        let out = inject_cmd(&l, problem, 0)
            .args(["--for", "0s"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{problem}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(needs) && err.contains("nothing was changed"),
            "{problem}: {err}"
        );
    }
    assert!(differences(&before, &state(&l.kubeconfig, live::NS)).is_empty());
    assert_eq!(journal_entries(&l), 0);
}

/// Every injectable fault of the three apps in effect at once (hotel-reservation twice, in two
/// clusters), each left by an injector killed right after it was applied, so the journal holds
/// over a hundred entries over four clusters: one `collector recover` restores every cluster
/// exactly, and no simulated cluster broke under the stacked faults; its time is reported.
#[test]
fn one_recover_reverts_a_journal_of_every_fault_across_four_clusters() {
    // Two clusters of one app among them: entries of the same objects in different clusters.
    let apps = [APPS[0], APPS[1], APPS[2], APPS[0]];
    let envs: Vec<(Live, String)> = apps
        .iter()
        .map(|app| (live::up_app(app, &[]), namespace(app)))
        .collect();
    let before: Vec<cluster::State> = envs
        .iter()
        .map(|(l, ns)| state(&l.kubeconfig, ns))
        .collect();
    let shared = envs[0].0.tmp.path().join("shared-journal");
    let mut applied = 0;
    let mut refused = Vec::new();
    for ((l, _), app) in envs.iter().zip(apps) {
        for (problem, index, primitive) in injectable(app) {
            let out = inject_into(l, &problem, index, &shared)
                .env(inject::crash::CRASH_AT, "applied")
                .output()
                .unwrap();
            if out.status.signal() == Some(9) {
                applied += 1;
            } else {
                // A fault stacked on an earlier one of the same object may be refused (a policy
                // of that name exists); it then reverted itself and journals nothing.
                assert_eq!(
                    out.status.code(),
                    Some(1),
                    "{problem} #{index}: {}",
                    text(&out)
                );
                refused.push(format!("{problem} #{index} ({primitive})"));
            }
        }
    }
    let entries = std::fs::read_dir(&shared).unwrap().count();
    assert_eq!(entries, applied, "one entry per fault in effect");
    assert!(
        applied >= 60,
        "{applied} faults in effect; refused: {refused:?}"
    );
    let started = std::time::Instant::now();
    let out = Command::new(binary("collector"))
        .args(["recover", "--json", "--journal"])
        .arg(&shared)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report.as_array().unwrap().len(), applied);
    for ((l, ns), before) in envs.iter().zip(&before) {
        let left = differences(before, &state(&l.kubeconfig, ns));
        assert!(left.is_empty(), "{ns} not restored:\n{}", left.join("\n"));
        l.assert_no_panic();
    }
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
    eprintln!(
        "recover of a {applied}-entry journal over 4 clusters: {:.2} s ({:.1} ms per entry); {} stacked faults refused: {refused:?}",
        took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / applied as f64,
        refused.len()
    );
}
