//! `collector live --env kube` against a cluster: `collector env up --app hotel-reservation` (the
//! app healthy, nothing injected) stands in for a real one, reached through its kubeconfig as any
//! cluster is. The session injects the problem's fault through the API, hands the agent a
//! kubeconfig to its filtering proxy (the injection plane's namespace is not there to be read;
//! exec and port-forward reach the cluster's pods through it),
//! grades the mitigation by watching the cluster, and leaves the cluster as it found it: at the
//! end, after SIGTERM, and through `collector recover` after a kill -9.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use e2e::cluster;
use e2e::live::{Live, NS, up_app};

const PROBLEM: &str = "hotel-geo-target-port";

fn agents() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents")
}

/// `collector live --env kube` on `l` with `agent`, its journal in `journal`; health is read
/// from the environment's Prometheus as from a cluster's, and its Jaeger and Loki are the
/// cluster's traces and logs.
fn live(l: &Live, journal: &Path, out: &Path, agent: &str, extra: &[&str]) -> Command {
    let url = |api: &str| {
        l.endpoints[api]
            .as_str()
            .expect("the API's URL")
            .to_string()
    };
    let prometheus = url("prometheus");
    let mut c = Command::new(e2e::binary("collector"));
    c.args(["live", "--env", "kube", "--problem", PROBLEM, "--quiet"])
        .arg("--kubeconfig")
        .arg(&l.kubeconfig)
        .arg("--journal")
        .arg(journal)
        .arg("--out")
        .arg(out)
        .args(["--agent", agent, "--prometheus", &prometheus])
        // The agent runs sandboxed, as by default, with the scripts' directory to read.
        .arg("--agent-bind")
        .arg(agents())
        .args(["--jaeger", &url("jaeger"), "--loki", &url("loki")])
        .args(extra);
    c
}

fn kubectl(l: &Live, args: &[&str]) -> Output {
    Command::new("kubectl")
        .env("KUBECONFIG", &l.kubeconfig)
        .args(args)
        .output()
        .expect("kubectl is installed (apt-get install kubectl, or bash tests/run)")
}

/// The injection plane's namespace on the cluster, with something in it.
fn plane(l: &Live) {
    for args in [
        &["create", "namespace", "faultline"][..],
        &[
            "-n",
            "faultline",
            "create",
            "configmap",
            "journal",
            "--from-literal=entry=geo",
        ],
    ] {
        let o = kubectl(l, args);
        assert!(o.status.success(), "{}", e2e::text(&o));
    }
}

/// What the agent printed under `=== NAME` in its stored output, up to the next such line.
fn section(out: &Path, name: &str) -> String {
    let stdout = std::fs::read_to_string(out.join("agent.stdout")).expect("agent.stdout");
    let header = format!("=== {name}");
    let mut lines = stdout.lines().skip_while(|l| *l != header);
    assert!(lines.next().is_some(), "no {header} in:\n{stdout}");
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with("=== ")).collect();
    body.join("\n")
}

fn run_json(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("run.json")).expect("run.json");
    serde_json::from_str(&text).expect("run.json is JSON")
}

fn journal_entries(journal: &Path) -> usize {
    std::fs::read_dir(journal).map_or(0, |d| d.count())
}

#[test]
fn a_session_on_a_cluster_injects_hides_the_plane_grades_and_reverts() {
    let l = up_app("hotel-reservation", &[]);
    plane(&l);
    let before = cluster::state(&l.kubeconfig, NS);
    let work = tempfile::tempdir().unwrap();
    let (journal, out) = (work.path().join("journal"), work.path().join("run"));
    // The agent looks around through its kubeconfig, execs into a pod, forwards a port on its own
    // loopback, asks the session's analysis tools where calls fail, fixes the Service and
    // submits; it writes what it saw in its home and prints it at the end. kubectl prints where
    // it forwards once the tunnel is up.
    let agent = format!(
        ". {lib}; {{ kubectl get namespaces -o name; kubectl get configmaps -A -o name; \
         kubectl -n faultline get configmap journal; kubectl get --raw /api/v1/namespaces/faultline/configmaps; \
         kubectl -n $ns get svc geo -o jsonpath='{{.spec.ports[0].targetPort}}'; echo; }} > seen 2>&1; \
         {{ kubectl -n $ns exec deploy/geo -- sh -c 'echo host=$(hostname); exit 3'; echo exit=$?; \
         kubectl -n $ns port-forward svc/frontend :5000 > forwarding 2>&1 & pf=$!; \
         until grep -q Forwarding forwarding || ! kill -0 $pf; do sleep 0.1; done; \
         port=$(grep -o '127.0.0.1:[0-9]*' forwarding | head -n1 | cut -d: -f2); \
         curl -s -o /dev/null -w 'forwarded %{{http_code}}\n' http://127.0.0.1:$port/no-such-route; \
         kill $pf; }} > streams 2>&1; \
         {tools} > analysis 2>&1; \
         submit 'Service geo targets port 9999; its pods listen on 8083'; \
         kubectl -n $ns patch service geo --type=json -p '[{{\"op\":\"replace\",\"path\":\"/spec/ports/0/targetPort\",\"value\":8083}}]'; \
         echo '=== hidden'; ls {journal} {operator} 2>&1; \
         for f in seen streams analysis; do echo \"=== $f\"; cat $f; done; \
         submit ''",
        lib = agents().join("lib.sh").display(),
        tools = agents().join("analysts/cluster-tools.sh").display(),
        journal = journal.display(),
        operator = l.kubeconfig.display(),
    );
    let o = live(
        &l,
        &journal,
        &out,
        &agent,
        &["--time-limit", "3m", "--no-noise"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", e2e::text(&o));
    // The operator's credentials and the journal are outside the agent's sandbox.
    let hidden = section(&out, "hidden");
    assert_eq!(
        hidden.matches("No such file or directory").count(),
        2,
        "{hidden}"
    );
    let seen = section(&out, "seen");
    // The fault was in place; the plane's namespace was not there to be read.
    assert!(seen.ends_with("9999"), "{seen}");
    assert!(seen.contains("namespace/hotel-reservation"), "{seen}");
    assert!(seen.contains("configmap/service-config"), "{seen}");
    assert!(!seen.contains("namespace/faultline"), "{seen}");
    assert!(!seen.contains("faultline/journal"), "{seen}");
    assert_eq!(
        seen.matches("namespaces \"faultline\" not found").count(),
        2,
        "{seen}"
    );
    // exec and port-forward went through the proxy to the cluster's pods.
    let streams = section(&out, "streams");
    assert!(streams.contains("host=geo-"), "{streams}");
    assert!(streams.contains("exit=3"), "{streams}");
    assert!(streams.contains("forwarded 404"), "{streams}");
    // The analysis tools read the cluster as the agent sees it: the failing calls end at geo,
    // search calls it on frontend's behalf, and the plane's objects are not there.
    let analysis = section(&out, "analysis");
    let line = |label: &str| {
        let prefix = format!("{label}: ");
        let found = analysis
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()));
        found.unwrap_or_else(|| panic!("no {label} in:\n{analysis}"))
    };
    assert_eq!(line("suspect"), "geo", "{analysis}");
    let topology: serde_json::Value = serde_json::from_str(line("topology")).expect("JSON");
    assert_eq!(
        topology["callers"],
        serde_json::json!(["search"]),
        "{topology:#}"
    );
    assert_eq!(
        topology["call_chains_to_root"],
        serde_json::json!(["frontend -> search -> geo"]),
        "{topology:#}"
    );
    assert!(line("plane").contains("not found"), "{analysis}");
    let run = run_json(&out);
    assert_eq!(run["diagnosis"]["pass"], true, "{run:#}");
    assert_eq!(run["mitigation"]["success"], true, "{run:#}");
    let reads = run["api_requests"]["reads"].as_u64().unwrap_or_default();
    let writes = run["api_requests"]["writes"].as_u64().unwrap_or_default();
    assert!(reads >= 5 && writes == 1, "{}", run["api_requests"]);
    // As found: the fault reverted, the journal empty, the plane untouched.
    let after = cluster::state(&l.kubeconfig, NS);
    assert_eq!(cluster::differences(&before, &after), Vec::<String>::new());
    assert_eq!(journal_entries(&journal), 0);
    let o = kubectl(&l, &["-n", "faultline", "get", "configmap", "journal"]);
    assert!(o.status.success(), "{}", e2e::text(&o));
    l.assert_no_panic();
}

#[test]
fn a_mitigation_that_fixes_nothing_fails_with_why_and_the_fault_is_still_reverted() {
    let l = up_app("hotel-reservation", &[]);
    let before = cluster::state(&l.kubeconfig, NS);
    let work = tempfile::tempdir().unwrap();
    let (journal, out) = (work.path().join("journal"), work.path().join("run"));
    // Restarting the faulty workload fixes nothing: the Service still targets the wrong port.
    let agent = format!(
        ". {}; submit 'geo is slow'; kubectl -n $ns rollout restart deployment geo; submit ''",
        agents().join("lib.sh").display()
    );
    let o = live(
        &l,
        &journal,
        &out,
        &agent,
        &["--time-limit", "3m", "--settle-within", "65s", "--no-noise"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", e2e::text(&o));
    let run = run_json(&out);
    let m = &run["mitigation"];
    assert_eq!(m["success"], false, "{run:#}");
    let reasons = m["reasons"].to_string();
    assert!(reasons.contains("not recovered after 65s"), "{reasons}");
    assert!(reasons.contains("9999"), "{reasons}");
    // What the cluster's Prometheus shows: the entry service still failing.
    assert!(reasons.contains("the error ratio at frontend"), "{reasons}");
    assert_eq!(journal_entries(&journal), 0);
    let after = cluster::state(&l.kubeconfig, NS);
    // The restart is the agent's own change (a template annotation), kept; the fault is gone.
    let left: Vec<String> = cluster::differences(&before, &after)
        .into_iter()
        .filter(|d| !d.contains("kubectl.kubernetes.io/restartedAt"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
}

/// Waits until the session's fault is in place on the cluster.
fn wait_for_fault(l: &Live) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while l.geo_target_port() != "9999" {
        assert!(Instant::now() < deadline, "the fault never appeared");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn sigterm_reverts_and_after_kill_9_recover_does() {
    let l = up_app("hotel-reservation", &[]);
    let before = cluster::state(&l.kubeconfig, NS);
    let work = tempfile::tempdir().unwrap();
    let journal = work.path().join("journal");
    for (i, signal) in ["-TERM", "-KILL"].iter().enumerate() {
        let out = work.path().join(format!("run{i}"));
        let mut session = live(
            &l,
            &journal,
            &out,
            "exec sleep 300",
            &["--time-limit", "5m", "--no-noise"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        wait_for_fault(&l);
        let sent = Command::new("kill")
            .args([*signal, &session.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        // The sandboxed agent dies with the session, even a killed one.
        let status = session.wait().unwrap();
        if *signal == "-TERM" {
            assert_eq!(status.code(), Some(130), "{status:?}");
            assert_eq!(journal_entries(&journal), 0);
        } else {
            assert_eq!(
                l.geo_target_port(),
                "9999",
                "a killed session reverts nothing"
            );
            assert_eq!(journal_entries(&journal), 1);
            let o = Command::new(e2e::binary("collector"))
                .arg("recover")
                .arg("--journal")
                .arg(&journal)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", e2e::text(&o));
            assert_eq!(journal_entries(&journal), 0);
        }
        let after = cluster::state(&l.kubeconfig, NS);
        assert_eq!(
            cluster::differences(&before, &after),
            Vec::<String>::new(),
            "after {signal}"
        );
    }
}

#[test]
fn noise_is_played_on_the_cluster_and_recorded_for_the_evaluator() {
    let l = up_app("hotel-reservation", &[]);
    let work = tempfile::tempdir().unwrap();
    let (journal, out) = (work.path().join("journal"), work.path().join("run"));
    // The default profile laid over the catalog, faster: a pod kill and a CPU burst within the
    // first ten seconds of every twenty.
    let catalog = work.path().join("catalog");
    std::fs::create_dir_all(catalog.join("noise")).unwrap();
    std::fs::write(
        catalog.join("noise/default.toml"),
        "name = \"default\"\nevery = \"20s\"\nper_period = 2\nlength = \"10s\"\n\
         [[disturbances]]\nkind = \"pod_kill\"\n[[disturbances]]\nkind = \"cpu_burst\"\ncpu = \"500m\"\n",
    )
    .unwrap();
    // A snapshot of 22 s: both disturbances of the first period fall in its first 10 s, the
    // second period would not end inside it.
    let snap = work.path().join("snap");
    let o = cluster::snapshot(&l.kubeconfig, PROBLEM, ("2s", "20s"), &journal, &snap)
        .args(["--seed", "5", "--catalog"])
        .arg(&catalog)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", e2e::text(&o));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(snap.join("injections.json")).unwrap()).unwrap();
    let noise = &record["noise"];
    let played = noise["played"].as_array().expect("played");
    assert_eq!(played.len(), 1, "{noise:#}");
    assert_eq!(played[0]["kind"], "pod_kill", "{noise:#}");
    // Never on the service the fault is about.
    assert_ne!(played[0]["target"], "deployment/geo", "{noise:#}");
    let not_played = noise["not_played"].as_array().expect("not_played");
    assert_eq!(not_played.len(), 1, "{noise:#}");
    assert_eq!(not_played[0]["kind"], "cpu_burst", "{noise:#}");
    let why = not_played[0]["why"].as_str().unwrap_or_default();
    assert!(why.contains("node agent"), "{noise:#}");
    // Only the evaluator's files know of it.
    let gt = std::fs::read_to_string(snap.join("ground_truth.json")).unwrap();
    assert!(!gt.contains("pod_kill"), "{gt}");

    // A session: the agent waits until a pod it saw is gone (the noise's doing), submits a
    // diagnosis and leaves; the world as it stands is graded (not fixed: bounded by the settle
    // time).
    let agent = format!(
        ". {lib}; kubectl -n $ns get pods -o name | sort > pods; \
         until kubectl -n $ns get pods -o name | sort | comm -23 pods - | grep -q .; do sleep 0.5; done; \
         submit 'Service geo targets port 9999; its pods listen on 8083'",
        lib = agents().join("lib.sh").display(),
    );
    let mut session = live(
        &l,
        &journal,
        &out,
        &agent,
        &[
            "--time-limit",
            "3m",
            "--seed",
            "5",
            "--settle-within",
            "60s",
        ],
    );
    let o = session.arg("--catalog").arg(&catalog).output().unwrap();
    assert!(o.status.success(), "{}", e2e::text(&o));
    let run = run_json(&out);
    assert_eq!(run["diagnosis"]["pass"], true, "{run:#}");
    let noise: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("noise.json")).expect("noise.json"))
            .expect("noise.json is JSON");
    let played = noise["played"].as_array().expect("played");
    assert!(!played.is_empty(), "{noise:#}");
    for p in played {
        assert_eq!(p["kind"], "pod_kill", "{noise:#}");
        assert_ne!(p["target"], "deployment/geo", "{noise:#}");
    }
    // Nothing of it reached the agent's run record beside the counts of its own requests.
    let text = std::fs::read_to_string(out.join("run.json")).unwrap();
    assert!(!text.contains("pod_kill"), "{text}");
    assert_eq!(journal_entries(&journal), 0);
}
