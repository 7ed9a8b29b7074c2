//! Agents in the sandbox (the default of `collector live` and `collector eval`), real processes on
//! the real kernel: a hostile agent tries to leave its world (processes, binaries, paths,
//! environment, other ports, writes, kill) and gets nothing, in a live session and in an
//! evaluation, while the same attempts with `--no-sandbox` do get something and are recorded as
//! unsandboxed; a reference agent with kubectl, curl and jq diagnoses and fixes its problem inside
//! it; an agent given by its path sees its own file and nothing beside it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The scripted agents, copied out of the checkout: a sandboxed agent is bound its own code, and
/// the checkout's path is none of its business.
fn agents(into: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents");
    let to = into.join("agents");
    let status = Command::new("cp")
        .arg("-r")
        .arg(&from)
        .arg(&to)
        .status()
        .expect("cp runs");
    assert!(status.success());
    to
}

fn need_bwrap() {
    Command::new("bwrap")
        .arg("--version")
        .output()
        .unwrap_or_else(|_| {
            panic!("the sandbox needs bubblewrap: apt-get install bubblewrap (or bash tests/run)")
        });
}

fn collector(args: &[&str]) -> Output {
    Command::new(e2e::binary("collector"))
        .args(args)
        .env_remove("JUDGE_BASE_URL")
        .env_remove("JUDGE_MODEL")
        .env_remove("JUDGE_API_KEY")
        // Something of the session's own that no agent may read.
        .env("FAULTLINE_SECRET", "the-answer")
        .output()
        .expect("collector runs")
}

use e2e::read_json;

/// A server on the host's loopback that is not the session's: it answers every connection.
fn other_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nhi");
        }
    });
    port
}

/// Runs the escaping agent on a live problem, in the sandbox or not; its run.json and output.
fn escape(work: &Path, agents: &Path, sandboxed: bool, name: &str) -> (Value, String) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // An earlier run's answers, the way a session leaves them.
    let earlier = work.join("earlier-run");
    std::fs::create_dir_all(&earlier).expect("earlier run dir");
    std::fs::write(earlier.join("ground_truth.json"), "{}").expect("earlier ground truth");
    let journal = work.join("journal");
    std::fs::create_dir_all(&journal).expect("journal dir");
    let hunt = [
        repo.join("problems/catalog"),
        repo.join("Cargo.toml"),
        earlier.clone(),
        journal,
        e2e::binary("collector"),
        // Where this very run is being written (`--out`'s staging directory).
        work.join(".unfinished"),
    ]
    .iter()
    .map(|p| p.display().to_string())
    .collect::<Vec<_>>()
    .join(":");
    let out = work.join(name);
    let agent = agents.join("hacks/escape.sh");
    let (hunt_env, port_env) = (
        format!("HUNT_PATHS={hunt}"),
        format!("HUNT_PORT={}", other_server()),
    );
    let mut args = vec![
        "live",
        "--problem",
        "hotel-geo-target-port",
        "--no-noise",
        "--agent",
        agent.to_str().expect("UTF-8"),
        "--agent-env",
        &hunt_env,
        "--agent-env",
        &port_env,
        "--time-limit",
        "3m",
        "--quiet",
        "--json",
        "--out",
        out.to_str().expect("UTF-8"),
    ];
    let bind = agents.display().to_string();
    if sandboxed {
        args.extend_from_slice(&["--agent-bind", &bind]);
    } else {
        // Outside the sandbox it only reads: its kill and writes would reach the session itself,
        // every process named collector on the machine, and the checkout.
        args.extend_from_slice(&["--no-sandbox", "--agent-env", "HUNT_READ_ONLY=1"]);
    }
    let output = collector(&args);
    assert!(output.status.success(), "{}", e2e::text(&output));
    let stdout = std::fs::read_to_string(out.join("agent.stdout")).expect("agent.stdout");
    (read_json(&out.join("run.json")), stdout)
}

#[test]
fn a_hostile_agent_gets_nothing_out_of_its_sandbox() {
    need_bwrap();
    let work = tempfile::tempdir().expect("a temporary directory");
    let agents = agents(work.path());

    let (run, stdout) = escape(work.path(), &agents, true, "sandboxed");
    assert_got_nothing(&stdout);
    assert_eq!(run["ended"], "submitted", "{run:#}");
    assert_eq!(run["diagnosis"]["pass"], false, "{run:#}");
    assert_eq!(run["mitigation"]["success"], false, "{run:#}");
    assert_eq!(run["agent_sandbox"], "bubblewrap", "{run:#}");

    // The same attempts without the sandbox do reach something: the test can fail. The run says
    // it had no sandbox.
    let (run, open) = escape(work.path(), &agents, false, "unsandboxed");
    assert!(
        open.lines().any(|l| l.starts_with("GOT:")),
        "without the sandbox the agent found nothing, so the test proves nothing:\n{open}"
    );
    assert_eq!(run["agent_sandbox"], "none", "{run:#}");
}

/// The escaping agent's report: every attempt blocked, its own world working.
fn assert_got_nothing(stdout: &str) {
    let got: Vec<&str> = stdout.lines().filter(|l| l.starts_with("GOT:")).collect();
    assert!(
        got.is_empty(),
        "the sandbox let through: {got:#?}\n{stdout}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("blocked:")).count(),
        7,
        "{stdout}"
    );
    // The session's API answered and the agent went on to its end.
    assert!(stdout.contains("kubectl works"), "{stdout}");
    assert!(stdout.contains("done"), "{stdout}");
}

#[test]
fn every_agent_of_an_evaluation_is_sandboxed_and_the_board_warns_of_one_that_is_not() {
    need_bwrap();
    let work = tempfile::tempdir().expect("a temporary directory");
    let agents = agents(work.path());
    let escape = agents.join("hacks/escape.sh");
    let toml = work.path().join("agents.toml");
    let board = work.path().join("board");
    // The board being written, the binary, the checkout's catalog.
    let hunt = [
        board.clone(),
        e2e::binary("collector"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../problems/catalog"),
    ]
    .map(|p| p.display().to_string())
    .join(":");
    std::fs::write(
        &toml,
        format!(
            "[[agents]]\nname = \"escaper\"\ncommand = \"{}\"\nenv = {{ HUNT_PATHS = \"{hunt}\", HUNT_PORT = \"{}\" }}\n",
            escape.display(),
            other_server()
        ),
    )
    .expect("agents.toml");
    let problems = "hotel-geo-target-port,astro-cart-target-port";
    let output = collector(&[
        "eval",
        "--agents",
        toml.to_str().expect("UTF-8"),
        "--problems",
        problems,
        "--noise",
        "off",
        "--jobs",
        "2",
        "--time-limit",
        "2m",
        "--agent-bind",
        agents.to_str().expect("UTF-8"),
        "--out",
        board.to_str().expect("UTF-8"),
    ]);
    assert!(output.status.success(), "{}", e2e::text(&output));
    for problem in problems.split(',') {
        let dir = board.join("escaper").join(problem).join("quiet-1");
        let run = read_json(&dir.join("run.json"));
        assert_eq!(run["agent_sandbox"], "bubblewrap", "{run:#}");
        assert_eq!(run["diagnosis"]["pass"], false, "{run:#}");
        assert_eq!(run["mitigation"]["success"], false, "{run:#}");
        let stdout = std::fs::read_to_string(dir.join("agent.stdout")).expect("agent.stdout");
        assert_got_nothing(&stdout);
        // Each session's home was its own: nothing of the other run's.
        assert!(!stdout.contains(".unfinished"), "{stdout}");
    }
    let text = e2e::text(&output);
    assert!(!text.contains("no agent sandbox"), "{text}");

    // The same board with --no-sandbox says so.
    let toml_quiet = work.path().join("quiet.toml");
    std::fs::write(
        &toml_quiet,
        "[[agents]]\nname = \"bystander\"\ncommand = \"true\"\n",
    )
    .expect("quiet.toml");
    let open = work.path().join("open-board");
    let output = collector(&[
        "eval",
        "--agents",
        toml_quiet.to_str().expect("UTF-8"),
        "--problems",
        "hotel-geo-target-port",
        "--noise",
        "off",
        "--time-limit",
        "1m",
        "--no-sandbox",
        "--out",
        open.to_str().expect("UTF-8"),
    ]);
    assert!(output.status.success(), "{}", e2e::text(&output));
    let text = e2e::text(&output);
    assert!(text.contains("--no-sandbox"), "{text}");
    let board_json = read_json(&open.join("board/board.json"));
    assert_eq!(board_json["unsandboxed"], 1, "{board_json:#}");
    let html = std::fs::read_to_string(open.join("board/index.html")).unwrap_or_default();
    assert!(html.contains("no agent sandbox"), "{html}");
}

#[test]
fn a_reference_agent_fixes_its_problem_inside_the_sandbox() {
    need_bwrap();
    let work = tempfile::tempdir().expect("a temporary directory");
    let agents = agents(work.path());
    let inputs = work.path().join("inputs");
    std::fs::create_dir_all(&inputs).expect("inputs dir");
    let catalog = problems::Catalog::builtin().expect("the built-in catalog");
    let problem = catalog
        .problem("hotel-geo-target-port")
        .expect("the problem");
    let fix = inputs.join("fix");
    std::fs::write(
        &fix,
        problem
            .reference_fix
            .as_ref()
            .expect("a reference fix")
            .commands
            .join("\n"),
    )
    .expect("the fix file");
    let truth = problem.ground_truth("hotel-reservation", chrono::Utc::now());
    let diagnosis = format!("DIAGNOSIS={} Root cause: Service geo.", truth.description);
    let out = work.path().join("run");
    let agent = agents.join("fixers/reference.sh");
    let fix_env = format!("FIX_FILE={}", fix.display());
    let output = collector(&[
        "live",
        "--problem",
        "hotel-geo-target-port",
        "--seed",
        "2",
        "--agent",
        agent.to_str().expect("UTF-8"),
        "--agent-bind",
        agents.to_str().expect("UTF-8"),
        "--agent-bind",
        inputs.to_str().expect("UTF-8"),
        "--agent-env",
        &fix_env,
        "--agent-env",
        &diagnosis,
        "--time-limit",
        "5m",
        "--quiet",
        "--json",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    assert!(output.status.success(), "{}", e2e::text(&output));
    let run = read_json(&out.join("run.json"));
    assert_eq!(run["ended"], "submitted", "{run:#}");
    assert_eq!(run["diagnosis"]["pass"], true, "{run:#}");
    assert_eq!(run["mitigation"]["success"], true, "{run:#}");
}

#[test]
fn the_probe_says_this_host_can_sandbox_and_a_program_out_of_sight_is_refused() {
    need_bwrap();
    let probe = collector(&["agent-sandbox", "probe", "--json"]);
    assert!(probe.status.success(), "{}", e2e::text(&probe));
    let report: Value = serde_json::from_slice(&probe.stdout).expect("JSON");
    assert_eq!(report["usable"], true, "{report:#}");
    // A program found on PATH outside the sandbox is refused before anything starts, saying
    // what to do.
    let work = tempfile::tempdir().expect("a temporary directory");
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let program = bin.join("my-agent");
    std::fs::write(&program, "#!/bin/sh\nexit 0\n").expect("the agent");
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let out = work.path().join("run");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let refused = Command::new(e2e::binary("collector"))
        .args([
            "live",
            "--problem",
            "hotel-geo-target-port",
            "--agent",
            "my-agent",
        ])
        .arg("--out")
        .arg(&out)
        .env("PATH", path)
        .output()
        .expect("collector runs");
    assert!(!refused.status.success());
    let text = e2e::text(&refused);
    assert!(
        text.contains("outside its sandbox") && text.contains("--agent-bind"),
        "{text}"
    );
    assert!(!out.join("run.json").exists());
}

#[test]
fn an_agent_given_by_its_path_sees_its_own_file_and_nothing_beside_it() {
    need_bwrap();
    let work = tempfile::tempdir().expect("a temporary directory");
    let program = work.path().join("agent.sh");
    std::fs::write(work.path().join("answers.txt"), "the answer").expect("a file beside it");
    std::fs::write(
        &program,
        "#!/bin/sh\n\
         echo \"me: $(cat \"$0\" | wc -l)\"\n\
         ls \"$(dirname \"$0\")\"\n\
         cat \"$(dirname \"$0\")/answers.txt\" 2>/dev/null && echo GOT\n\
         echo \"home: $(ls \"$HOME\" | tr '\\n' ' ')\"\n\
         echo \"uid: $(id -u)\"\n",
    )
    .expect("the agent");
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let out = work.path().join("run");
    let output = collector(&[
        "live",
        "--problem",
        "hotel-geo-target-port",
        "--no-noise",
        "--agent",
        program.to_str().expect("UTF-8"),
        "--time-limit",
        "1m",
        "--quiet",
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    assert!(output.status.success(), "{}", e2e::text(&output));
    let stdout = std::fs::read_to_string(out.join("agent.stdout")).expect("agent.stdout");
    assert!(stdout.contains("me: 6"), "{stdout}");
    assert!(stdout.lines().any(|l| l == "agent.sh"), "{stdout}");
    assert!(
        !stdout.contains("answers") && !stdout.contains("GOT"),
        "{stdout}"
    );
    assert!(
        stdout.contains("prompt.md") && stdout.contains("kubeconfig"),
        "{stdout}"
    );
    assert!(stdout.contains("uid: 1000"), "{stdout}");
    let run = read_json(&out.join("run.json"));
    assert_eq!(run["agent_sandbox"], "bubblewrap", "{run:#}");
    assert_eq!(run["ended"], "agent_exited", "{run:#}");
}

/// The user the unprivileged run takes when the tests run as root (CI): made here if missing.
const TESTER: &str = "unpriv";

fn id(args: &[&str]) -> String {
    let o = Command::new("id").args(args).output().expect("id runs");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn a_session_run_by_an_unprivileged_user_is_sandboxed_too() {
    need_bwrap();
    let work = tempfile::tempdir().expect("a temporary directory");
    let root = id(&["-u"]) == "0";
    let user = if root {
        let made = Command::new("useradd")
            .args(["--system", "--user-group", "--no-create-home"])
            .args(["--shell", "/usr/sbin/nologin", TESTER])
            .output()
            .expect("useradd runs (apt-get install passwd)");
        // 9: the user exists already (an earlier run made it).
        assert!(
            made.status.success() || made.status.code() == Some(9),
            "{}",
            e2e::text(&made)
        );
        Some((id(&["-u", TESTER]), id(&["-g", TESTER])))
    } else {
        None
    };
    // The binaries where that user can run them, and a home of its own.
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    for program in ["collector", "netrelay"] {
        std::fs::copy(e2e::binary(program), bin.join(program)).expect("copying the binary");
    }
    let home = work.path().join("home");
    std::fs::create_dir_all(&home).expect("home dir");
    let chmod = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .expect("chmod");
    };
    chmod(work.path(), 0o755);
    chmod(&bin, 0o755);
    let mut command = match &user {
        Some((uid, gid)) => {
            let owned = Command::new("chown")
                .arg(format!("{uid}:{gid}"))
                .arg(&home)
                .status()
                .expect("chown runs");
            assert!(owned.success());
            let mut c = Command::new("setpriv");
            c.args(["--reuid", uid, "--regid", gid, "--clear-groups", "--"]);
            c.arg(bin.join("collector"));
            c
        }
        None => Command::new(bin.join("collector")),
    };
    let output = command
        .args([
            "live",
            "--problem",
            "hotel-geo-target-port",
            "--no-noise",
            "--quiet",
        ])
        .args(["--time-limit", "1m", "--out", "run"])
        .args([
            "--agent",
            "echo session-user=$(id -u); kubectl get namespaces -o name",
        ])
        .current_dir(&home)
        .env("HOME", &home)
        .env_remove("JUDGE_BASE_URL")
        .output()
        .expect("collector runs");
    assert!(output.status.success(), "{}", e2e::text(&output));
    let out = home.join("run");
    let stdout = std::fs::read_to_string(out.join("agent.stdout")).expect("agent.stdout");
    // The agent is the sandbox's unprivileged user, whoever started the session, and its API
    // answers.
    assert!(stdout.contains("session-user=1000"), "{stdout}");
    assert!(stdout.contains("namespace/hotel-reservation"), "{stdout}");
    let run = read_json(&out.join("run.json"));
    assert_eq!(run["agent_sandbox"], "bubblewrap", "{run:#}");
    // The session really ran as that user: its record is the user's.
    if let Some((uid, _)) = &user {
        let owner = std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata(out.join("run.json")).expect("run.json"),
        );
        assert_eq!(owner.to_string(), *uid);
    }
}

/// This host's address on its outward interface (where the internet would be reached from): a
/// server there stands for the internet, which this machine has not.
fn outward_address() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("a UDP socket");
    // Connecting a UDP socket only picks the route; nothing is sent.
    socket
        .connect("203.0.113.1:9")
        .expect("a default route: the public-network test needs a non-loopback interface");
    socket.local_addr().expect("its address").ip()
}

/// A session whose agent tries the outside, the outside through a tunnel, and this host's
/// loopback through its proxy; its output.
fn reach(work: &Path, network: &str, outside: &str, other: u16) -> String {
    let out = work.join(format!("run-{network}"));
    let agent = format!(
        "echo \"outside: $(curl -s -m 5 http://{outside}/)\"; \
         echo \"tunnel: $(curl -s -m 5 -p -x \"$HTTPS_PROXY\" http://{outside}/)\"; \
         echo \"back: $(curl -s -m 5 --noproxy '' -x \"$HTTP_PROXY\" http://127.0.0.1:{other}/)\"; \
         echo \"tunnel back: $(curl -s -m 5 --noproxy '' -p -x \"$HTTPS_PROXY\" http://127.0.0.1:{other}/)\"; \
         kubectl get namespaces -o name"
    );
    let output = collector(&[
        "live",
        "--problem",
        "hotel-geo-target-port",
        "--no-noise",
        "--quiet",
        "--time-limit",
        "1m",
        "--agent",
        &agent,
        "--agent-network",
        network,
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    assert!(output.status.success(), "{}", e2e::text(&output));
    std::fs::read_to_string(out.join("agent.stdout")).expect("agent.stdout")
}

#[test]
fn a_public_network_reaches_the_internet_through_a_proxy_and_never_this_hosts_loopback() {
    need_bwrap();
    let work = tempfile::tempdir().expect("a temporary directory");
    let listener = std::net::TcpListener::bind((outward_address(), 0)).expect("a port outside");
    let outside = listener.local_addr().expect("its address").to_string();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.0 200 OK\r\ncontent-length: 7\r\n\r\noutside");
        }
    });
    let other = other_server();
    let public = reach(work.path(), "public", &outside, other);
    assert!(public.contains("outside: outside"), "{public}");
    assert!(public.contains("tunnel: outside"), "{public}");
    assert!(public.contains("back: 127.0.0.1:"), "{public}");
    assert!(public.contains("on this host"), "{public}");
    assert!(
        public.contains("tunnel back: \n") || public.ends_with("tunnel back: "),
        "{public}"
    );
    assert!(public.contains("namespace/hotel-reservation"), "{public}");
    // The default: nothing but the session.
    let closed = reach(work.path(), "session", &outside, other);
    assert!(closed.contains("outside: \n"), "{closed}");
    assert!(!closed.contains(": outside"), "{closed}");
    assert!(closed.contains("namespace/hotel-reservation"), "{closed}");
}
