//! Commands run inside simulated containers answer from the model: files are the mounted
//! ConfigMaps, `curl` follows DNS, Services, endpoints and listening ports (so a wrong targetPort
//! is refused until it is fixed), tools an image lacks are not found, the database CLI sees and
//! mends the database's users, and hostile commands stay within bounds.

use problems::primitive::{AuthMode, Primitive};
use sim::Sim;
use sim::objects::Key;
use sim::runtime::DbAuth;
use sim::shell::{self, EnterError, Limits, Output, Session};

mod common;
use common::{apply, run, sim_of};

const NS: &str = "hotel-reservation";

fn hotel() -> Sim {
    sim_of("hotel-reservation")
}

/// The first running pod of a workload.
fn pod_of(sim: &Sim, workload: &str) -> Key {
    let prefix = format!("{workload}-");
    sim.world
        .pods
        .iter()
        .find(|(k, p)| {
            k.0 == NS
                && k.1.starts_with(&prefix)
                && k.1[prefix.len()..].chars().filter(|c| *c == '-').count() <= 1
                && p.phase == "Running"
        })
        .map(|(k, _)| k.clone())
        .unwrap_or_else(|| panic!("no running pod of {workload}"))
}

fn session(sim: &mut Sim, workload: &str) -> Session {
    let pod = pod_of(sim, workload);
    let target = shell::enter(&sim.world, NS, &pod.1, None).expect("a running container");
    let m = sim.shell_model();
    Session::new(&m, target, Limits::default())
}

/// `sh -c SCRIPT` in the session.
fn sh(sim: &mut Sim, s: &mut Session, script: &str) -> Output {
    let mut m = sim.shell_model();
    s.exec(
        &mut m,
        &["sh".to_string(), "-c".to_string(), script.to_string()],
        b"",
    )
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn files_and_environment_are_the_pods() {
    let mut sim = hotel();
    let mut s = session(&mut sim, "frontend");
    let o = sh(
        &mut sim,
        &mut s,
        "cat /go/src/github.com/harlow/go-micro-services/config.json",
    );
    assert_eq!(o.exit, Some(0), "{}", err(&o));
    assert!(out(&o).contains("GeoMongoAddress"), "{}", out(&o));
    // A ConfigMap volume as the kubelet lays it out.
    let o = sh(&mut sim, &mut s, "ls -la /etc/frontend-runtime");
    assert!(out(&o).contains("..data -> ..20"), "{}", out(&o));
    assert!(out(&o).contains("SEARCH_BACKEND_VERSION -> ..data/SEARCH_BACKEND_VERSION"));
    let o = sh(
        &mut sim,
        &mut s,
        "cat /etc/frontend-runtime/SEARCH_BACKEND_VERSION",
    );
    assert_eq!(out(&o), "v1");
    // The kubelet's environment: the spec's variables and service links.
    let o = sh(
        &mut sim,
        &mut s,
        "env | grep -E '^(LOG_LEVEL|GEO_SERVICE_PORT)=' | sort",
    );
    assert_eq!(out(&o), "GEO_SERVICE_PORT=8083\nLOG_LEVEL=INFO\n");
    let o = sh(&mut sim, &mut s, "cat /etc/resolv.conf; hostname");
    assert!(
        out(&o).contains("search hotel-reservation.svc.cluster.local"),
        "{}",
        out(&o)
    );
    assert!(out(&o).contains(&s.target.pod.1));
    // The pod's spec changed: what the process sees changes with it.
    sim.world
        .configmaps
        .get_mut(&(NS.to_string(), "frontend-runtime-config".to_string()))
        .unwrap()
        .data
        .insert("SEARCH_BACKEND_VERSION".into(), "v2".into());
    let o = sh(
        &mut sim,
        &mut s,
        "cat /etc/frontend-runtime/SEARCH_BACKEND_VERSION",
    );
    assert_eq!(out(&o), "v2");
}

#[test]
fn the_shell_grammar_works_as_sh_does() {
    let mut sim = hotel();
    let mut s = session(&mut sim, "frontend");
    let o = sh(
        &mut sim,
        &mut s,
        "for x in a b c; do echo $x; done | wc -l; N=$(echo 5); test $N -gt 3 && echo big || echo small; false; echo $?",
    );
    assert_eq!(out(&o), "3\nbig\n1\n", "{}", err(&o));
    let o = sh(&mut sim, &mut s, "cat /nope 2>&1 >/dev/null | head -1");
    assert_eq!(out(&o), "cat: /nope: No such file or directory\n");
    let o = sh(
        &mut sim,
        &mut s,
        "echo hi > /tmp/f; cat /tmp/f; exit 3; echo never",
    );
    assert_eq!((out(&o).as_str(), o.exit), ("hi\n", Some(3)));
    let o = sh(&mut sim, &mut s, "if then");
    assert_eq!(o.exit, Some(2));
    assert!(err(&o).contains("syntax error"), "{}", err(&o));
}

#[test]
fn tools_an_image_lacks_are_not_found() {
    let mut sim = hotel();
    let mut s = session(&mut sim, "frontend");
    let o = sh(&mut sim, &mut s, "nslookup geo");
    assert_eq!(o.exit, Some(127));
    assert!(err(&o).contains("nslookup: not found"), "{}", err(&o));
    let mut m = sim.shell_model();
    let o = s.exec(&mut m, &["dig".into(), "geo".into()], b"");
    assert_eq!(o.exit, Some(126));
    assert!(
        out(&o).contains("executable file not found in $PATH"),
        "{}",
        out(&o)
    );
    // The database image has its CLI but no curl.
    let mut db = session(&mut sim, "mongodb-geo");
    let o = sh(&mut sim, &mut db, "curl -s localhost:27017");
    assert_eq!(o.exit, Some(127));
    assert!(err(&o).contains("curl: command not found") || err(&o).contains("curl: not found"));
}

#[test]
fn curl_follows_the_service_to_the_process_and_sees_a_wrong_target_port() {
    let mut sim = hotel();
    let mut s = session(&mut sim, "frontend");
    // The frontend answers its own routes over HTTP.
    let o = sh(
        &mut sim,
        &mut s,
        "curl -s -o /dev/null -w '%{http_code}' http://localhost:5000/hotels",
    );
    assert_eq!(out(&o), "200", "{}", err(&o));
    assert_eq!(
        out(&sh(
            &mut sim,
            &mut s,
            "curl -s -o /dev/null -w '%{http_code}' localhost:5000/nope"
        )),
        "404"
    );
    // geo speaks gRPC: curl reaches it, and is answered in HTTP/2.
    let o = sh(&mut sim, &mut s, "curl -sS http://geo:8083/");
    assert_eq!(o.exit, Some(1), "{}", err(&o));
    assert!(err(&o).contains("HTTP/0.9"), "{}", err(&o));
    apply(
        &mut sim,
        Primitive::ServiceTargetPort {
            service: "geo".into(),
            port_name: None,
            target_port: 9999,
        },
    );
    run(&mut sim, 5);
    let o = sh(&mut sim, &mut s, "curl -sS http://geo:8083/");
    assert_eq!(o.exit, Some(7), "{}", err(&o));
    assert!(
        err(&o).contains("Failed to connect to geo port 8083"),
        "{}",
        err(&o)
    );
    // The pod itself still listens on 8083.
    let geo_ip = sim.world.pods[&pod_of(&sim, "geo")].pod_ip.clone().unwrap();
    let o = sh(&mut sim, &mut s, &format!("curl -sS http://{geo_ip}:8083/"));
    assert_eq!(o.exit, Some(1), "{}", err(&o));
    // Names that do not exist do not resolve.
    let o = sh(&mut sim, &mut s, "curl -sS http://nosuch:80/");
    assert_eq!(o.exit, Some(6));
}

#[test]
fn dns_tools_answer_from_cluster_dns() {
    let mut sim = hotel();
    // Add a debug pod with BusyBox, as `kubectl run` would.
    let mut s = session(&mut sim, "frontend");
    s.target.image = "busybox:1.36".into();
    let o = sh(&mut sim, &mut s, "nslookup geo");
    assert_eq!(o.exit, Some(0), "{}{}", out(&o), err(&o));
    let ip = sim.world.services[&(NS.to_string(), "geo".to_string())]
        .cluster_ip
        .clone();
    assert!(out(&o).contains(&format!("Address: {ip}")), "{}", out(&o));
    assert!(out(&o).contains("geo.hotel-reservation.svc.cluster.local"));
    let o = sh(&mut sim, &mut s, "nslookup geox");
    assert_eq!(o.exit, Some(1));
    assert!(out(&o).contains("NXDOMAIN"));
    let o = sh(&mut sim, &mut s, "nc -zv geo 8083");
    assert_eq!(o.exit, Some(0), "{}", err(&o));
    let o = sh(&mut sim, &mut s, "wget -qO- http://frontend:5000/ && echo");
    assert_eq!(out(&o), "OK\n", "{}", err(&o));
}

#[test]
fn mongo_shows_and_mends_a_revoked_role_with_the_admins_credentials() {
    let mut sim = hotel();
    apply(
        &mut sim,
        Primitive::DatabaseAuth {
            service: "mongodb-geo".into(),
            mode: AuthMode::RevokeRoles,
            restart_clients: vec![],
        },
    );
    let mut db = session(&mut sim, "mongodb-geo");
    let users = "mongo admin -u admin -p admin --quiet --eval 'db.getUsers()'";
    let o = sh(&mut sim, &mut db, users);
    assert!(
        out(&o).contains("\"user\" : \"root\", \"db\" : \"admin\", \"roles\" : [ ]"),
        "{}",
        out(&o)
    );
    // Without credentials the server refuses user management.
    let o = sh(
        &mut sim,
        &mut db,
        "mongo admin --quiet --eval \"db.grantRolesToUser('root', [{role: 'readWrite', db: 'geo-db'}])\"",
    );
    assert_eq!(o.exit, Some(1), "{}", out(&o));
    assert_eq!(
        sim.world.runtime.service("mongodb-geo").db_auth,
        DbAuth::RolesRevoked
    );
    let o = sh(
        &mut sim,
        &mut db,
        "mongo admin -u admin -p wrong --quiet --eval 'db.getUsers()'",
    );
    assert!(out(&o).contains("Authentication failed"), "{}", out(&o));
    let o = sh(
        &mut sim,
        &mut db,
        "mongo admin -u admin -p admin --quiet --eval \"db.grantRolesToUser('root', [{role: 'readWrite', db: 'geo-db'}])\"",
    );
    assert_eq!(o.exit, Some(0), "{}", out(&o));
    assert_eq!(sim.world.runtime.service("mongodb-geo").db_auth, DbAuth::Ok);
    let o = sh(&mut sim, &mut db, users);
    assert!(out(&o).contains("readWrite"), "{}", out(&o));
}

#[test]
fn hostile_commands_stay_within_bounds() {
    let mut sim = hotel();
    let mut s = session(&mut sim, "frontend");
    let limits = Limits::default();
    let o = sh(&mut sim, &mut s, "yes");
    assert!(o.stdout.len() <= limits.output_bytes);
    let o = sh(&mut sim, &mut s, "yes | head -n 3");
    assert_eq!(out(&o), "y\ny\ny\n");
    let o = sh(&mut sim, &mut s, "while true; do :; done");
    assert_eq!(o.exit, Some(137));
    let o = sh(&mut sim, &mut s, "sleep 100000");
    assert_eq!(o.exit, Some(137));
    assert!(o.elapsed_ms <= limits.wall_ms + 1, "{}", o.elapsed_ms);
    let o = sh(&mut sim, &mut s, &format!("echo {}", "$(".repeat(500)));
    assert_eq!(o.exit, Some(2));
    let o = sh(
        &mut sim,
        &mut s,
        "cat /dev/null; head -c 100000000 /proc/meminfo | wc -c",
    );
    assert_eq!(o.exit, Some(0));
    // Binary output passes through untouched.
    let o = sh(&mut sim, &mut s, "printf '\\001\\377'");
    assert_eq!(o.exit, Some(0));
}

#[test]
fn containers_that_cannot_be_entered_say_why() {
    let mut sim = hotel();
    let pod = pod_of(&sim, "geo");
    assert_eq!(
        shell::enter(&sim.world, NS, &pod.1, Some("nope")),
        Err(EnterError::NoSuchContainer("nope".into()))
    );
    assert_eq!(
        shell::enter(&sim.world, NS, "geo-none", None),
        Err(EnterError::PodNotFound)
    );
    let node = sim.world.pods[&pod].spec.node_name.clone().unwrap();
    sim.world
        .runtime
        .nodes
        .entry(node)
        .or_default()
        .kubelet_down = true;
    let e = shell::enter(&sim.world, NS, &pod.1, None).unwrap_err();
    assert!(
        e.status(&pod.1)
            .1
            .contains(":10250: connect: connection refused")
    );
    run(&mut sim, 1);
}

#[test]
fn an_interactive_shell_on_a_terminal_echoes_runs_lines_and_ends_on_ctrl_d() {
    use sim::shell::process::Process;
    let mut sim = hotel();
    let s = session(&mut sim, "frontend");
    let mut m = sim.shell_model();
    let (mut p, start) = Process::start(&mut m, s, &["sh".into()], true, true);
    let prompt = String::from_utf8_lossy(&start.stdout).into_owned();
    assert!(prompt.ends_with("# "), "{prompt:?}");
    let o = p.input(&mut m, b"echo hj\x7fi\r");
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.starts_with("echo hj\x08 \x08i\r\nhi\r\n"),
        "{shown:?}"
    );
    assert!(shown.ends_with(&prompt), "{shown:?}");
    assert_eq!(o.exit, None);
    let o = p.input(&mut m, b"cat /nope\r");
    // On a terminal stderr is the terminal.
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("No such file"),
        "{o:?}"
    );
    let o = p.input(&mut m, b"\x04");
    assert_eq!(o.exit, Some(1));
    assert!(p.done());
}

#[test]
fn a_command_waiting_for_stdin_runs_when_it_closes() {
    use sim::shell::process::Process;
    let mut sim = hotel();
    let s = session(&mut sim, "frontend");
    let mut m = sim.shell_model();
    let (mut p, start) = Process::start(&mut m, s, &["wc".into(), "-l".into()], true, false);
    assert_eq!(start.exit, None);
    assert_eq!(p.input(&mut m, b"a\nb\n").exit, None);
    let o = p.close_stdin(&mut m);
    assert_eq!((o.stdout, o.exit), (b"2\n".to_vec(), Some(0)));
}
