//! Which shell and tools an image ships, as the real images do: the DeathStarBench Go images are
//! built on Debian with curl and wget, MongoDB's and Redis' images have their CLIs but no curl,
//! most OpenTelemetry demo services are distroless (no shell at all), Alpine-based images have
//! BusyBox. Debug images agents start with `kubectl run` (busybox, curlimages/curl, netshoot)
//! ship what they are known for.

/// The shell an image has, which decides how errors are worded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// GNU bash (Debian and Ubuntu images; `sh` is dash there).
    Bash,
    /// BusyBox ash (Alpine, busybox).
    Ash,
}

/// What an image ships.
#[derive(Debug, Clone, Copy)]
pub struct Toolbox {
    pub shell: Option<Shell>,
    pub tools: &'static [&'static [&'static str]],
    /// `/etc/os-release`'s PRETTY_NAME.
    pub os: &'static str,
}

impl Toolbox {
    pub fn has(&self, tool: &str) -> bool {
        let name = tool.rsplit('/').next().unwrap_or(tool);
        match name {
            "sh" => self.shell.is_some(),
            "bash" => {
                self.shell == Some(Shell::Bash) || self.tools.iter().any(|g| g.contains(&"bash"))
            }
            "ash" => self.shell == Some(Shell::Ash),
            _ => self.tools.iter().any(|g| g.contains(&name)),
        }
    }

    /// Whether the image's tools are BusyBox applets (their messages differ from GNU's).
    pub fn busybox(&self) -> bool {
        self.shell == Some(Shell::Ash)
    }
}

/// Coreutils, grep, procps-less Debian base.
const DEBIAN: &[&str] = &[
    "cat", "ls", "echo", "env", "printenv", "head", "tail", "grep", "egrep", "wc", "sort", "uniq",
    "cut", "tr", "date", "hostname", "id", "whoami", "uname", "sleep", "df", "true", "false",
    "test", "[", "printf", "pwd", "seq", "yes", "timeout", "mount", "touch", "mkdir", "rm", "cp",
    "mv", "tee", "basename", "dirname", "readlink", "getent", "sed", "awk", "find", "xargs",
    "which", "nproc",
];
/// procps: ps, free, top, uptime.
const PROCPS: &[&str] = &["ps", "free", "top", "uptime", "kill", "pgrep"];
/// BusyBox applets in an Alpine or busybox image.
const BUSYBOX: &[&str] = &[
    "cat", "ls", "echo", "env", "printenv", "head", "tail", "grep", "egrep", "wc", "sort", "uniq",
    "cut", "tr", "date", "hostname", "id", "whoami", "uname", "sleep", "df", "true", "false",
    "test", "[", "printf", "pwd", "seq", "yes", "timeout", "mount", "touch", "mkdir", "rm", "cp",
    "mv", "tee", "basename", "dirname", "readlink", "sed", "awk", "find", "xargs", "which",
    "nproc", "ps", "free", "top", "uptime", "kill", "pgrep", "wget", "nc", "nslookup", "ping",
    "telnet", "netstat", "ifconfig", "ip",
];
const CURL: &[&str] = &["curl"];
const WGET: &[&str] = &["wget"];
/// nicolaka/netshoot's network tools.
const NETSHOOT: &[&str] = &[
    "curl", "wget", "dig", "nslookup", "host", "nc", "ping", "ss", "netstat", "ip", "telnet",
    "getent", "bash",
];
const MONGO: &[&str] = &["mongo"];
const REDIS: &[&str] = &["redis-cli"];
const VALKEY: &[&str] = &["valkey-cli", "redis-cli"];
const POSTGRES: &[&str] = &["psql", "pg_isready"];

const NONE: Toolbox = Toolbox {
    shell: None,
    tools: &[],
    os: "Debian GNU/Linux 12 (bookworm)",
};

/// The toolbox of an image reference.
pub fn toolbox(image: &str) -> Toolbox {
    let repo = crate::programs::repository(image);
    let name = repo.rsplit('/').next().unwrap_or(repo);
    let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or("latest");
    let debian = |tools, os| Toolbox {
        shell: Some(Shell::Bash),
        tools,
        os,
    };
    let alpine = |tools| Toolbox {
        shell: Some(Shell::Ash),
        tools,
        os: "Alpine Linux v3.20",
    };
    match (repo, name) {
        ("deathstarbench/hotel-reservation", _) => debian(
            &[DEBIAN, PROCPS, CURL, WGET],
            "Debian GNU/Linux 12 (bookworm)",
        ),
        (_, "social-network-microservices" | "media-microservices") => {
            debian(&[DEBIAN, PROCPS], "Ubuntu 18.04.6 LTS")
        }
        (_, "wrk2-client" | "openresty-thrift" | "media-frontend") => {
            debian(&[DEBIAN, PROCPS, CURL], "Ubuntu 16.04.7 LTS")
        }
        (_, "mongo") => debian(&[DEBIAN, MONGO], "Ubuntu 20.04.2 LTS"),
        (_, "redis") => debian(&[DEBIAN, REDIS], "Debian GNU/Linux 10 (buster)"),
        (_, "memcached") => debian(&[DEBIAN], "Debian GNU/Linux 10 (buster)"),
        (_, "postgres") => debian(&[DEBIAN, POSTGRES], "Debian GNU/Linux 12 (bookworm)"),
        (_, "valkey") => alpine(&[BUSYBOX, VALKEY]),
        (_, "consul") | ("alpine/k8s", _) | ("curlimages/curl", _) => alpine(&[BUSYBOX, CURL]),
        (_, "busybox" | "alpine") => alpine(&[BUSYBOX]),
        (_, "netshoot") => alpine(&[BUSYBOX, NETSHOOT]),
        (_, "stress") => alpine(&[BUSYBOX]),
        (_, "all-in-one") => alpine(&[BUSYBOX]),
        (_, "python") | ("bitnami/kubectl", _) => {
            debian(&[DEBIAN], "Debian GNU/Linux 12 (bookworm)")
        }
        (_, "ubuntu") => debian(&[DEBIAN, PROCPS], "Ubuntu 24.04.1 LTS"),
        (_, "debian") => debian(&[DEBIAN], "Debian GNU/Linux 12 (bookworm)"),
        (_, "nginx") => debian(&[DEBIAN, CURL], "Debian GNU/Linux 12 (bookworm)"),
        ("ghcr.io/open-telemetry/demo", _) => otel_demo(tag),
        _ => NONE,
    }
}

/// The OpenTelemetry demo's images, by the service in their tag: Node on Alpine for the
/// frontend, Python and Ruby on Debian slim, Envoy on Ubuntu, distroless for the Go, .NET, Rust
/// and Java services.
fn otel_demo(tag: &str) -> Toolbox {
    let service = tag.split_once('-').map(|(_, s)| s).unwrap_or(tag);
    match service {
        "frontend" | "currency" | "quote" | "kafka" => Toolbox {
            shell: Some(Shell::Ash),
            tools: &[BUSYBOX],
            os: "Alpine Linux v3.20",
        },
        "image-provider" => Toolbox {
            shell: Some(Shell::Ash),
            tools: &[BUSYBOX, CURL],
            os: "Alpine Linux v3.20",
        },
        "frontend-proxy" => Toolbox {
            shell: Some(Shell::Bash),
            tools: &[DEBIAN],
            os: "Ubuntu 22.04.5 LTS",
        },
        "recommendation" | "load-generator" | "email" | "ad" => Toolbox {
            shell: Some(Shell::Bash),
            tools: &[DEBIAN],
            os: "Debian GNU/Linux 12 (bookworm)",
        },
        _ => NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_ship_what_the_real_ones_do() {
        let hotel = toolbox("deathstarbench/hotel-reservation:latest");
        assert!(hotel.has("curl") && hotel.has("ps") && !hotel.has("nslookup"));
        let mongo = toolbox("mongo:4.4.6");
        assert!(mongo.has("mongo") && !mongo.has("curl") && mongo.has("bash"));
        let busybox = toolbox("busybox:1.36");
        assert!(busybox.busybox() && busybox.has("wget") && !busybox.has("curl"));
        assert!(toolbox("nicolaka/netshoot").has("dig"));
        // Distroless: nothing to exec at all.
        let checkout = toolbox("ghcr.io/open-telemetry/demo:2.0.2-checkout");
        assert!(checkout.shell.is_none() && !checkout.has("ls"));
        assert!(toolbox("ghcr.io/open-telemetry/demo:2.0.2-frontend").has("wget"));
        assert!(toolbox("/bin/sh").shell.is_none());
    }
}
