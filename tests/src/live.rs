//! A running `collector env up` for end-to-end tests: the process, the kubeconfig it wrote, and
//! helpers that drive the real `kubectl` against it. Several test files share it (kubectl,
//! kube-rs, raw HTTP), so each starts its environment the same way.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::text;

/// The namespace of the hotel-reservation problems.
pub const NS: &str = "hotel-reservation";

/// The patch that fixes `hotel-geo-target-port`: geo's Service targets the port geo listens on.
pub const GEO_PORT_FIX: &str = r#"{"spec":{"ports":[{"port":8083,"targetPort":8083}]}}"#;

/// A running `collector env up` and the kubeconfig it wrote.
pub struct Live {
    child: Child,
    pub kubeconfig: PathBuf,
    pub cache: PathBuf,
    /// The ready line it printed (`kubernetes`, `ready_secs`, ...).
    pub endpoints: serde_json::Value,
    pub tmp: tempfile::TempDir,
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `collector env up --problem PROBLEM` (seed 3, two minutes past onset, five times real
/// speed) and waits for its ready line.
pub fn up(problem: &str, extra: &[&str]) -> Live {
    start(&["--problem", problem], "5", extra)
}

/// The same at real speed: served times are wall-clock times, for clients that take windows of
/// the wall clock (`collector capture`).
pub fn up_real_speed(problem: &str, extra: &[&str]) -> Live {
    start(&["--problem", problem], "1", extra)
}

/// Starts `collector env up --app APP`: the app healthy, nothing injected (a cluster to inject
/// into); with `--bare` in `extra`, the cluster without the app's objects.
pub fn up_app(app: &str, extra: &[&str]) -> Live {
    start(&["--app", app], "5", extra)
}

fn start(what: &[&str], speed: &str, extra: &[&str]) -> Live {
    use std::io::BufRead;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = tmp.path().join("kubeconfig");
    let mut child = Command::new(crate::binary("collector"))
        .args(["env", "up"])
        .args(what)
        .args(["--seed", "3", "--json"])
        .args(["--since-onset", "2m", "--speed", speed])
        .arg("--write-kubeconfig")
        .arg(&kubeconfig)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(tmp.path().join("env.stderr")).expect("a log file"))
        .spawn()
        .expect("collector runs");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("ready line");
    let endpoints: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("ready JSON expected, got {line:?}: {e}"));
    Live {
        child,
        kubeconfig,
        cache: tmp.path().join("kube-cache"),
        endpoints,
        tmp,
    }
}

impl Live {
    /// What the environment wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("env.stderr")).unwrap_or_default()
    }

    /// Fails the test if a thread of the environment panicked (its clock or controllers would
    /// have stopped while the API kept answering).
    pub fn assert_no_panic(&self) {
        let log = self.stderr();
        assert!(
            !log.contains("panicked"),
            "the environment panicked:\n{log}"
        );
    }

    /// Stops the environment as Ctrl-C does and waits until it has exited (having written its
    /// run, when started with `--out`); it must exit successfully.
    pub fn stop(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(sent.success(), "SIGINT to {pid}");
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "env up did not stop");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(status.success(), "env up: {status:?}");
    }

    /// The Kubernetes API's base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        self.endpoints["kubernetes"]
            .as_str()
            .unwrap_or_else(|| panic!("no kubernetes endpoint in {}", self.endpoints))
            .trim_end_matches('/')
            .to_string()
    }

    /// The real kubectl, configured for this environment.
    pub fn client(&self) -> Kubectl {
        Kubectl {
            kubeconfig: self.kubeconfig.clone(),
            cache: self.cache.clone(),
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.client().run(args)
    }

    /// Runs kubectl, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.client().ok(args)
    }

    /// A field of geo's Service, as kubectl prints it (`{.spec.clusterIP}`).
    fn geo_service(&self, path: &str) -> String {
        let jsonpath = format!("jsonpath={path}");
        self.ok(&["-n", NS, "get", "svc", "geo", "-o", &jsonpath])
    }

    /// The cluster IP of geo's Service.
    pub fn geo_cluster_ip(&self) -> String {
        self.geo_service("{.spec.clusterIP}")
    }

    /// The targetPort of geo's Service, as kubectl prints it.
    pub fn geo_target_port(&self) -> String {
        self.geo_service("{.spec.ports[0].targetPort}")
    }

    /// Runs kubectl, which must fail; its stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        self.client().fails(args)
    }

    /// Polls kubectl until `done` holds: the cluster reacts in simulated seconds, not at once.
    pub fn until(&self, args: &[&str], what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self.ok(args);
            if done(&out) {
                return out;
            }
            assert!(Instant::now() < deadline, "{what}: still {out}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The real kubectl with a kubeconfig (and a cache of its own).
#[derive(Clone)]
pub struct Kubectl {
    pub kubeconfig: PathBuf,
    pub cache: PathBuf,
}

impl Kubectl {
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .output()
            .expect("kubectl is installed (apt-get install kubectl, or bash tests/run)")
    }

    /// Runs kubectl, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl, which must fail; its stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} should fail: {}",
            text(&out)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// Writes `text` to `dir/name`; the path as a string for kubectl's `-f`.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("writing a manifest");
    p.to_str().expect("a UTF-8 path").to_string()
}

/// Text with every run of spaces made one: kubectl aligns describe columns per section.
pub fn squeezed(s: &str) -> String {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A problem snapshotted (`collector snapshot --seed 3` and `extra`) and its dataset served by
/// `collector replay` without any time flag, so that it looks live; kubectl points at it.
pub struct Replayed {
    pub replay: crate::fixture::ReplayProcess,
    pub kubectl: Kubectl,
    /// Holds the snapshot, kubeconfig and kubectl cache; dropped after the replay has stopped.
    _dir: tempfile::TempDir,
}

pub fn snapshot_replay(problem: &str, extra: &[&str]) -> Replayed {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("snap");
    let out_arg = out.to_str().expect("a UTF-8 path");
    let mut args = vec![
        "snapshot",
        "--problem",
        problem,
        "--seed",
        "3",
        "--out",
        out_arg,
    ];
    args.extend_from_slice(extra);
    let run = crate::run("collector", &args);
    assert!(run.status.success(), "{}", text(&run));
    let kubeconfig = dir.path().join("kubeconfig");
    let replay = crate::fixture::ReplayProcess::start(
        &out.join("dataset"),
        &[
            "--write-kubeconfig",
            kubeconfig.to_str().expect("a UTF-8 path"),
        ],
    );
    Replayed {
        replay,
        kubectl: Kubectl {
            kubeconfig,
            cache: dir.path().join("cache"),
        },
        _dir: dir,
    }
}
