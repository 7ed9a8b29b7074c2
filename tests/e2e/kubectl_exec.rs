//! The real `kubectl exec` (WebSocket `v5.channel.k8s.io`) into simulated containers of
//! `collector env up`: stdout, stderr and exit codes as kubectl shows them, stdin piped in, tools
//! an image lacks, a probe that sees the fault and then the fix, the database CLI mending a
//! revoked role, hostile commands that stay bounded, and the refusals a real apiserver gives.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use e2e::live::{GEO_PORT_FIX, Live, NS, up};

/// The first pod of a workload, by name prefix. A test that holds the name across calls starts
/// its environment without noise (`--no-noise`): a noise pod kill would replace the pod, under a
/// new name, between kubectl naming it and using it.
fn pod(l: &Live, workload: &str) -> String {
    let names = l.ok(&["-n", NS, "get", "pods", "-o", "name"]);
    names
        .lines()
        .map(|n| n.trim_start_matches("pod/"))
        .find(|n| {
            n.strip_prefix(workload)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|rest| rest.matches('-').count() <= 1)
        })
        .unwrap_or_else(|| panic!("no pod of {workload} in {names}"))
        .to_string()
}

fn exec(l: &Live, pod: &str, argv: &[&str]) -> Output {
    let mut args = vec!["-n", NS, "exec", pod, "--"];
    args.extend_from_slice(argv);
    l.kubectl(&args)
}

/// kubectl in the environment's namespace with `input` piped to its stdin, which then closes.
fn with_stdin(l: &Live, args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", &l.kubeconfig)
        .args(["-n", NS])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn exec_streams_and_exit_codes_are_what_kubectl_shows() {
    let l = up("hotel-geo-target-port", &["--no-noise"]);
    let frontend = pod(&l, "frontend");
    let o = exec(
        &l,
        &frontend,
        &["cat", "/etc/frontend-runtime/SEARCH_BACKEND_VERSION"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "v1");
    let o = exec(
        &l,
        &frontend,
        &["sh", "-c", "echo out; echo err >&2; exit 3"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(stdout(&o), "out\n");
    assert!(stderr(&o).starts_with("err\n"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("command terminated with exit code 3"),
        "{}",
        stderr(&o)
    );
    // Env as the kubelet set it, through a pipeline.
    let o = exec(
        &l,
        &frontend,
        &["sh", "-c", "env | grep ^GEO_SERVICE_PORT="],
    );
    assert_eq!(stdout(&o), "GEO_SERVICE_PORT=8083\n");
    // stdin piped through `-i`.
    let o = with_stdin(
        &l,
        &["exec", "-i", &frontend, "--", "sh"],
        b"hostname\ncat /etc/hostname | wc -c\nexit 4\necho never\n",
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{frontend}\n{}\n", frontend.len() + 1));
    // A binary the image does not ship.
    let o = exec(&l, &frontend, &["nslookup", "geo"]);
    assert_eq!(o.status.code(), Some(126), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("executable file not found in $PATH"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_probe_from_inside_sees_the_fault_and_then_the_fix() {
    let l = up("hotel-geo-target-port", &["--no-noise"]);
    let frontend = pod(&l, "frontend");
    let probe = ["curl", "-sS", "--max-time", "3", "http://geo:8083/"];
    let o = exec(&l, &frontend, &probe);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("curl: (7) Failed to connect to geo port 8083"),
        "{}",
        stderr(&o)
    );
    l.ok(&["-n", NS, "patch", "svc", "geo", "-p", GEO_PORT_FIX]);
    // The endpoints follow within simulated seconds; then the gRPC server answers (in HTTP/2).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let o = exec(&l, &frontend, &probe);
        if o.status.code() == Some(1) {
            assert!(stderr(&o).contains("HTTP/0.9"), "{}", stderr(&o));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still refused after the fix: {}",
            stderr(&o)
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

#[test]
fn the_database_cli_mends_a_revoked_role() {
    let l = up("hotel-geo-mongo-auth-revoked", &["--no-noise"]);
    let mongo = pod(&l, "mongodb-geo");
    let script = l.ok(&[
        "-n",
        NS,
        "exec",
        &mongo,
        "--",
        "cat",
        "/docker-entrypoint-initdb.d/k8s-geo-mongo.sh",
    ]);
    assert!(script.contains("ADMIN_PWD=\"admin\""), "{script}");
    let users = [
        "mongo",
        "admin",
        "-u",
        "admin",
        "-p",
        "admin",
        "--quiet",
        "--eval",
        "db.getUsers()",
    ];
    let before = stdout(&exec(&l, &mongo, &users));
    assert!(before.contains("\"roles\" : [ ]"), "{before}");
    let o = exec(
        &l,
        &mongo,
        &[
            "mongo",
            "admin",
            "-u",
            "admin",
            "-p",
            "admin",
            "--eval",
            "db.grantRolesToUser('root', [{role: 'readWrite', db: 'geo-db'}])",
        ],
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let after = stdout(&exec(&l, &mongo, &users));
    assert!(after.contains("readWrite"), "{after}");
}

#[test]
fn hostile_commands_are_bounded_and_the_server_keeps_answering() {
    let l = up("hotel-geo-target-port", &["--no-noise"]);
    let frontend = pod(&l, "frontend");
    let o = exec(&l, &frontend, &["sh", "-c", "yes"]);
    assert!(o.stdout.len() <= 4 << 20, "{} bytes", o.stdout.len());
    assert!(o.stdout.len() > 1 << 20, "{} bytes", o.stdout.len());
    let o = exec(&l, &frontend, &["sh", "-c", "while :; do :; done"]);
    assert_eq!(o.status.code(), Some(137), "{}", stderr(&o));
    let o = exec(&l, &frontend, &["sh", "-c", &"$(".repeat(10_000)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = exec(&l, &frontend, &["sh", "-c", "printf '\\000\\377\\001'"]);
    assert!(o.status.success());
    // Still serving.
    let o = exec(&l, &frontend, &["hostname"]);
    assert_eq!(stdout(&o).trim(), frontend);
}

#[test]
fn refusals_are_the_apiservers() {
    let l = up("hotel-geo-target-port", &["--no-noise"]);
    let geo = pod(&l, "geo");
    let e = l.fails(&["-n", NS, "exec", &geo, "-c", "nope", "--", "ls"]);
    assert!(e.contains("container nope is not valid for pod"), "{e}");
    let e = l.fails(&["-n", NS, "exec", "geo-nosuch", "--", "ls"]);
    assert!(e.contains("pods \"geo-nosuch\" not found"), "{e}");
}

/// `kubectl port-forward` running in the background, and the local port it printed.
struct Forward {
    child: std::process::Child,
    port: u16,
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn port_forward(l: &Live, target: &str, remote: u16) -> Forward {
    use std::io::BufRead;
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", &l.kubeconfig)
        .args(["-n", NS, "port-forward", target, &format!(":{remote}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line)
        .expect("kubectl prints where it forwards");
    // kubectl prints a line per connection: its stdout is drained for as long as it runs (a
    // closed pipe would kill it at the first connection).
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    // "Forwarding from 127.0.0.1:41234 -> 5000"
    let port = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no local port in {line:?}"));
    Forward { child, port }
}

fn curl(port: u16, path: &str) -> Output {
    Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-o",
            "/dev/stderr",
            "-w",
            "%{http_code}",
        ])
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl is installed (apt-get install curl, or bash tests/run)")
}

#[test]
fn port_forward_reaches_the_program_and_shows_the_fault() {
    // Without noise: kubectl's tunnel holds the pod it resolved the Service to, and a noise pod
    // kill would end it between two requests.
    let l = up("hotel-geo-target-port", &["--no-noise"]);
    // A pod of the frontend, through its Service: its routes answer as the program does.
    let f = port_forward(&l, "svc/frontend", 5000);
    let o = curl(
        f.port,
        "/recommendations?require=rate&lat=38.0235&lon=-122.095",
    );
    assert_eq!(stdout(&o), "200", "{}", stderr(&o));
    let o = curl(f.port, "/no-such-route");
    assert_eq!(stdout(&o), "404", "{}", stderr(&o));
    // Another connection: kubectl keeps forwarding.
    let o = curl(f.port, "/");
    assert_eq!(stdout(&o), "200", "{}", stderr(&o));
    // A search needs geo, which the fault cut off: the frontend fails it, through the tunnel
    // as from inside the cluster. (Last: the fault's health checks may replace the pod, and
    // kubectl's tunnel to it ends then, as on a cluster.)
    let o = curl(
        f.port,
        "/hotels?inDate=2015-04-09&outDate=2015-04-10&lat=38.0235&lon=-122.095",
    );
    assert_eq!(stdout(&o), "500", "{}", stderr(&o));
    drop(f);
    // geo's Service targets a port geo's process does not listen on: kubectl resolves the
    // Service to that port and the connection is refused inside the pod.
    let f = port_forward(&l, "svc/geo", 8083);
    let o = curl(f.port, "/");
    assert!(!o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "000");
}

#[test]
fn kubectl_run_probes_from_inside_and_cleans_up() {
    let l = up("hotel-geo-target-port", &[]);
    let o = l.kubectl(&[
        "-n",
        NS,
        "run",
        "probe",
        "--rm",
        "-i",
        "--restart=Never",
        "--image=busybox",
        "--",
        "wget",
        "-qO-",
        "-T",
        "3",
        "http://frontend:5000/",
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).starts_with("OK"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("pod \"probe\" deleted"),
        "{}",
        stdout(&o)
    );
    // The same probe against geo's Service fails the way wget fails.
    let o = l.kubectl(&[
        "-n",
        NS,
        "run",
        "probe2",
        "--rm",
        "-i",
        "--restart=Never",
        "--image=busybox",
        "--",
        "nc",
        "-zv",
        "-w",
        "2",
        "geo",
        "8083",
    ]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(all.contains("Connection refused"), "{all}");
    // `--rm` deleted both pods: they go away (as on a cluster, after Terminating).
    l.ok(&[
        "-n",
        NS,
        "wait",
        "--for=delete",
        "pod/probe",
        "pod/probe2",
        "--timeout=60s",
    ]);
    let left = l.ok(&["-n", NS, "get", "pods", "-o", "name"]);
    assert!(!left.contains("probe"), "{left}");
}

#[test]
fn an_interactive_shell_and_a_debug_copy_work_like_a_cluster() {
    let l = up("hotel-geo-target-port", &["--no-noise"]);
    // `kubectl run -i -- sh`: kubectl attaches to the main process; stdin lines run in order and
    // `exit 5` ends the container, the pod and kubectl with that status.
    let o = with_stdin(
        &l,
        &[
            "run",
            "sh1",
            "--rm",
            "-i",
            "--restart=Never",
            "--image=busybox",
            "--",
            "sh",
        ],
        b"echo hi\nwget -qO- http://frontend:5000/; echo\nexit 5\n",
    );
    assert_eq!(o.status.code(), Some(5), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("hi\nOK\n"), "{}", stdout(&o));
    // `kubectl debug --copy-to`: a copy of a pod with a busybox container beside the app's,
    // which resolves names through the cluster's DNS.
    let mongo = pod(&l, "mongodb-geo");
    l.ok(&[
        "-n",
        NS,
        "debug",
        &mongo,
        "--copy-to=dbg",
        "--image=busybox",
        "--",
        "sleep",
        "3600",
    ]);
    l.ok(&[
        "-n",
        NS,
        "wait",
        "--for=condition=Ready",
        "pod/dbg",
        "--timeout=60s",
    ]);
    let debugger = l.ok(&[
        "-n",
        NS,
        "get",
        "pod",
        "dbg",
        "-o",
        "jsonpath={.spec.containers[1].name}",
    ]);
    assert!(debugger.starts_with("debugger-"), "{debugger}");
    let ip = l.geo_cluster_ip();
    let o = l.kubectl(&[
        "-n", NS, "exec", "dbg", "-c", &debugger, "--", "nslookup", "geo",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("Address: {ip}")),
        "{}",
        stdout(&o)
    );
}

/// `kubectl debug POD --image=busybox` without `--copy-to`: an ephemeral container joins the
/// running pod (PATCH `pods/NAME/ephemeralcontainers`), kubectl waits for the kubelet to start
/// it and attaches; with `--target` it sees the app's process. The pod is not replaced, and the
/// debugger's output is its log.
#[test]
fn an_ephemeral_debugger_joins_the_running_pod() {
    let l = up("hotel-geo-target-port", &["--no-noise"]);
    let frontend = pod(&l, "frontend");
    let field = |path: &str| {
        l.ok(&[
            "-n",
            NS,
            "get",
            "pod",
            &frontend,
            "-o",
            &format!("jsonpath={path}"),
        ])
    };
    let uid = field("{.metadata.uid}");
    let restarts = field("{.status.containerStatuses[0].restartCount}");
    let o = with_stdin(
        &l,
        &[
            "debug",
            "-i",
            &frontend,
            "--image=busybox",
            "-c",
            "dbg",
            "--target=hotel-reserv-frontend",
            "--profile=general",
        ],
        b"hostname\nps\nnslookup geo >/dev/null && echo resolved\ndate +%s\n",
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    // The container's clock is the wall clock the API's times follow.
    let host = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let inside: i64 = out
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .unwrap_or_else(|| panic!("date +%s: {out}"));
    assert!((inside - host).abs() < 120, "{inside} vs {host}: {out}");
    assert!(out.lines().any(|l| l == frontend), "hostname: {out}");
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("1 ") && l.ends_with("frontend")),
        "the target's process is pid 1: {out}"
    );
    assert!(out.contains("resolved"), "{out}");
    assert_eq!(field("{.metadata.uid}"), uid, "the pod was not replaced");
    assert_eq!(
        field("{.status.containerStatuses[0].restartCount}"),
        restarts
    );
    assert_eq!(
        field("{.spec.ephemeralContainers[0].targetContainerName}"),
        "hotel-reserv-frontend"
    );
    // The shell read the end of stdin: the debugger exits 0 and stays exited.
    l.ok(&[
        "-n",
        NS,
        "wait",
        &format!("pod/{frontend}"),
        "--for=jsonpath={.status.ephemeralContainerStatuses[0].state.terminated.exitCode}=0",
        "--timeout=30s",
    ]);
    let logs = l.ok(&["-n", NS, "logs", &frontend, "-c", "dbg"]);
    assert!(logs.contains("resolved"), "{logs}");
    // A debugger with a command runs it once; `kubectl logs` shows its output.
    l.ok(&[
        "-n",
        NS,
        "debug",
        &frontend,
        "--image=busybox",
        "-c",
        "probe",
        "--profile=general",
        "--",
        "nslookup",
        "geo",
    ]);
    l.ok(&[
        "-n",
        NS,
        "wait",
        &format!("pod/{frontend}"),
        "--for=jsonpath={.status.ephemeralContainerStatuses[1].state.terminated.reason}=Completed",
        "--timeout=30s",
    ]);
    let ip = l.geo_cluster_ip();
    let logs = l.ok(&["-n", NS, "logs", &frontend, "-c", "probe"]);
    assert!(logs.contains(&format!("Address: {ip}")), "{logs}");
    let described = l.ok(&["-n", NS, "describe", "pod", &frontend]);
    assert!(described.contains("Ephemeral Containers:"), "{described}");
    // The apiserver's refusals: a target that is not in the pod; the pod's own spec.
    let o = l.kubectl(&[
        "-n",
        NS,
        "debug",
        &frontend,
        "--image=busybox",
        "--target=nope",
        "--profile=general",
    ]);
    assert!(
        stderr(&o).contains("targetContainerName: Not found: \"nope\""),
        "{}",
        stderr(&o)
    );
    let o = l.kubectl(&[
        "-n",
        NS,
        "patch",
        "pod",
        &frontend,
        "-p",
        r#"{"spec":{"ephemeralContainers":[{"name":"x","image":"busybox"}]}}"#,
    ]);
    assert!(
        stderr(&o).contains("pod updates may not change fields"),
        "{}",
        stderr(&o)
    );
}
