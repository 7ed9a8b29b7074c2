//! `collector inject` on the real kernel, as root, with real processes in real cgroup v2 directories:
//! connect failures at rate 1 and at rate 0.3 (within a 5-sigma binomial bound over 10,000
//! connects), nothing outside the cgroup touched, a process started later in the cgroup faulted,
//! the window's end, DNS to :53, packet loss on a UDP echo, kill -9 of the injector, the probe, and
//! an LSM-only request on a kernel that refuses BPF LSM.
//!
//! These tests never skip: without root, python3 or bpftool they fail with what to do, and on a
//! kernel that cannot load the cgroup programs they fail with the probe's reason.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/inject/netclient.py");

fn collector() -> Command {
    Command::new(env!("CARGO_BIN_EXE_collector"))
}

/// Root, python3 and bpftool present, and the cgroup programs load here: once per test binary.
fn preflight() -> &'static Value {
    static PROBE: OnceLock<Value> = OnceLock::new();
    PROBE.get_or_init(|| {
        assert!(
            rustix::process::geteuid().is_root(),
            "the eBPF injection tests load BPF programs and create cgroups: run them as root"
        );
        for (tool, package) in [("python3", "python3"), ("bpftool", "bpftool")] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .output()
                    .is_ok_and(|o| o.status.success()),
                "these tests need {tool}: apt-get install {package}"
            );
        }
        let journal = tempfile::tempdir().unwrap();
        let out = collector()
            .args(["inject", "probe", "--json", "--journal"])
            .arg(journal.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        for m in report["mechanisms"].as_array().unwrap() {
            if m["tier"] == "cgroup" {
                assert!(
                    m["available"].as_bool().unwrap(),
                    "this machine cannot run cgroup BPF programs: {}",
                    m["reason"]
                );
            }
        }
        report
    })
}

/// A fresh cgroup v2 directory, removed (after its processes are gone) when dropped.
struct TestCgroup(PathBuf);

impl TestCgroup {
    fn new() -> TestCgroup {
        let root = PathBuf::from(preflight()["kernel"]["cgroup2"].as_str().unwrap());
        let path = root
            .join("faultline-test")
            .join(uuid::Uuid::new_v4().simple().to_string());
        std::fs::create_dir_all(&path).unwrap();
        TestCgroup(path)
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Runs the test client inside `cgroup` (or outside when `None`) and returns its JSON report.
fn client(cgroup: Option<&Path>, args: &[&str]) -> Value {
    let mut cmd = Command::new("sh");
    match cgroup {
        Some(cg) => cmd
            .arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(cg.join("cgroup.procs")),
        None => cmd.arg("-c").arg(r#"exec "$@""#).arg("sh"),
    };
    let out = cmd.arg("python3").arg(CLIENT).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "client {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A running `collector inject ... --json`, with its ready line read.
struct Injector {
    child: Child,
    stdout: BufReader<ChildStdout>,
    ready: Value,
    journal: tempfile::TempDir,
}

impl Injector {
    fn start(args: &[&str]) -> Injector {
        let journal = tempfile::tempdir().unwrap();
        // The flags go right after the subcommand: anything after `--` is the command to run.
        let mut child = collector()
            .arg("inject")
            .arg(args[0])
            .arg("--json")
            .arg("--journal")
            .arg(journal.path())
            .args(&args[1..])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        if line.is_empty() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "collector inject {args:?} ended before it was ready: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ready: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(ready["event"], "ready", "{line}");
        Injector {
            child,
            stdout,
            ready,
            journal,
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// Waits for the injector to end by itself (or after a signal) and returns its ended line.
    fn ended(mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "injector exited with {status}");
        let ended: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(ended["event"], "ended", "{line}");
        let left: Vec<_> = std::fs::read_dir(self.journal.path()).unwrap().collect();
        assert!(
            left.is_empty(),
            "an injection that ended cleanly leaves no journal entry"
        );
        ended
    }

    fn stop(self) -> Value {
        self.signal(rustix::process::Signal::TERM);
        self.ended()
    }

    /// kill -9, and wait until it is gone.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// A test that fails midway still ends its injector (which then undoes its fault).
impl Drop for Injector {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(rustix::process::Signal::TERM);
            let _ = self.child.wait();
        }
    }
}

/// connect() in the cgroup fails with ECONNREFUSED at `rate`, until stopped.
fn fault_connects(cg: &TestCgroup, rate: &str) -> Injector {
    let cgroup = cg.0.to_str().unwrap();
    Injector::start(&[
        "syscall", "--cgroup", cgroup, "--op", "connect", "--rate", rate,
    ])
}

/// A TCP listener on loopback that accepts and closes every connection.
/// `collector recover --json` over a journal, which must succeed: what it reports.
fn recover(journal: &Path) -> Value {
    let out = collector()
        .args(["recover", "--json", "--journal"])
        .arg(journal)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice::<Value>(&out.stdout).unwrap()
}

fn listener() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            drop(conn);
        }
    });
    addr
}

fn errors(report: &Value, errno: &str) -> u64 {
    report["errors"][errno].as_u64().unwrap_or(0)
}

/// Programs bpftool sees attached to a cgroup (its own view, not ours).
fn attached(cgroup: &Path) -> Vec<Value> {
    let out = Command::new("bpftool")
        .args(["cgroup", "show"])
        .arg(cgroup)
        .arg("-j")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if out.stdout.iter().all(u8::is_ascii_whitespace) {
        return Vec::new();
    }
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn connect_fails_in_the_cgroup_only_later_processes_too_and_not_after_the_window() {
    preflight();
    let cg = TestCgroup::new();
    let addr = listener();
    let (host, port) = ("127.0.0.1", addr.port().to_string());
    let injector = Injector::start(&[
        "syscall",
        "--cgroup",
        cg.0.to_str().unwrap(),
        "--op",
        "connect",
        "--errno",
        "ECONNREFUSED",
        "--rate",
        "1",
        "--for",
        "15s",
    ]);
    let until = chrono::DateTime::parse_from_rfc3339(injector.ready["until"].as_str().unwrap())
        .unwrap()
        .timestamp() as f64;

    let inside = client(Some(&cg.0), &["connect", host, &port, "200"]);
    assert_eq!(
        (inside["ok"].as_u64(), errors(&inside, "ECONNREFUSED")),
        (Some(0), 200)
    );
    let outside = client(None, &["connect", host, &port, "200"]);
    assert_eq!(outside["ok"].as_u64(), Some(200), "{outside}");
    // A process started after the fault, in the same cgroup (a restarted container), is faulted.
    let later = client(Some(&cg.0), &["connect", host, &port, "100"]);
    assert_eq!(errors(&later, "ECONNREFUSED"), 100, "{later}");
    assert!(
        later["finished_at"].as_f64().unwrap() < until,
        "the clients ran past the 15 s window on this machine"
    );

    let ended = injector.ended();
    assert_eq!(ended["ended"], "window");
    assert_eq!(ended["counts"]["faulted"], 300);
    let after = client(Some(&cg.0), &["connect", host, &port, "200"]);
    assert_eq!(after["ok"].as_u64(), Some(200), "after the window: {after}");
    assert!(attached(&cg.0).is_empty());
}

#[test]
fn connect_failures_at_rate_0_3_over_10000_connects_are_within_5_sigma() {
    preflight();
    let cg = TestCgroup::new();
    let addr = listener();
    let injector = fault_connects(&cg, "0.3");
    let n = 10_000u64;
    let report = client(
        Some(&cg.0),
        &["connect", "127.0.0.1", &addr.port().to_string(), "10000"],
    );
    let failed = errors(&report, "ECONNREFUSED");
    assert_eq!(
        failed + report["ok"].as_u64().unwrap(),
        n,
        "only ECONNREFUSED: {report}"
    );
    // Binomial(10000, 0.3): sd = sqrt(n p (1-p)) = 45.8; 5 sd is 229 (a false alarm ~ 1 in 2 million).
    let sd = (n as f64 * 0.3 * 0.7).sqrt();
    let share = failed as f64;
    assert!(
        (share - 3000.0).abs() <= 5.0 * sd,
        "{failed} of {n} connects failed, expected 3000 ± {:.0}",
        5.0 * sd
    );
    let ended = injector.stop();
    assert_eq!(ended["ended"], "signal");
    assert_eq!(ended["counts"]["matched"], n);
    assert_eq!(ended["counts"]["faulted"], failed);
}

#[test]
fn dns_to_port_53_fails_inside_the_cgroup_only() {
    preflight();
    let cg = TestCgroup::new();
    // A resolver stand-in on its own loopback address, port 53 (UDP and TCP), and a UDP service on
    // another port that the fault must leave alone.
    let host = "127.0.53.1";
    let udp53 = UdpSocket::bind((host, 53)).expect("port 53 on 127.0.53.1 is free");
    let tcp53 = TcpListener::bind((host, 53)).unwrap();
    std::thread::spawn(move || {
        for c in tcp53.incoming() {
            drop(c)
        }
    });
    let other = UdpSocket::bind((host, 0)).unwrap();
    let other_port = other.local_addr().unwrap().port().to_string();
    let injector = Injector::start(&["syscall", "--cgroup", cg.0.to_str().unwrap(), "--op", "dns"]);

    let udp = client(Some(&cg.0), &["udp", host, "53", "50"]);
    assert_eq!(errors(&udp, "ECONNREFUSED"), 50, "{udp}");
    let tcp = client(Some(&cg.0), &["connect", host, "53", "50"]);
    assert_eq!(errors(&tcp, "ECONNREFUSED"), 50, "{tcp}");
    let udp_other = client(Some(&cg.0), &["udp", host, &other_port, "50"]);
    assert_eq!(udp_other["ok"], 50, "{udp_other}");

    let outside_udp = client(None, &["udp", host, "53", "50"]);
    assert_eq!(outside_udp["ok"], 50, "{outside_udp}");
    let outside_tcp = client(None, &["connect", host, "53", "50"]);
    assert_eq!(outside_tcp["ok"], 50, "{outside_tcp}");
    // What the outside client sent really arrived.
    let mut buf = [0u8; 8];
    udp53
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(udp53.recv(&mut buf).unwrap(), 1);
    injector.stop();
}

#[test]
fn packet_drop_at_0_2_gives_the_expected_loss_on_a_udp_echo() {
    preflight();
    let cg = TestCgroup::new();
    let echo_server = || {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port().to_string();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while let Ok((n, from)) = server.recv_from(&mut buf) {
                let _ = server.send_to(&buf[..n], from);
            }
        });
        port
    };
    let port = echo_server();
    // The fault names this server's port: an echo server on another port is not touched.
    let other = echo_server();
    let n = 4000u64;
    let clean = client(None, &["echo", "127.0.0.1", &port, "1000"]);
    assert_eq!(
        clean["received"], 1000,
        "loopback itself loses nothing: {clean}"
    );

    let injector = Injector::start(&[
        "network",
        "--cgroup",
        cg.0.to_str().unwrap(),
        "--drop",
        "0.2",
        "--port",
        &port,
        "--proto",
        "udp",
    ]);
    let report = client(Some(&cg.0), &["echo", "127.0.0.1", &port, "4000"]);
    let untouched = client(Some(&cg.0), &["echo", "127.0.0.1", &other, "1000"]);
    let ended = injector.stop();
    assert_eq!(
        untouched["received"], 1000,
        "another port loses nothing: {untouched}"
    );

    // Dropped sends are silent for UDP (no error), as on a lossy link.
    assert_eq!(report["sent"], n, "{report}");
    // Each request and each answer is lost with p = 0.2: a round trip survives with 0.8².
    let lost = (n - report["received"].as_u64().unwrap()) as f64;
    let p = 1.0 - 0.8 * 0.8;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (lost - n as f64 * p).abs() <= 5.0 * sd,
        "{lost} of {n} echoes lost, expected {:.0} ± {:.0}",
        n as f64 * p,
        5.0 * sd
    );
    // The programs' own count: every packet a Bernoulli(0.2) trial.
    let matched = ended["counts"]["matched"].as_f64().unwrap();
    let faulted = ended["counts"]["faulted"].as_f64().unwrap();
    let sd = (matched * 0.2 * 0.8).sqrt();
    assert!((faulted - matched * 0.2).abs() <= 5.0 * sd, "{ended}");
}

#[test]
fn kill_9_of_the_injector_leaves_nothing_attached_and_recover_clears_the_journal() {
    preflight();
    let cg = TestCgroup::new();
    let addr = listener();
    let port = addr.port().to_string();
    let injector = fault_connects(&cg, "1");
    let faulted = client(Some(&cg.0), &["connect", "127.0.0.1", &port, "10"]);
    assert_eq!(errors(&faulted, "ECONNREFUSED"), 10);
    let names: Vec<String> = attached(&cg.0)
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        names.contains(&"fl_connect4".to_owned()),
        "bpftool sees {names:?}"
    );

    let mut injector = injector;
    injector.kill();
    let journal = injector.journal.path();
    // The links were the killed process's file descriptors: the kernel detaches them.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !attached(&cg.0).is_empty() {
        assert!(
            Instant::now() < deadline,
            "still attached after kill -9: {:?}",
            attached(&cg.0)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = client(Some(&cg.0), &["connect", "127.0.0.1", &port, "10"]);
    assert_eq!(after["ok"], 10, "{after}");

    // The journal still lists the injection; recover proves it gone and clears it, twice.
    assert_eq!(std::fs::read_dir(journal).unwrap().count(), 1);
    let first = recover(journal);
    assert_eq!(first[0]["reverted"], true, "{first}");
    assert!(
        first[0]["detail"]
            .as_str()
            .unwrap()
            .contains("no longer loaded"),
        "{first}"
    );
    assert_eq!(recover(journal), serde_json::json!([]));
}

#[test]
fn recover_moves_processes_out_of_a_command_cgroup_left_by_a_killed_injector() {
    preflight();
    let injector = Injector::start(&["syscall", "--op", "connect", "--", "sleep", "600"]);
    let cgroup = PathBuf::from(injector.ready["cgroup"].as_str().unwrap());
    let pid = injector.ready["command_pid"].as_u64().unwrap();
    let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
    assert_eq!(
        procs.trim(),
        pid.to_string(),
        "the command runs in its own cgroup"
    );

    let mut injector = injector;
    injector.kill();
    let done = recover(injector.journal.path());
    assert_eq!(
        done.as_array().unwrap().len(),
        2,
        "the links, then the cgroup: {done}"
    );
    assert!(!cgroup.exists(), "recover removed {}", cgroup.display());
    let now_in = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(!now_in.contains("/faultline/"), "{now_in}");
    let _ = Command::new("kill").arg(pid.to_string()).status();
}

#[test]
fn probe_reports_every_mechanism_with_the_kernels_answer() {
    let report = preflight();
    for m in report["mechanisms"].as_array().unwrap() {
        if m["available"] == false {
            // A refusal is the kernel's answer at load or attach, with its errno.
            assert!(
                m["refusal"]["stage"] == "load" || m["refusal"]["stage"] == "attach",
                "{m}"
            );
            let reason = m["reason"].as_str().unwrap();
            assert!(reason.contains(m["section"].as_str().unwrap()), "{reason}");
        }
    }
    // The human form says the same.
    let journal = tempfile::tempdir().unwrap();
    let out = collector()
        .args(["inject", "probe", "--journal"])
        .arg(journal.path())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("cgroup/connect4") && text.contains("available"),
        "{text}"
    );
}

#[test]
fn an_lsm_request_fails_with_the_probes_reason_and_changes_nothing_where_lsm_is_refused() {
    let report = preflight();
    let lsm = report["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["section"] == "lsm/file_permission")
        .unwrap();
    let cg = TestCgroup::new();
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("block");
    std::fs::write(&file, b"sector").unwrap();
    let journal = tempfile::tempdir().unwrap();
    let args = |extra: &[&str]| {
        let mut cmd = collector();
        cmd.args(["inject", "syscall", "--cgroup"])
            .arg(&cg.0)
            .args(["--op", "read", "--path-prefix"])
            .arg(data.path())
            .arg("--journal")
            .arg(journal.path())
            .args(extra);
        cmd
    };
    if lsm["available"] == true {
        // A kernel that allows BPF LSM: the read really fails with EIO, inside the cgroup only.
        let mut child = args(&["--json"]).stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let inside = client(Some(&cg.0), &["read", file.to_str().unwrap()]);
        let outside = client(None, &["read", file.to_str().unwrap()]);
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        child.wait().unwrap();
        assert_eq!(errors(&inside, "EIO"), 1, "{inside}");
        assert_eq!(outside["ok"], 6, "{outside}");
        return;
    }
    let reason = lsm["reason"].as_str().unwrap();
    let out = args(&[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(reason),
        "the probe's reason `{reason}` in: {stderr}"
    );
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(journal.path()).unwrap().count(),
        0,
        "nothing journaled"
    );
    assert!(attached(&cg.0).is_empty());
    let read = client(Some(&cg.0), &["read", file.to_str().unwrap()]);
    assert_eq!(read["ok"], 6, "{read}");
}

#[test]
fn recover_ends_a_running_injector_which_undoes_its_own_fault() {
    preflight();
    let cg = TestCgroup::new();
    let injector = fault_connects(&cg, "1");
    let done = recover(injector.journal.path());
    assert!(
        done[0]["detail"]
            .as_str()
            .unwrap()
            .contains("undid it on SIGTERM"),
        "{done}"
    );
    let ended = injector.ended();
    assert_eq!(ended["ended"], "signal");
    assert_eq!(ended["released"], true);
    assert!(attached(&cg.0).is_empty());
}
