//! The board from handmade trees of session `run.json` files (several agents, problems, trials,
//! noise on and off), checked against numbers computed here from the same table by plain counting,
//! and `judge run` over version-2 run files keeping what the session measured.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use judge::board::{self, DecidedBy};
use judge::runner;
use serde_json::{Value, json};

/// One session run of the handmade table.
#[derive(Debug, Clone)]
struct Spec {
    agent: &'static str,
    problem: &'static str,
    trial: String,
    noise: bool,
    /// None: the session could not decide; the run still submitted.
    diagnosis: Option<bool>,
    submitted: bool,
    mitigation: bool,
    ttd: f64,
    ttm: Option<f64>,
    tokens: (u64, u64),
}

/// Two agents × three problems × (three trials without noise + two with), outcomes varied by a
/// fixed rule so every rate, time and pass@k differs between rows.
fn table() -> Vec<Spec> {
    let mut v = Vec::new();
    for (a, agent) in ["alpha", "beta"].into_iter().enumerate() {
        for (p, problem) in ["p1", "p2", "p3"].into_iter().enumerate() {
            for noise in [false, true] {
                let trials = if noise { 2 } else { 3 };
                for t in 0..trials {
                    let n = usize::from(noise);
                    let code = a * 7 + p * 3 + t * 5 + n * 2;
                    let submitted = code % 11 != 4;
                    let diagnosis = if !submitted {
                        Some(false)
                    } else if code % 13 == 6 {
                        None
                    } else {
                        Some(code % 3 != 0)
                    };
                    let mitigation = code % 4 != 1;
                    v.push(Spec {
                        agent,
                        problem,
                        trial: format!("{}{}", if noise { "n" } else { "q" }, t + 1),
                        noise,
                        diagnosis,
                        submitted,
                        mitigation,
                        ttd: 20.0 + code as f64 * 1.5,
                        ttm: mitigation.then_some(100.0 + code as f64 * 4.0),
                        tokens: (1000 * (code as u64 + 1), 100 * (code as u64 % 5 + 1)),
                    });
                }
            }
        }
    }
    v
}

fn run_json(s: &Spec) -> Value {
    let mut diagnosis = json!({"submitted": s.submitted, "metrics": {"root_cause_entity_f1": 0.5}});
    // A session that got no diagnosis records no pass: the board fails it all the same.
    if let Some(p) = s.diagnosis.filter(|_| s.submitted) {
        diagnosis["pass"] = json!(p);
    }
    json!({
        "schema_version": 2, "agent": s.agent, "problem_id": s.problem, "trial": s.trial,
        "mode": "live", "started_at": "2026-11-22T08:00:00Z", "seed": 7, "noise": s.noise,
        "ended": "submitted",
        "output": s.submitted.then(|| json!({"diagnosis": "the cart is broken"})),
        "ttd_secs": s.ttd, "ttm_secs": s.ttm,
        "diagnosis": diagnosis,
        "mitigation": {"submitted": true, "success": s.mitigation,
                       "reasons": if s.mitigation { json!([]) } else { json!(["pods not ready: 1/2"]) },
                       "grading_secs": 3.0},
        "agent_usage": {"input_tokens": s.tokens.0, "output_tokens": s.tokens.1, "steps": 4},
    })
}

fn write_tree(root: &Path, specs: &[Spec]) {
    for s in specs {
        let path = root
            .join(s.agent)
            .join(s.problem)
            .join(&s.trial)
            .join("run.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, serde_json::to_vec_pretty(&run_json(s)).unwrap()).unwrap();
    }
}

/// pass@k by enumerating every k-subset of the trials: the share of subsets with a pass.
fn brute_pass_at_k(outcomes: &[bool], k: usize) -> Option<f64> {
    let n = outcomes.len();
    if n < k {
        return None;
    }
    let (mut subsets, mut with_pass) = (0u32, 0u32);
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != k {
            continue;
        }
        subsets += 1;
        if (0..n).any(|i| mask & (1 << i) != 0 && outcomes[i]) {
            with_pass += 1;
        }
    }
    Some(f64::from(with_pass) / f64::from(subsets))
}

fn close(a: &Value, b: Option<f64>, what: &str) {
    match b {
        None => assert!(a.is_null(), "{what}: expected null, got {a}"),
        Some(b) => {
            let a = a
                .as_f64()
                .unwrap_or_else(|| panic!("{what}: expected {b}, got {a}"));
            assert!((a - b).abs() < 1e-9, "{what}: expected {b}, got {a}");
        }
    }
}

fn rate(xs: &[Option<bool>]) -> (usize, usize, Option<f64>) {
    let known: Vec<bool> = xs.iter().flatten().copied().collect();
    let passed = known.iter().filter(|x| **x).count();
    let r = (!known.is_empty()).then(|| passed as f64 / known.len() as f64);
    (passed, known.len(), r)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

fn avg(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

#[test]
fn the_board_of_session_runs_matches_counting_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("runs/board");
    let specs = table();
    write_tree(&root, &specs);
    let out_dir = dir.path().join("board");
    let out = Command::new(env!("CARGO_BIN_EXE_judge"))
        .args(["report", &root.display().to_string(), "--out"])
        .arg(&out_dir)
        .args(["--k", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Where the diagnoses come from is said.
    assert!(
        stdout.contains("in-loop judge records (run.json)"),
        "{stdout}"
    );
    assert!(!out_dir.join("leaderboard.json").exists());
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    assert!(html.contains("Diag %") && html.contains("alpha") && html.contains("in-loop judge"));
    let b: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("board.json")).unwrap()).unwrap();
    let rows = b["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "two agents × noise on/off");

    let mut groups: BTreeMap<(&str, bool), Vec<&Spec>> = BTreeMap::new();
    for s in &specs {
        groups.entry((s.agent, s.noise)).or_default().push(s);
    }
    let undecided = specs.iter().filter(|s| s.diagnosis.is_none()).count();
    assert!(undecided > 0, "the table exercises undecided diagnoses");
    assert!(specs.iter().any(|s| !s.submitted));
    assert_eq!(
        b["decided_by"]["session"].as_u64().unwrap() as usize,
        specs.len() - undecided
    );
    for ((agent, noise), runs) in &groups {
        let row = rows
            .iter()
            .find(|r| r["agent"] == *agent && r["noise"] == *noise)
            .unwrap_or_else(|| panic!("no row for {agent} noise={noise}"));
        let what = format!("{agent}/noise={noise}");
        assert_eq!(row["runs"].as_u64().unwrap() as usize, runs.len());
        assert_eq!(row["problems"], 3);
        let diag: Vec<Option<bool>> = runs.iter().map(|s| s.diagnosis).collect();
        let mitig: Vec<Option<bool>> = runs.iter().map(|s| Some(s.mitigation)).collect();
        let e2e: Vec<Option<bool>> = runs
            .iter()
            .map(|s| match s.diagnosis {
                Some(d) => Some(d && s.mitigation),
                None if !s.mitigation => Some(false),
                None => None,
            })
            .collect();
        for (name, xs) in [("diagnosis", &diag), ("mitigation", &mitig), ("e2e", &e2e)] {
            let (passed, known, r) = rate(xs);
            assert_eq!(
                row[name]["passed"].as_u64().unwrap() as usize,
                passed,
                "{what} {name}"
            );
            assert_eq!(
                row[name]["known"].as_u64().unwrap() as usize,
                known,
                "{what} {name}"
            );
            close(&row[name]["rate"], r, &format!("{what} {name} rate"));
        }
        let ttd: Vec<f64> = runs.iter().map(|s| s.ttd).collect();
        let ttm: Vec<f64> = runs.iter().filter_map(|s| s.ttm).collect();
        close(&row["ttd"]["mean"], avg(&ttd), &format!("{what} ttd mean"));
        close(
            &row["ttd"]["median"],
            median(ttd),
            &format!("{what} ttd median"),
        );
        assert_eq!(row["ttm"]["n"].as_u64().unwrap() as usize, ttm.len());
        close(&row["ttm"]["mean"], avg(&ttm), &format!("{what} ttm mean"));
        close(
            &row["ttm"]["median"],
            median(ttm),
            &format!("{what} ttm median"),
        );
        let input: u64 = runs.iter().map(|s| s.tokens.0).sum();
        let output: u64 = runs.iter().map(|s| s.tokens.1).sum();
        assert_eq!(row["tokens"]["input_total"].as_u64().unwrap(), input);
        assert_eq!(row["tokens"]["output_total"].as_u64().unwrap(), output);
        close(
            &row["tokens"]["input_mean"],
            Some(input as f64 / runs.len() as f64),
            &format!("{what} input mean"),
        );
        // pass@2 per problem by enumeration, then averaged over problems with two known trials.
        assert_eq!(row["pass_at_k"]["k"], 2);
        for (name, pick) in [("diagnosis", &diag), ("mitigation", &mitig), ("e2e", &e2e)] {
            let mut per_problem = Vec::new();
            for problem in ["p1", "p2", "p3"] {
                let outcomes: Vec<bool> = runs
                    .iter()
                    .zip(pick.iter())
                    .filter(|(s, _)| s.problem == problem)
                    .filter_map(|(_, o)| *o)
                    .collect();
                if let Some(p) = brute_pass_at_k(&outcomes, 2) {
                    per_problem.push(p);
                }
            }
            close(
                &row["pass_at_k"][name],
                avg(&per_problem),
                &format!("{what} pass@2 {name}"),
            );
        }
    }

    // A run given twice (the same tree twice) is refused, naming it.
    let out = Command::new(env!("CARGO_BIN_EXE_judge"))
        .args(["report"])
        .arg(&root)
        .arg(root.join("alpha"))
        .arg("--out")
        .arg(dir.path().join("twice"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("given twice"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judge_run_over_version_2_runs_keeps_what_the_session_measured() {
    common::setup();
    let dir = tempfile::tempdir().unwrap();
    let truths = common::truths();
    let (problem, truth) = truths.iter().next().unwrap();
    let (rc, rc_name) = common::root_cause(truth);
    let entity = |name: &str| {
        json!({"entities": [{"name": format!("{}/{}/{name}", rc.namespace.as_deref().unwrap_or("default"), rc.kind),
                             "contributing_factor": true}]})
    };
    // Trial 1 names the root cause and mitigated; trial 2 names something else and did not; trial
    // 3 never submitted.
    for (trial, output, success, noise) in [
        ("1", Some(entity(&rc_name)), true, true),
        ("2", Some(entity("no-such-thing")), false, true),
        ("3", None, false, false),
    ] {
        let run = json!({
            "schema_version": 2, "agent": "live-agent", "problem_id": problem, "trial": trial,
            "mode": "live", "started_at": "2026-11-22T08:00:00Z", "noise": noise, "seed": 42,
            "ended": if output.is_some() { "submitted" } else { "time_limit" },
            "output": output, "error": output.is_none().then_some("time limit"),
            "ttd_secs": output.is_some().then_some(30.0 + trial.parse::<f64>().unwrap()),
            "ttm_secs": success.then_some(95.5),
            "mitigation": {"submitted": output.is_some(), "success": success,
                           "reasons": if success { json!([]) } else { json!(["frontend error rate 0.4 > 0.05"]) },
                           "grading_secs": 2.5},
            "agent_usage": {"input_tokens": 5000, "output_tokens": 700},
        });
        let p = dir
            .path()
            .join("runs/live-agent")
            .join(problem)
            .join(trial)
            .join("run.json");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, serde_json::to_vec(&run).unwrap()).unwrap();
    }
    let mut scan = judge::layout::Scan::default();
    judge::layout::scan(&dir.path().join("runs"), "x", None, &truths, &mut scan).unwrap();
    assert_eq!(scan.items.len(), 3);
    let out = dir.path().join("judged");
    let mut cfg = common::run_config(common::llm_config("http://127.0.0.1:9/v1"), &out, None);
    cfg.llm = None;
    let (results, _) = runner::run(scan.items, cfg).await.unwrap();
    // What the session measured comes through results.json unchanged.
    let reread = judge::report::load_results(&out).unwrap();
    assert_eq!(reread, results);
    let by = |t: &str| {
        reread
            .items
            .iter()
            .find(|i| i.item.trial == t)
            .unwrap()
            .clone()
    };
    let one = by("1");
    let facts = one.run.as_ref().unwrap();
    assert_eq!(
        (
            facts.noise,
            facts.seed,
            facts.ttd_secs,
            facts.ttm_secs,
            facts.agent_usage.as_ref().map(|u| u.input_tokens)
        ),
        (Some(true), Some(42), Some(31.0), Some(95.5), Some(5000))
    );
    assert!(facts.mitigation.as_ref().unwrap().success);
    assert_eq!(
        by("2").run.unwrap().mitigation.unwrap().reasons,
        ["frontend error rate 0.4 > 0.05"]
    );
    // Without an LLM the rule decides: the named root cause passes, the other name fails, and a
    // run without output fails.
    assert_eq!(
        (one.rule_pass, by("2").rule_pass, by("3").rule_pass),
        (Some(true), Some(false), Some(false))
    );
    assert_eq!(one.metrics["root_cause_entity_f1"], 1.0);

    // The board of the judge run: the rule decided, and session facts give the other columns.
    let sources = vec![board::load_source(&out).unwrap()];
    let b = board::build(&board::runs(&sources).unwrap(), None).unwrap();
    assert_eq!(b.decided_by.get(&DecidedBy::Rule), Some(&3));
    let on = b.rows.iter().find(|r| r.noise == Some(true)).unwrap();
    assert_eq!(
        (
            on.runs,
            on.diagnosis.passed,
            on.mitigation.passed,
            on.e2e.passed
        ),
        (2, 1, 1, 1)
    );
    assert_eq!(on.ttd.mean, Some(31.5));
    assert_eq!(on.ttm.median, Some(95.5));
    let off = b.rows.iter().find(|r| r.noise == Some(false)).unwrap();
    assert_eq!((off.runs, off.e2e.rate, off.ttd.n), (1, Some(0.0), 0));
}
