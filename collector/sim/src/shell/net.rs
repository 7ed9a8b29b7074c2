//! Network tools inside a container: `curl`, `wget`, `nc`/`telnet`, `nslookup`, `dig`, `host`,
//! `getent hosts` and `ping`. Names resolve as the pod's resolver resolves them (search domains,
//! `dnsPolicy`, CoreDNS' Corefile), connections go where the workload's own connections go
//! (Service, endpoints, target port, listening process, NetworkPolicies, `tc` impairment on the
//! caller's network namespace), and the answer is the program's ([`super::http`]). Messages are
//! the tools' own, BusyBox's or GNU's by image.

use super::http::{self, Answer};
use super::image::toolbox;
use super::run::{Ctx, Io};
use crate::bootstrap::CLUSTER_DNS;
use crate::network::{self, DialError};
use crate::objects::{Key, key};
use crate::programs;

/// What a name resolves to from the pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Found {
        fqdn: String,
        ips: Vec<String>,
    },
    NxDomain,
    /// The configured nameserver does not answer.
    NoServer,
}

/// Resolves `name` with the pod's resolver.
pub fn lookup(ctx: &Ctx, name: &str) -> Lookup {
    let name = name.trim_end_matches('.');
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Lookup::Found {
            fqdn: name.to_string(),
            ips: vec![name.to_string()],
        };
    }
    if name == "localhost" {
        return Lookup::Found {
            fqdn: "localhost".into(),
            ips: vec!["127.0.0.1".into()],
        };
    }
    let w = &*ctx.m.world;
    let Some(pod) = w.pods.get(&ctx.s.target.pod) else {
        return Lookup::NxDomain;
    };
    match network::resolve(w, pod, name) {
        Ok(svc) => {
            let ns = svc.meta.namespace.clone().unwrap_or_default();
            let fqdn = format!("{}.{ns}.svc.cluster.local", svc.meta.name);
            let ips = if svc.cluster_ip == "None" {
                w.endpoints
                    .get(&key(&ns, &svc.meta.name))
                    .map(|e| {
                        e.ready
                            .iter()
                            .filter_map(|a| w.pods.get(&key(&ns, &a.pod)))
                            .filter_map(|p| p.pod_ip.clone())
                            .collect()
                    })
                    .unwrap_or_default()
            } else {
                vec![svc.cluster_ip.clone()]
            };
            if ips.is_empty() {
                return Lookup::NxDomain;
            }
            Lookup::Found { fqdn, ips }
        }
        Err(DialError::NoSuchHost { resolver, .. }) if resolver != CLUSTER_DNS => Lookup::NoServer,
        Err(_) => Lookup::NxDomain,
    }
}

/// A TCP connection attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Connect {
    /// Accepted by the process on `port` of `pod`, after `delay_ms` of network delay.
    Open {
        pod: Key,
        port: u16,
        delay_ms: f64,
    },
    Refused,
    /// Packets are dropped: nothing answers.
    Timeout,
    NoHost,
    NoServer,
}

/// Connects from the pod to `host:port`; returns the attempt and the address dialled.
pub fn connect(ctx: &mut Ctx, host: &str, port: u16) -> (Connect, String) {
    let ip = match lookup(ctx, host) {
        Lookup::Found { ips, .. } => ips[0].clone(),
        Lookup::NxDomain => return (Connect::NoHost, host.to_string()),
        Lookup::NoServer => return (Connect::NoServer, host.to_string()),
    };
    let own = ctx.s.target.pod.clone();
    if ip == "127.0.0.1" {
        let w = &*ctx.m.world;
        let listens = w
            .pods
            .get(&own)
            .is_some_and(|p| network::listens(w, ctx.m.app, p, port));
        return if listens {
            (
                Connect::Open {
                    pod: own,
                    port,
                    delay_ms: 0.05,
                },
                ip,
            )
        } else {
            (Connect::Refused, ip)
        };
    }
    let draw = ctx.draw();
    let pick = ctx.draw();
    let lost = ctx.draw();
    let w = &*ctx.m.world;
    let Some(caller) = w.pods.get(&own) else {
        return (Connect::Refused, ip);
    };
    let route = network::dial(w, ctx.m.app, caller, &ip, port, None);
    if let Some((share, err)) = &route.failure
        && (draw < *share || route.accepting.is_empty())
    {
        return match err {
            DialError::Timeout { .. } => (Connect::Timeout, ip),
            DialError::NoSuchHost { .. } => (Connect::NoHost, ip),
            DialError::Refused { .. } => (Connect::Refused, ip),
        };
    }
    let i = ((pick * route.accepting.len() as f64) as usize).min(route.accepting.len() - 1);
    let (pod, port) = route.accepting[i].clone();
    // `tc netem` in the caller's network namespace delays (or drops) what it sends.
    let service_of = |k: &Key| {
        w.pods.get(k).and_then(|p| {
            p.spec
                .containers
                .iter()
                .find_map(|c| programs::identify(ctx.m.app, c))
                .map(|prog| prog.spec.name.clone())
        })
    };
    let mut delay_ms = 0.2;
    if let (Some(from), Some(to)) = (service_of(&own), service_of(&pod)) {
        let link = w.runtime.link(&from, &to);
        let impaired = caller.meta.created <= link.since || link.since == 0;
        if impaired {
            if lost < link.loss {
                return (Connect::Timeout, ip);
            }
            delay_ms += link.delay_ms;
        }
    }
    (
        Connect::Open {
            pod,
            port,
            delay_ms,
        },
        ip,
    )
}

/// Runs one of the network tools.
pub fn run(ctx: &mut Ctx, name: &str, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    match name {
        "curl" => curl(ctx, args, io),
        "wget" => wget(ctx, args, io),
        "nc" | "telnet" => nc(ctx, name, args, stdin, io),
        "nslookup" => nslookup(ctx, args, io),
        "dig" => dig(ctx, args, io),
        "host" => host(ctx, args, io),
        "getent" => getent(ctx, args, io),
        _ => ping(ctx, args, io),
    }
}

/// A URL's parts: (https, host, port, path).
fn parse_url(url: &str) -> Option<(bool, String, u16, String)> {
    let (https, rest) = match url.split_once("://") {
        Some(("http", r)) => (false, r),
        Some(("https", r)) => (true, r),
        Some(_) => return None,
        None => (false, url),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()?),
        None => (authority.to_string(), if https { 443 } else { 80 }),
    };
    if host.is_empty() {
        return None;
    }
    Some((https, host, port, path))
}

/// curl's options as agents write them.
#[derive(Debug, Default)]
struct CurlOpts {
    silent: bool,
    show_error: bool,
    fail: bool,
    include: bool,
    head: bool,
    verbose: bool,
    output: Option<String>,
    write_out: Option<String>,
    method: Option<String>,
    max_time: Option<f64>,
    connect_timeout: Option<f64>,
    url: Option<String>,
}

fn curl_opts(args: &[String]) -> Result<CurlOpts, String> {
    let mut o = CurlOpts::default();
    let mut i = 0;
    let value = |i: usize| {
        args.get(i + 1)
            .cloned()
            .ok_or_else(|| format!("curl: option {}: requires parameter", args[i]))
    };
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--silent" => o.silent = true,
            "--show-error" => o.show_error = true,
            "--fail" | "--fail-with-body" => o.fail = true,
            "--include" => o.include = true,
            "--head" => o.head = true,
            "--verbose" => o.verbose = true,
            "--location" | "--insecure" | "--compressed" | "--http1.1" | "--no-buffer" => {}
            "-o" | "--output" => {
                o.output = Some(value(i)?);
                i += 1;
            }
            "-w" | "--write-out" => {
                o.write_out = Some(value(i)?);
                i += 1;
            }
            "-X" | "--request" => {
                o.method = Some(value(i)?);
                i += 1;
            }
            "-m" | "--max-time" => {
                o.max_time = value(i)?.parse().ok();
                i += 1;
            }
            "--connect-timeout" => {
                o.connect_timeout = value(i)?.parse().ok();
                i += 1;
            }
            "-H" | "--header" | "-A" | "--user-agent" | "--retry" | "-u" | "--user" => i += 1,
            "-d" | "--data" | "--data-raw" | "--data-binary" | "--json" => {
                o.method.get_or_insert("POST".into());
                i += 1;
            }
            s if s.starts_with("--") => {
                return Err(format!(
                    "curl: option {s}: is unknown\ncurl: try 'curl --help' or 'curl --manual' for more information"
                ));
            }
            s if s.starts_with('-') && s.len() > 1 => {
                for (j, c) in s[1..].chars().enumerate() {
                    match c {
                        's' => o.silent = true,
                        'S' => o.show_error = true,
                        'f' => o.fail = true,
                        'i' => o.include = true,
                        'I' => o.head = true,
                        'v' => o.verbose = true,
                        'L' | 'k' | 'N' => {}
                        'o' | 'w' | 'X' | 'm' | 'H' | 'd' | 'A' | 'u' => {
                            // A value-taking flag ends the cluster; its value is the rest or the next word.
                            let rest = &s[2 + j..];
                            let v = if rest.is_empty() {
                                i += 1;
                                args.get(i).cloned().unwrap_or_default()
                            } else {
                                rest.to_string()
                            };
                            match c {
                                'o' => o.output = Some(v),
                                'w' => o.write_out = Some(v),
                                'X' => o.method = Some(v),
                                'm' => o.max_time = v.parse().ok(),
                                'd' => {
                                    o.method.get_or_insert("POST".into());
                                }
                                _ => {}
                            }
                            break;
                        }
                        other => {
                            return Err(format!(
                                "curl: option -{other}: is unknown\ncurl: try 'curl --help' or 'curl --manual' for more information"
                            ));
                        }
                    }
                }
            }
            url => o.url = Some(url.to_string()),
        }
        i += 1;
    }
    Ok(o)
}

fn curl(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let o = match curl_opts(args) {
        Ok(o) => o,
        Err(e) => {
            io.err_line(e);
            return 2;
        }
    };
    let Some(url) = o.url.clone() else {
        io.err_line("curl: no URL specified!\ncurl: try 'curl --help' or 'curl --manual' for more information");
        return 2;
    };
    let say_error = !o.silent || o.show_error;
    let fail = |io: &mut Io, code: i32, msg: String| {
        if say_error {
            io.err_line(format!("curl: ({code}) {msg}"));
        }
        if let Some(w) = &o.write_out {
            io.out.extend(write_out(w, 0, "").into_bytes());
        }
        code
    };
    let Some((https, host, port, path)) = parse_url(&url) else {
        return fail(
            io,
            3,
            "URL rejected: Malformed input to a URL function".to_string(),
        );
    };
    let (conn, ip) = connect(ctx, &host, port);
    let limit_ms = o
        .connect_timeout
        .or(o.max_time)
        .map_or(130_000.0, |s| s * 1000.0);
    match conn {
        Connect::NoHost => fail(io, 6, format!("Could not resolve host: {host}")),
        Connect::NoServer => {
            ctx.spend(10_000);
            fail(io, 6, format!("Could not resolve host: {host}"))
        }
        Connect::Refused => {
            ctx.spend(1);
            fail(
                io,
                7,
                format!(
                    "Failed to connect to {host} port {port} after 1 ms: Couldn't connect to server"
                ),
            )
        }
        Connect::Timeout => {
            ctx.spend(limit_ms as u64);
            fail(
                io,
                28,
                format!(
                    "Failed to connect to {host} port {port} after {} ms: Timeout was reached",
                    limit_ms as u64
                ),
            )
        }
        Connect::Open {
            pod,
            port,
            delay_ms,
        } => {
            if o.verbose {
                io.err_line(format!("*   Trying {ip}:{port}..."));
                io.err_line(format!("* Connected to {host} ({ip}) port {port}"));
            }
            if https {
                ctx.spend(delay_ms as u64 + 1);
                return fail(
                    io,
                    35,
                    "OpenSSL/3.0.15: error:0A00010B:SSL routines::wrong version number".into(),
                );
            }
            let method = o
                .method
                .clone()
                .unwrap_or_else(|| if o.head { "HEAD".into() } else { "GET".into() });
            let draw = ctx.draw();
            let served = http::request(ctx.m, draw, &pod, port, &method, &path);
            let total_ms = delay_ms * 2.0 + served.latency_ms;
            if let Some(max) = o.max_time.map(|s| s * 1000.0)
                && total_ms > max
            {
                ctx.spend(max as u64);
                return fail(
                    io,
                    28,
                    format!(
                        "Operation timed out after {} milliseconds with 0 bytes received",
                        max as u64
                    ),
                );
            }
            ctx.spend(total_ms as u64);
            curl_answer(ctx, &o, &host, &method, &path, served.answer, total_ms, io)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn curl_answer(
    ctx: &mut Ctx,
    o: &CurlOpts,
    host: &str,
    method: &str,
    path: &str,
    answer: Answer,
    total_ms: f64,
    io: &mut Io,
) -> i32 {
    let say_error = !o.silent || o.show_error;
    let (status, body, head) = match answer {
        Answer::Http {
            status,
            content_type,
            body,
        } => {
            let head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
                http::reason(status),
                body.len()
            );
            (status, body, head)
        }
        Answer::Raw(_) => {
            if say_error {
                io.err_line("curl: (1) Received HTTP/0.9 when not allowed");
            }
            return 1;
        }
        Answer::Empty => {
            if say_error {
                io.err_line("curl: (52) Empty reply from server");
            }
            return 52;
        }
    };
    if o.verbose {
        io.err_line(format!("> {method} {path} HTTP/1.1\n> Host: {host}\n> User-Agent: curl/7.88.1\n> Accept: */*\n>"));
        for l in head.lines().filter(|l| !l.is_empty()) {
            io.err_line(format!("< {l}"));
        }
    }
    if o.fail && status >= 400 {
        if say_error {
            io.err_line(format!(
                "curl: (22) The requested URL returned error: {status}"
            ));
        }
        if let Some(w) = &o.write_out {
            io.out
                .extend(write_out(w, status, &format!("{:.6}", total_ms / 1000.0)).into_bytes());
        }
        return 22;
    }
    let mut shown = vec![];
    if o.include || o.head {
        shown.extend_from_slice(head.as_bytes());
    }
    if !o.head {
        shown.extend_from_slice(&body);
    }
    match o.output.as_deref() {
        Some("/dev/null") => {}
        Some("-") | None => io.out.extend(shown),
        Some(file) => {
            let p = super::fs::absolute(&ctx.s.cwd, file);
            ctx.s.files.insert(p, shown);
        }
    }
    if let Some(w) = &o.write_out {
        io.out
            .extend(write_out(w, status, &format!("{:.6}", total_ms / 1000.0)).into_bytes());
    }
    0
}

/// curl's `-w` format.
fn write_out(fmt: &str, status: u16, time: &str) -> String {
    fmt.replace("%{http_code}", &format!("{status:03}"))
        .replace("%{response_code}", &format!("{status:03}"))
        .replace(
            "%{time_total}",
            if time.is_empty() { "0.000000" } else { time },
        )
        .replace("\\n", "\n")
}

fn wget(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let busybox = toolbox(&ctx.s.target.image).busybox();
    let mut quiet = false;
    let mut to_stdout = false;
    let mut spider = false;
    let mut timeout = 900.0;
    let mut url = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-O" | "--output-document" => {
                to_stdout = args.get(i + 1).is_some_and(|v| v == "-");
                i += 1;
            }
            "-T" | "--timeout" => {
                timeout = args
                    .get(i + 1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(timeout);
                i += 1;
            }
            "--spider" => spider = true,
            "-q" | "--quiet" => quiet = true,
            "-qO-" | "-qO" | "-O-" => {
                quiet |= a.contains('q');
                to_stdout = true;
            }
            s if s.starts_with("-T") => timeout = s[2..].parse().unwrap_or(timeout),
            s if s.starts_with('-') => {
                quiet |= s.contains('q');
                to_stdout |= s.ends_with("O-");
                spider |= s.contains("spider");
            }
            u => url = Some(u.to_string()),
        }
        i += 1;
    }
    let Some(url) = url else {
        io.err_line("wget: missing URL");
        return 1;
    };
    let Some((_, host, port, path)) = parse_url(&url) else {
        io.err_line(format!("wget: bad address '{url}'"));
        return 1;
    };
    if !quiet && busybox {
        io.err_line(format!("Connecting to {host}:{port}"));
    }
    let (conn, ip) = connect(ctx, &host, port);
    let err = |io: &mut Io, busy: String, gnu: String, code: i32| {
        io.err_line(if busybox { busy } else { gnu });
        if busybox { 1 } else { code }
    };
    match conn {
        Connect::NoHost | Connect::NoServer => err(
            io,
            format!("wget: bad address '{host}'"),
            format!("wget: unable to resolve host address '{host}'"),
            4,
        ),
        Connect::Refused => err(
            io,
            format!("wget: can't connect to remote host ({ip}): Connection refused"),
            format!("Connecting to {host} ({host})|{ip}|:{port}... failed: Connection refused."),
            4,
        ),
        Connect::Timeout => {
            ctx.spend((timeout * 1000.0) as u64);
            err(
                io,
                "wget: download timed out".into(),
                format!(
                    "Connecting to {host} ({host})|{ip}|:{port}... failed: Connection timed out."
                ),
                4,
            )
        }
        Connect::Open {
            pod,
            port,
            delay_ms,
        } => {
            let draw = ctx.draw();
            let served = http::request(ctx.m, draw, &pod, port, "GET", &path);
            ctx.spend((delay_ms * 2.0 + served.latency_ms) as u64);
            match served.answer {
                Answer::Http { status, body, .. } if status < 400 => {
                    if spider {
                        if !quiet {
                            io.err_line("remote file exists");
                        }
                    } else if to_stdout {
                        io.out.extend(body);
                    } else {
                        ctx.s
                            .files
                            .insert(super::fs::absolute(&ctx.s.cwd, "index.html"), body);
                        if !quiet {
                            io.err_line("saving to 'index.html'");
                        }
                    }
                    0
                }
                Answer::Http { status, .. } => err(
                    io,
                    format!(
                        "wget: server returned error: HTTP/1.1 {status} {}",
                        http::reason(status)
                    ),
                    format!("ERROR {status}: {}.", http::reason(status)),
                    8,
                ),
                _ => err(
                    io,
                    "wget: error getting response: Connection reset by peer".into(),
                    "Read error (Connection reset by peer) in headers.".into(),
                    4,
                ),
            }
        }
    }
}

fn nc(ctx: &mut Ctx, name: &str, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    let busybox = toolbox(&ctx.s.target.image).busybox();
    let mut flags = String::new();
    let mut ops = vec![];
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if matches!(a.as_str(), "-w" | "-W" | "-i" | "-p" | "-q") {
            i += 2;
            continue;
        }
        if a.starts_with('-') {
            flags.push_str(a);
        } else {
            ops.push(a);
        }
        i += 1;
    }
    let (Some(host), Some(port)) = (ops.first(), ops.get(1).and_then(|p| p.parse::<u16>().ok()))
    else {
        io.err_line(if name == "telnet" {
            "Usage: telnet [-a] [-l USER] HOST [PORT]"
        } else {
            "usage: nc [-46CDdFhklNnrStUuvZz] [-I length] [-i interval] [-M ttl] destination port"
        });
        return 1;
    };
    let (conn, ip) = connect(ctx, host, port);
    let verbose = flags.contains('v') || name == "telnet";
    match conn {
        Connect::Open {
            pod,
            port: p,
            delay_ms,
        } => {
            ctx.spend(delay_ms as u64);
            if verbose {
                io.err_line(if busybox {
                    format!("{host} ({ip}:{port}) open")
                } else {
                    format!("Connection to {host} ({ip}) {port} port [tcp/*] succeeded!")
                });
            }
            if !flags.contains('z') && !stdin.is_empty() {
                let text = String::from_utf8_lossy(stdin);
                let mut words = text.split_whitespace();
                let reply = match (words.next(), words.next()) {
                    (Some(m @ ("GET" | "HEAD" | "POST")), Some(path)) => {
                        let draw = ctx.draw();
                        let s = http::request(ctx.m, draw, &pod, p, m, path);
                        http::encode(&s.answer, m == "HEAD", ctx.m.world.now)
                    }
                    (Some(cmd), _) if cmd.eq_ignore_ascii_case("ping") => b"+PONG\r\n".to_vec(),
                    _ => vec![],
                };
                io.out.extend(reply);
            }
            0
        }
        other => {
            let why = match other {
                Connect::Timeout => {
                    ctx.spend(2_000);
                    "Operation timed out"
                }
                Connect::NoHost | Connect::NoServer => {
                    io.err_line(if busybox {
                        format!("nc: bad address '{host}'")
                    } else {
                        format!("nc: getaddrinfo for host \"{host}\" port {port}: Name or service not known")
                    });
                    return 1;
                }
                _ => "Connection refused",
            };
            io.err_line(if busybox {
                format!("nc: {host} ({ip}:{port}): {why}")
            } else {
                format!("nc: connect to {host} ({ip}) port {port} (tcp) failed: {why}")
            });
            1
        }
    }
}

fn nslookup(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let Some(name) = args.iter().find(|a| !a.starts_with('-')) else {
        io.err_line("Usage: nslookup [-type=QUERY_TYPE] [-debug] HOST [DNS_SERVER]");
        return 1;
    };
    let busybox = toolbox(&ctx.s.target.image).busybox();
    let sep = if busybox { ":" } else { "#" };
    match lookup(ctx, name) {
        Lookup::NoServer => {
            ctx.spend(15_000);
            io.out_line(";; connection timed out; no servers could be reached");
            1
        }
        found => {
            io.out_line(format!("Server:\t\t{CLUSTER_DNS}"));
            io.out_line(format!("Address:\t{CLUSTER_DNS}{sep}53"));
            io.out_line("");
            match found {
                Lookup::Found { fqdn, ips } => {
                    for ip in ips {
                        io.out_line(format!("Name:\t{fqdn}"));
                        io.out_line(format!("Address: {ip}"));
                    }
                    io.out_line("");
                    0
                }
                _ => {
                    io.out_line(format!("** server can't find {name}: NXDOMAIN"));
                    io.out_line("");
                    1
                }
            }
        }
    }
}

fn dig(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let short = args.iter().any(|a| a == "+short");
    let Some(name) = args
        .iter()
        .find(|a| !a.starts_with('+') && !a.starts_with('@') && !a.starts_with('-') && *a != "A")
    else {
        io.err_line("Usage:  dig [@global-server] [domain] [q-type] [q-class] {q-opt}");
        return 1;
    };
    // dig asks for the name as given: no search list.
    let fq = format!("{}.", name.trim_end_matches('.'));
    let answer = if name.ends_with("cluster.local")
        || name.ends_with("cluster.local.")
        || name.parse::<std::net::IpAddr>().is_ok()
    {
        lookup(ctx, name)
    } else {
        Lookup::NxDomain
    };
    if let Lookup::NoServer = answer {
        ctx.spend(15_000);
        io.out_line(format!(
            ";; communications error to {CLUSTER_DNS}#53: timed out"
        ));
        return 9;
    }
    let ips = match &answer {
        Lookup::Found { ips, .. } => ips.clone(),
        _ => vec![],
    };
    if short {
        for ip in ips {
            io.out_line(ip);
        }
        return 0;
    }
    let status = if ips.is_empty() {
        "NXDOMAIN"
    } else {
        "NOERROR"
    };
    io.out_line(format!("; <<>> DiG 9.18.33 <<>> {name}"));
    io.out_line(";; global options: +cmd");
    io.out_line(";; Got answer:");
    io.out_line(format!(
        ";; ->>HEADER<<- opcode: QUERY, status: {status}, id: 4242"
    ));
    io.out_line(format!(
        ";; flags: qr aa rd; QUERY: 1, ANSWER: {}, AUTHORITY: 0, ADDITIONAL: 1",
        ips.len()
    ));
    io.out_line("");
    io.out_line(";; QUESTION SECTION:");
    io.out_line(format!(";{fq}\t\tIN\tA"));
    if !ips.is_empty() {
        io.out_line("");
        io.out_line(";; ANSWER SECTION:");
        for ip in &ips {
            io.out_line(format!("{fq}\t30\tIN\tA\t{ip}"));
        }
    }
    io.out_line("");
    io.out_line(";; Query time: 0 msec");
    io.out_line(format!(";; SERVER: {CLUSTER_DNS}#53({CLUSTER_DNS}) (UDP)"));
    0
}

fn host(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let Some(name) = args.iter().find(|a| !a.starts_with('-')) else {
        io.err_line(
            "Usage: host [-aCdilrTvVw] [-c class] [-N ndots] [-t type] [-W time] hostname [server]",
        );
        return 1;
    };
    match lookup(ctx, name) {
        Lookup::Found { fqdn, ips } => {
            for ip in ips {
                io.out_line(format!("{fqdn} has address {ip}"));
            }
            0
        }
        Lookup::NxDomain => {
            io.out_line(format!("Host {name} not found: 3(NXDOMAIN)"));
            1
        }
        Lookup::NoServer => {
            ctx.spend(10_000);
            io.out_line(";; connection timed out; no servers could be reached");
            1
        }
    }
}

fn getent(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("hosts" | "ahosts"), Some(name)) => match lookup(ctx, name) {
            Lookup::Found { fqdn, ips } => {
                for ip in ips {
                    io.out_line(format!("{ip:<15} {fqdn}"));
                }
                0
            }
            _ => 2,
        },
        _ => {
            io.err_line("Unknown database or key");
            1
        }
    }
}

fn ping(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let count: u32 = args
        .iter()
        .position(|a| a == "-c")
        .and_then(|i| args.get(i + 1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(4)
        .min(100);
    let Some(name) = args
        .iter()
        .rev()
        .find(|a| !a.starts_with('-') && a.parse::<u32>().is_err())
    else {
        io.err_line("ping: usage error: Destination address required");
        return 2;
    };
    let ip = match lookup(ctx, name) {
        Lookup::Found { ips, .. } => ips[0].clone(),
        _ => {
            io.err_line(format!("ping: bad address '{name}'"));
            return 2;
        }
    };
    let w = &*ctx.m.world;
    // A ClusterIP is a rule in kube-proxy's tables, not a host: nothing answers ICMP there.
    let answers = ip == "127.0.0.1"
        || w.pods
            .values()
            .any(|p| p.pod_ip.as_deref() == Some(ip.as_str()));
    io.out_line(format!("PING {name} ({ip}): 56 data bytes"));
    if answers {
        for seq in 0..count {
            io.out_line(format!(
                "64 bytes from {ip}: seq={seq} ttl=63 time=0.112 ms"
            ));
        }
    }
    ctx.spend(u64::from(count) * 1000);
    io.out_line("");
    io.out_line(format!("--- {name} ping statistics ---"));
    let got = if answers { count } else { 0 };
    io.out_line(format!(
        "{count} packets transmitted, {got} packets received, {}% packet loss",
        if answers { 0 } else { 100 }
    ));
    i32::from(!answers)
}
