//! `collector analyze` on simulated datasets, every tool's answer checked against facts computed
//! here from the dataset's rows (read with the datasets reader, no analysis code): the alert the
//! problem fires leads alert_summary with its duration; counts by alert, reason and deployment
//! match; the trace error tree of a wrong targetPort ends at the faulty service; the spec change
//! is the targetPort's; restarts and OOM kills match the pods' statuses.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use datasets::Dataset;
use e2e::{run, text};
use schemas::tables::{AlertRow, EventRow, LogRow, MetricSample, ObjectRow, Row, SpanRow, Table};
use serde_json::{Value, json};

const NS: &str = "hotel-reservation";
const SEC: i64 = 1_000_000_000;

/// A simulated dataset of `problem` (no noise), made once per test process.
fn snapshot(problem: &'static str) -> PathBuf {
    static MADE: OnceLock<std::sync::Mutex<HashMap<&'static str, PathBuf>>> = OnceLock::new();
    let made = MADE.get_or_init(Default::default);
    let mut made = made.lock().unwrap();
    if let Some(d) = made.get(problem) {
        return d.clone();
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("analysis-{}-{problem}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = run(
        "collector",
        &[
            "snapshot",
            "--problem",
            problem,
            "--duration",
            "14m",
            "--no-noise",
            "--seed",
            "4",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "snapshot: {}", text(&o));
    let ds = out.join("dataset");
    made.insert(problem, ds.clone());
    ds
}

/// The fault's onset (ns) from the evaluator's record beside the dataset.
fn onset(ds: &Path) -> i64 {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(ds.parent().unwrap().join("evaluation.json")).unwrap(),
    )
    .unwrap();
    schemas::time::parse_rfc3339(v["injections"][0]["onset"].as_str().unwrap()).unwrap()
}

fn rfc(ns: i64) -> String {
    schemas::time::rfc3339(ns)
}

/// `collector analyze TOOL DS --args ARGS --json`: the answer.
fn analyze(ds: &Path, tool: &str, args: Value) -> Value {
    let o = run(
        "collector",
        &[
            "analyze",
            tool,
            ds.to_str().unwrap(),
            "--args",
            &args.to_string(),
            "--json",
        ],
    );
    assert!(o.status.success(), "analyze {tool} {args}: {}", text(&o));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{tool}: JSON expected ({e}): {}", text(&o)))
}

fn rows<T: TryFrom<Row>>(ds: &Path, table: Table) -> Vec<T> {
    Dataset::open(ds)
        .unwrap()
        .read_rows(table)
        .unwrap()
        .into_iter()
        .filter_map(|r| T::try_from(r).ok())
        .collect()
}

/// ITBench's entity of an alert: the first present of these labels.
fn entity(a: &AlertRow) -> String {
    [
        "service_name",
        "service",
        "pod",
        "deployment",
        "instance",
        "job",
        "namespace",
    ]
    .iter()
    .find_map(|k| a.labels.get(*k).cloned())
    .unwrap_or_else(|| "cluster-wide".into())
}

#[test]
fn alert_summary_leads_with_the_problems_alert_and_its_duration() {
    let ds = snapshot("hotel-geo-target-port");
    let alerts: Vec<AlertRow> = rows(&ds, Table::Alerts);
    // Firing observations per (alertname, entity, severity).
    let mut firing: BTreeMap<(String, String, String), Vec<i64>> = BTreeMap::new();
    let mut seen: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for a in &alerts {
        let key = (
            a.alertname.clone(),
            entity(a),
            a.labels
                .get("severity")
                .cloned()
                .unwrap_or_else(|| "unknown".into()),
        );
        *seen.entry(key.clone()).or_default() += 1;
        if a.state == "firing" {
            firing.entry(key).or_default().push(a.time_ns);
        }
    }
    // Longest observed firing first, then most observed: the leaders (alerts can tie).
    let span = |t: &Vec<i64>| t.iter().max().unwrap() - t.iter().min().unwrap();
    let best = firing
        .iter()
        .map(|(k, t)| (span(t), seen[k]))
        .max()
        .expect("the problem fires an alert");
    let leaders: BTreeMap<(String, String), (i64, i64)> = firing
        .iter()
        .filter(|(k, t)| (span(t), seen[*k]) == best)
        .map(|(k, t)| {
            (
                (k.0.clone(), k.1.clone()),
                (*t.iter().min().unwrap(), span(t)),
            )
        })
        .collect();
    assert!(
        firing
            .values()
            .all(|t| t.iter().min().unwrap() >= &onset(&ds)),
        "with no noise, every firing alert is the problem's"
    );
    let summary = analyze(&ds, "alert_summary", json!({}));
    let first = &summary[0];
    let key = (
        first["alertname"].as_str().unwrap().to_string(),
        first["entity"].as_str().unwrap().to_string(),
    );
    let (since, lasted) = leaders
        .get(&key)
        .unwrap_or_else(|| panic!("{key:?} is not among {leaders:?}: {summary:#}"));
    let minutes = ((*lasted as f64 / 6e10) * 10.0).round() / 10.0;
    assert_eq!(
        first["duration_min"].as_f64().unwrap(),
        minutes,
        "{summary:#}"
    );
    assert_eq!(first["first_seen"], rfc(*since), "{summary:#}");
    assert_eq!(first["state"], "firing");
    for s in summary.as_array().unwrap() {
        let key = (
            s["alertname"].as_str().unwrap().to_string(),
            s["entity"].as_str().unwrap().to_string(),
            s["severity"].as_str().unwrap().to_string(),
        );
        assert_eq!(s["occurrences"].as_u64().unwrap(), seen[&key], "{s}");
    }
    // A window before the onset holds none of them.
    let before = analyze(
        &ds,
        "alert_summary",
        json!({"end_time": rfc(onset(&ds) - SEC)}),
    );
    assert_eq!(before, json!([]));
}

#[test]
fn alert_analysis_counts_by_alert_and_pages() {
    let ds = snapshot("hotel-geo-target-port");
    let alerts: Vec<AlertRow> = rows(&ds, Table::Alerts);
    let mut by_name: BTreeMap<String, u64> = BTreeMap::new();
    for a in alerts.iter().filter(|a| a.state == "firing") {
        *by_name.entry(a.alertname.clone()).or_default() += 1;
    }
    let answer = analyze(
        &ds,
        "alert_analysis",
        json!({"filters": {"state": "firing"}, "group_by": "alertname"}),
    );
    assert_eq!(answer["total_count"], by_name.len(), "{answer:#}");
    for row in answer["data"].as_array().unwrap() {
        assert_eq!(
            row["count"].as_u64().unwrap(),
            by_name[row["labels.alertname"].as_str().unwrap()],
            "{row}"
        );
    }
    let page = analyze(&ds, "alert_analysis", json!({"limit": 2, "offset": 1}));
    assert_eq!(page["total_count"], alerts.len());
    assert_eq!(
        page["returned_count"],
        2.min(alerts.len().saturating_sub(1))
    );
    // A column that does not exist is the caller's error, exit status 2, naming the columns.
    let o = run(
        "collector",
        &[
            "analyze",
            "alert_analysis",
            ds.to_str().unwrap(),
            "-p",
            "group_by=nonsense",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("group column `nonsense` not found; available: labels.alertname"),
        "{}",
        text(&o)
    );
}

#[test]
fn event_analysis_counts_by_reason_and_kind() {
    let ds = snapshot("hotel-profile-oom");
    let events: Vec<EventRow> = rows(&ds, Table::Events);
    let mut by_reason: BTreeMap<String, u64> = BTreeMap::new();
    for e in &events {
        *by_reason.entry(e.reason.clone()).or_default() += 1;
    }
    let answer = analyze(
        &ds,
        "event_analysis",
        json!({"group_by": "reason", "limit": 0}),
    );
    let got: BTreeMap<String, u64> = answer["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["reason"].as_str().unwrap().to_string(),
                r["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(!by_reason.is_empty());
    assert_eq!(got, by_reason);
    let warnings = events.iter().filter(|e| e.event_type == "Warning").count();
    let answer = analyze(
        &ds,
        "event_analysis",
        json!({"filters": {"event_kind": "Warning"}}),
    );
    assert_eq!(answer["total_count"], warnings);
}

/// Pod → its top owner's name, from the pods' and ReplicaSets' ownerReferences.
fn workloads(ds: &Path) -> HashMap<String, String> {
    let objects: Vec<ObjectRow> = rows(ds, Table::Objects);
    let mut owner: HashMap<(String, String), String> = HashMap::new();
    for o in &objects {
        let v: Value = serde_json::from_str(&o.object).unwrap();
        if let Some(r) = v["metadata"]["ownerReferences"][0].as_object() {
            owner.insert(
                (o.kind.clone(), o.name.clone()),
                format!(
                    "{}/{}",
                    r["kind"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                ),
            );
        }
    }
    let mut out = HashMap::new();
    for ((kind, name), _) in owner.iter().filter(|((k, _), _)| k == "Pod") {
        let mut at = (kind.clone(), name.clone());
        while let Some(next) = owner.get(&at) {
            let (k, n) = next.split_once('/').unwrap();
            at = (k.to_string(), n.to_string());
        }
        out.insert(name.clone(), at.1);
    }
    out
}

#[test]
fn metric_analysis_folds_per_deployment() {
    let ds = snapshot("hotel-geo-target-port");
    let samples: Vec<MetricSample> = rows(&ds, Table::Metrics);
    let metric = "container_memory_working_set_bytes";
    let owners = workloads(&ds);
    let mut max: BTreeMap<String, f64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.metric == metric) {
        if let Some(d) = s.labels.get("pod").and_then(|pod| owners.get(pod)) {
            let m = max.entry(d.clone()).or_insert(f64::NEG_INFINITY);
            *m = m.max(s.value);
        }
    }
    assert!(max.len() > 5, "{metric} has pod series");
    let answer = analyze(
        &ds,
        "metric_analysis",
        json!({"object_pattern": "pod/*", "metric_names": [metric], "group_by": "deployment", "agg": "max", "limit": 0}),
    );
    let got: BTreeMap<String, f64> = answer
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["deployment"].as_str().unwrap().to_string(),
                r["value"].as_f64().unwrap(),
            )
        })
        .collect();
    for (d, v) in &max {
        assert!(
            (got[d] - v).abs() <= v.abs() * 1e-5,
            "{d}: {} vs {v}",
            got[d]
        );
    }
    // The compact summary of one pod: its samples, minimum and maximum per series.
    let pod = samples
        .iter()
        .find_map(|s| s.labels.get("pod").filter(|p| p.starts_with("geo-")))
        .unwrap()
        .clone();
    let series: Vec<&MetricSample> = samples
        .iter()
        .filter(|s| s.metric == metric && s.labels.get("pod") == Some(&pod))
        .collect();
    let summary = analyze(
        &ds,
        "metric_analysis",
        json!({"k8_object_name": format!("{NS}/pod/{pod}"), "metric_names": [metric]}),
    );
    let total: u64 = summary
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(total as usize, series.len(), "{summary:#}");
}

#[test]
fn metric_anomalies_are_per_series() {
    let ds = snapshot("hotel-geo-target-port");
    let samples: Vec<MetricSample> = rows(&ds, Table::Metrics);
    let pod = samples
        .iter()
        .find_map(|s| s.labels.get("pod").filter(|p| p.starts_with("search-")))
        .unwrap()
        .clone();
    let metric = "container_memory_working_set_bytes";
    // Each series of the metric for the pod, its points beyond two sample deviations.
    let mut series: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.metric == metric && s.labels.get("pod") == Some(&pod))
    {
        series
            .entry(serde_json::to_string(&s.labels).unwrap())
            .or_default()
            .push((s.time_ns, s.value));
    }
    assert!(!series.is_empty());
    let answer = analyze(
        &ds,
        "get_metric_anomalies",
        json!({"k8_object_name": format!("pod/{pod}"), "metric_name_filter": metric, "raw_content": false}),
    );
    let listed = answer["metrics"].as_array().unwrap();
    assert_eq!(listed.len(), series.len(), "{answer:#}");
    for (labels, values) in &series {
        let n = values.len() as f64;
        let mean = values.iter().map(|v| v.1).sum::<f64>() / n;
        let std = (values.iter().map(|v| (v.1 - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let expected: Vec<String> = values
            .iter()
            .filter(|v| std > 0.0 && ((v.1 - mean) / std).abs() > 2.0)
            .map(|v| rfc(v.0))
            .collect();
        let labels: Value = serde_json::from_str(labels).unwrap();
        let got = listed
            .iter()
            .find(|m| m["series"] == labels)
            .unwrap_or_else(|| panic!("{labels} missing: {answer:#}"));
        assert_eq!(got["count"].as_u64().unwrap() as usize, values.len());
        let times: Vec<String> = got["anomalies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["timestamp"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(times, expected, "{got:#}");
    }
}

#[test]
fn the_trace_error_tree_of_a_wrong_target_port_ends_at_the_faulty_service() {
    let ds = snapshot("hotel-geo-target-port");
    let spans: Vec<SpanRow> = rows(&ds, Table::Spans);
    let t = onset(&ds);
    // After the onset, search's calls to geo fail and no geo server span answers them.
    let failing = spans.iter().filter(|s| {
        s.start_ns >= t + 10 * SEC
            && s.service == "search"
            && s.kind == "client"
            && s.attributes
                .get("net.peer.name")
                .is_some_and(|p| p.starts_with("geo"))
    });
    assert!(failing.clone().count() > 0 && failing.clone().all(|s| s.status_code == "error"));
    let answer = analyze(
        &ds,
        "get_trace_error_tree",
        json!({"pivot_time": rfc(t), "delta_time": "4m"}),
    );
    let critical = answer["critical_paths"].as_array().unwrap();
    // The failing traces' path ends where they failed, and names it.
    let to_geo = critical
        .iter()
        .find(|p| p["path"].as_str().unwrap().ends_with("search → geo"))
        .unwrap_or_else(|| panic!("{answer:#}"));
    assert_eq!(to_geo["root_cause_suspect"]["service"], "geo", "{to_geo:#}");
    let hop = to_geo["hops"].as_array().unwrap().last().unwrap();
    assert_eq!(hop["error_rate"], "0% → 100%", "{to_geo:#}");
    let suspects: Vec<&str> = critical
        .iter()
        .filter_map(|p| p["root_cause_suspect"]["service"].as_str())
        .collect();
    assert_eq!(suspects, ["geo"], "{answer:#}");
    // Latency comes from the span durations (never all zero, as ITBench's reads them on raw data).
    assert!(
        !to_geo["hops"][0]["latency_p99"]
            .as_str()
            .unwrap()
            .starts_with("0.00ms → 0.00ms"),
        "{to_geo:#}"
    );
}

#[test]
fn the_topology_holds_every_object_and_the_calls_of_the_traces() {
    let ds = snapshot("hotel-geo-target-port");
    let objects: Vec<ObjectRow> = rows(&ds, Table::Objects);
    let mut latest: BTreeMap<(String, Option<String>, String), &ObjectRow> = BTreeMap::new();
    for o in &objects {
        latest.insert((o.kind.clone(), o.namespace.clone(), o.name.clone()), o);
    }
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    for o in latest.values().filter(|o| o.change.as_str() != "deleted") {
        *kinds.entry(o.kind.clone()).or_default() += 1;
    }
    let built = analyze(&ds, "build_topology", json!({}));
    for (kind, n) in &kinds {
        if kind != "Node" && kind != "Namespace" {
            assert_eq!(
                built["node_types"][kind].as_u64(),
                Some(*n),
                "{kind}: {built:#}"
            );
        }
    }
    // Calls from the spans: a child span of another service, or a client's peer.
    let spans: Vec<SpanRow> = rows(&ds, Table::Spans);
    let by_id: HashMap<(&str, &str), &SpanRow> = spans
        .iter()
        .map(|s| ((s.trace_id.as_str(), s.span_id.as_str()), s))
        .collect();
    let mut callers_of_search = BTreeSet::new();
    for s in spans.iter().filter(|s| s.service == "search") {
        if let Some(p) = s
            .parent_span_id
            .as_deref()
            .and_then(|p| by_id.get(&(s.trace_id.as_str(), p)))
            .filter(|p| p.service != "search")
        {
            callers_of_search.insert(p.service.clone());
        }
    }
    let topo = analyze(&ds, "topology_analysis", json!({"entity": "search"}));
    let callers: BTreeSet<String> = topo["callers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert!(
        callers_of_search.is_subset(&callers),
        "{callers_of_search:?} vs {topo:#}"
    );
    assert!(
        topo["callees"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "geo"),
        "{topo:#}"
    );
    assert!(
        topo["backing_infrastructure"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l
                .as_str()
                .unwrap()
                .contains("--contains--> hotel-reservation/Pod/search-")),
        "{topo:#}"
    );
    // Written to a file for ITBench's consumers, with namespaced ids.
    let file = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("topology-{}.json", std::process::id()));
    let o = run(
        "collector",
        &[
            "analyze",
            "build_topology",
            ds.to_str().unwrap(),
            "-p",
            &format!("output_file={}", file.display()),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let graph: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(
        graph["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["id"] == "hotel-reservation/Service/geo")
    );
    let _ = std::fs::remove_file(file);
}

/// The targetPort change among a spec-change answer's items.
fn target_port_change(answer: &Value) -> Option<Value> {
    answer["entities_with_changes"]
        .as_array()?
        .iter()
        .flat_map(|e| e["change_items"].as_array().into_iter().flatten())
        .find(|i| {
            i["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("targetPort"))
        })
        .cloned()
}

#[test]
fn the_spec_change_is_the_target_port_and_the_context_has_it_all() {
    let ds = snapshot("hotel-geo-target-port");
    let answer = analyze(
        &ds,
        "k8s_spec_change_analysis",
        json!({"k8_object_name": format!("{NS}/Service/geo")}),
    );
    let entity = &answer["entities_with_changes"][0];
    assert_eq!(entity["kind"], "Service", "{answer:#}");
    assert_eq!(entity["namespace"], NS);
    let change = target_port_change(&answer).unwrap_or_else(|| panic!("{answer:#}"));
    assert_eq!(
        (change["old"].clone(), change["new"].clone()),
        (json!(8083), json!(9999)),
        "{change}"
    );
    let t = onset(&ds);
    let at = schemas::time::parse_rfc3339(change["timestamp"].as_str().unwrap()).unwrap();
    assert!(
        (t..t + 60 * SEC).contains(&at),
        "the change is observed at the onset: {change}"
    );
    let spec = analyze(
        &ds,
        "get_k8_spec",
        json!({"k8_object_name": format!("{NS}/Service/geo")}),
    );
    assert_eq!(
        spec["spec"]["spec"]["ports"][0]["targetPort"], 9999,
        "{spec:#}"
    );

    let ctx = analyze(
        &ds,
        "get_context_contract",
        json!({"k8_object": format!("{NS}/Service/geo"), "start_time": rfc(t - 60 * SEC)}),
    );
    assert!(
        target_port_change(&ctx["spec_changes"]).is_some(),
        "{ctx:#}"
    );
    assert!(
        ctx["trace_errors"]["critical_paths"]
            .to_string()
            .contains("geo"),
        "{ctx:#}"
    );
    assert!(ctx["pagination"]["total_pages"].as_u64().unwrap() >= 1);
    assert!(ctx["dependency_breakdown"].is_object(), "{ctx:#}");
}

#[test]
fn change_points_find_the_onset_and_logs_show_the_refusals() {
    let ds = snapshot("hotel-geo-target-port");
    let t = onset(&ds);
    let answer = analyze(&ds, "service_change_points", json!({}));
    let geo = answer["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["service"] == "geo")
        .unwrap_or_else(|| panic!("{answer:#}"));
    let err = &geo["error_rate_pct"];
    let at = schemas::time::parse_rfc3339(err["changed_at"].as_str().unwrap()).unwrap();
    assert!(
        (t - 60 * SEC..=t + 60 * SEC).contains(&at),
        "{err} vs onset {}",
        rfc(t)
    );
    assert!(
        err["before"].as_f64().unwrap() < 20.0 && err["after"].as_f64().unwrap() > 90.0,
        "{err}"
    );
    // Services whose calls all succeed throughout are listed as unchanged.
    assert!(
        answer["unchanged"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "memcached-rate"),
        "{answer:#}"
    );

    let logs: Vec<LogRow> = rows(&ds, Table::Logs);
    let owners = workloads(&ds);
    let search_lines = logs
        .iter()
        .filter(|l| owners.get(&l.pod).is_some_and(|w| w == "search"))
        .count();
    let answer = analyze(&ds, "log_analysis", json!({"service_name": "search"}));
    assert_eq!(
        answer["total_logs"].as_u64().unwrap() as usize,
        search_lines,
        "{answer:#}"
    );
    assert!(
        answer["patterns"]
            .to_string()
            .contains("connection refused"),
        "{answer:#}"
    );
}

#[test]
fn restarts_and_oom_kills_match_the_pods_statuses() {
    let ds = snapshot("hotel-profile-oom");
    let objects: Vec<ObjectRow> = rows(&ds, Table::Objects);
    let mut restarts: BTreeMap<String, i64> = BTreeMap::new();
    let mut oom: BTreeSet<String> = BTreeSet::new();
    for o in objects.iter().filter(|o| o.kind == "Pod") {
        let v: Value = serde_json::from_str(&o.object).unwrap();
        for cs in v["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let n = cs["restartCount"].as_i64().unwrap_or(0);
            let e = restarts.entry(o.name.clone()).or_default();
            *e = (*e).max(n);
            if cs["lastState"]["terminated"]["reason"] == "OOMKilled" {
                oom.insert(o.name.clone());
            }
        }
    }
    assert!(!oom.is_empty(), "the problem OOM-kills");
    let answer = analyze(&ds, "restart_timeline", json!({}));
    for p in answer["pods"].as_array().unwrap() {
        let pod = p["pod"].as_str().unwrap();
        assert_eq!(
            p["restarts"].as_i64().unwrap(),
            restarts.get(pod).copied().unwrap_or(0),
            "{p}"
        );
        assert_eq!(
            p["oom_kills"].as_u64().unwrap() > 0,
            oom.contains(pod),
            "{p}"
        );
    }
    assert!(
        answer["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["what"] == "oom_killed")
    );
}
