//! The files a process in the container sees, built from the model when read: the volumes the
//! pod mounts (ConfigMaps and Secrets laid out as the kubelet lays them out, with `..data`
//! links), the service account's token, `/etc/hosts` and `/etc/resolv.conf` as the kubelet writes
//! them, `/proc` (the main process, memory, listening sockets) and the cgroup's limits. Files the
//! session wrote lie over them. Also the process environment.

use std::collections::BTreeMap;

use crate::bootstrap::CLUSTER_DNS;
use crate::objects::{Container, Pod};
use crate::programs;

use super::image::toolbox;
use super::{Model, Session, Target};

/// One node of the tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    File(Vec<u8>),
    Dir,
    /// A symbolic link and its target (relative to the link's directory, or absolute).
    Link(String),
}

/// A file error, in `strerror` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsError {
    NotFound,
    IsDir,
    NotDir,
}

impl FsError {
    pub fn text(self) -> &'static str {
        match self {
            FsError::NotFound => "No such file or directory",
            FsError::IsDir => "Is a directory",
            FsError::NotDir => "Not a directory",
        }
    }
}

/// `path` made absolute against `cwd`, with `.` and `..` resolved.
pub fn absolute(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = vec![];
    for p in joined.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn pod_of<'a>(m: &'a Model, t: &Target) -> Option<(&'a Pod, &'a Container)> {
    let p = m.world.pods.get(&t.pod)?;
    Some((p, p.container(t.slot)?))
}

/// The environment of the container's processes: what the kubelet sets (the spec's variables
/// with ConfigMap and Secret references resolved, service links, `HOSTNAME`) and the image's own.
pub fn environment(m: &Model, t: &Target) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert(
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
    );
    env.insert("HOME".into(), "/root".into());
    env.insert("HOSTNAME".into(), t.pod.1.clone());
    let Some((pod, c)) = pod_of(m, t) else {
        return env;
    };
    let ns = &t.pod.0;
    // Service links: every Service of the namespace that existed when the pod was created.
    let links = pod
        .spec
        .extra
        .get("enableServiceLinks")
        .and_then(|v| v.as_bool())
        .unwrap_or(true);
    for svc in m.world.services.values() {
        let same_ns = svc.meta.namespace.as_deref() == Some(ns.as_str());
        if !links || !same_ns || svc.meta.created > pod.meta.created || svc.cluster_ip == "None" {
            continue;
        }
        let prefix = svc.meta.name.to_uppercase().replace('-', "_");
        let ip = &svc.cluster_ip;
        if let Some(first) = svc.ports.first() {
            env.insert(format!("{prefix}_SERVICE_HOST"), ip.clone());
            env.insert(format!("{prefix}_SERVICE_PORT"), first.port.to_string());
            let proto = first.protocol.to_lowercase();
            env.insert(
                format!("{prefix}_PORT"),
                format!("{proto}://{ip}:{}", first.port),
            );
        }
        for p in &svc.ports {
            let proto = p.protocol.to_uppercase();
            let base = format!("{prefix}_PORT_{}_{proto}", p.port);
            env.insert(
                base.clone(),
                format!("{}://{ip}:{}", proto.to_lowercase(), p.port),
            );
            env.insert(format!("{base}_PROTO"), proto.to_lowercase());
            env.insert(format!("{base}_PORT"), p.port.to_string());
            env.insert(format!("{base}_ADDR"), ip.clone());
        }
    }
    env.insert("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into());
    env.insert("KUBERNETES_SERVICE_PORT".into(), "443".into());
    env.insert("KUBERNETES_PORT".into(), "tcp://10.96.0.1:443".into());
    for e in &c.env {
        if let Some(v) = programs::env_value(m.world, ns, c, &e.name) {
            env.insert(e.name.clone(), v);
        }
    }
    env
}

/// The whole tree the container sees now (the session's writes over it).
pub fn tree(s: &Session, m: &Model) -> BTreeMap<String, Node> {
    let mut t = BTreeMap::new();
    for d in [
        "/",
        "/bin",
        "/usr",
        "/usr/bin",
        "/etc",
        "/proc",
        "/proc/1",
        "/proc/net",
        "/sys",
        "/sys/fs",
        "/sys/fs/cgroup",
        "/tmp",
        "/root",
        "/var",
        "/var/run",
        "/dev",
    ] {
        t.insert(d.to_string(), Node::Dir);
    }
    t.insert("/dev/null".into(), Node::File(vec![]));
    let tools = toolbox(&s.target.image);
    for group in tools.tools {
        for tool in group.iter().filter(|n| !n.contains('[')) {
            t.insert(format!("/usr/bin/{tool}"), Node::File(vec![]));
        }
    }
    if tools.shell.is_some() {
        t.insert("/bin/sh".into(), Node::File(vec![]));
    }
    t.insert(
        "/etc/os-release".into(),
        Node::File(format!("PRETTY_NAME=\"{}\"\n", tools.os).into_bytes()),
    );
    t.insert(
        "/etc/passwd".into(),
        Node::File(b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n".to_vec()),
    );
    if let Some((pod, c)) = pod_of(m, &s.target) {
        etc_files(&mut t, pod);
        proc_files(&mut t, m, s, pod, c);
        mounts(&mut t, m, pod, c);
    }
    for (path, data) in &s.files {
        let mut dir = path.as_str();
        while let Some((parent, _)) = dir.rsplit_once('/') {
            let parent = if parent.is_empty() { "/" } else { parent };
            t.entry(parent.to_string()).or_insert(Node::Dir);
            if parent == "/" {
                break;
            }
            dir = parent;
        }
        t.insert(path.clone(), Node::File(data.clone()));
    }
    t
}

fn etc_files(t: &mut BTreeMap<String, Node>, pod: &Pod) {
    let name = &pod.meta.name;
    let ns = pod.meta.namespace.as_deref().unwrap_or_default();
    let ip = pod.pod_ip.clone().unwrap_or_default();
    t.insert(
        "/etc/hostname".into(),
        Node::File(format!("{name}\n").into_bytes()),
    );
    t.insert(
        "/etc/hosts".into(),
        Node::File(
            format!(
                "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n{ip}\t{name}\n"
            )
            .into_bytes(),
        ),
    );
    let resolv = if pod.spec.dns_policy == "None" {
        let (servers, searches) = pod
            .spec
            .dns_config
            .as_ref()
            .map(|d| (d.nameservers.clone(), d.searches.clone()))
            .unwrap_or_default();
        let mut r: String = servers
            .iter()
            .map(|n| format!("nameserver {n}\n"))
            .collect();
        if !searches.is_empty() {
            r.push_str(&format!("search {}\n", searches.join(" ")));
        }
        r
    } else if pod.spec.dns_policy == "Default" {
        "nameserver 169.254.169.254\nsearch c.internal\n".to_string()
    } else {
        format!(
            "search {ns}.svc.cluster.local svc.cluster.local cluster.local\nnameserver {CLUSTER_DNS}\noptions ndots:5\n"
        )
    };
    t.insert("/etc/resolv.conf".into(), Node::File(resolv.into_bytes()));
}

fn proc_files(t: &mut BTreeMap<String, Node>, m: &Model, s: &Session, pod: &Pod, c: &Container) {
    let argv: Vec<String> = main_argv(m, c);
    let mut cmdline = argv.join("\0").into_bytes();
    cmdline.push(0);
    t.insert("/proc/1/cmdline".into(), Node::File(cmdline));
    let status = pod.status(s.target.slot);
    let (node_mem, node_cpu) = m.host(&s.target.pod);
    let kib = node_mem / 1024;
    let used = status.map_or(0.0, |s| s.working_set) as i64 / 1024;
    t.insert(
        "/proc/meminfo".into(),
        Node::File(
            format!(
                "MemTotal:       {kib:>8} kB\nMemFree:        {:>8} kB\nMemAvailable:   {:>8} kB\n",
                kib - used - kib / 5,
                kib - used - kib / 10
            )
            .into_bytes(),
        ),
    );
    let uptime = (m.world.now - pod.start_time.unwrap_or(m.world.now)) / 1_000_000_000 + 86_400;
    t.insert(
        "/proc/uptime".into(),
        Node::File(format!("{uptime}.00 {}.00\n", uptime * 3).into_bytes()),
    );
    t.insert(
        "/proc/loadavg".into(),
        Node::File(b"0.42 0.38 0.35 2/311 97\n".to_vec()),
    );
    t.insert(
        "/proc/version".into(),
        Node::File(b"Linux version 6.1.0-28-cloud-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)\n".to_vec()),
    );
    let prog = programs::identify(m.app, c);
    let running = status.is_some_and(|s| s.state.is_running());
    let ports = if running {
        programs::listen_ports(c, prog.as_ref())
    } else {
        vec![]
    };
    let mut tcp =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
            .to_string();
    for (i, p) in ports.iter().enumerate() {
        tcp.push_str(&format!(
            "{i:>4}: 00000000:{p:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 {} 1 0000000000000000 100 0 0 10 0\n",
            31_000 + i
        ));
    }
    t.insert("/proc/net/tcp".into(), Node::File(tcp.into_bytes()));
    // cgroup v2 limits as the container runtime sets them.
    let limits = &c.resources.limits;
    let mem_max = limits.memory.map_or("max".to_string(), |b| b.to_string());
    let cpu_max = limits.cpu_milli.map_or("max 100000".to_string(), |mc| {
        format!("{} 100000", mc * 100)
    });
    let cg = |v: String| Node::File(format!("{v}\n").into_bytes());
    t.insert("/sys/fs/cgroup/memory.max".into(), cg(mem_max));
    t.insert(
        "/sys/fs/cgroup/memory.current".into(),
        cg((status.map_or(0.0, |s| s.working_set) as i64).to_string()),
    );
    t.insert("/sys/fs/cgroup/cpu.max".into(), cg(cpu_max));
    if let Some(st) = status {
        t.insert(
            "/sys/fs/cgroup/cpu.stat".into(),
            Node::File(
                format!(
                    "usage_usec {}\nnr_periods {}\nnr_throttled {}\nthrottled_usec {}\n",
                    (st.cpu_seconds * 1e6) as u64,
                    st.cfs_periods as u64,
                    st.cfs_throttled_periods as u64,
                    (st.cfs_throttled_seconds * 1e6) as u64
                )
                .into_bytes(),
            ),
        );
    }
    let _ = node_cpu;
}

/// The main process's argv: the container's command and args, or the program's default.
pub fn main_argv(m: &Model, c: &Container) -> Vec<String> {
    let mut argv: Vec<String> = c.command.iter().chain(&c.args).cloned().collect();
    if argv.is_empty() {
        argv = match programs::identify(m.app, c) {
            Some(p) if !p.spec.command.is_empty() => {
                p.spec.command.iter().chain(&p.spec.args).cloned().collect()
            }
            Some(p) => vec![format!("./{}", p.spec.name)],
            None => vec!["/bin/sh".into()],
        };
    }
    argv
}

/// Volumes mounted into the container, as the kubelet lays them out.
fn mounts(t: &mut BTreeMap<String, Node>, m: &Model, pod: &Pod, c: &Container) {
    let ns = pod.meta.namespace.as_deref().unwrap_or_default();
    let stamp = "..2025_11_20_08_15_02.1234567890";
    for vm in &c.volume_mounts {
        let Some(v) = pod.spec.volumes.iter().find(|v| v.name == vm.name) else {
            continue;
        };
        let mount = absolute("/", &vm.mount_path);
        let files: Option<BTreeMap<String, Vec<u8>>> = if let Some(cm) = &v.config_map {
            m.world
                .configmaps
                .get(&(ns.to_string(), cm.name.clone()))
                .map(|c| {
                    c.data
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                        .collect()
                })
        } else if let Some(sec) = &v.secret {
            m.world
                .secrets
                .get(&(ns.to_string(), sec.secret_name.clone()))
                .map(|s| {
                    s.data
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                        .collect()
                })
        } else {
            None
        };
        add_dirs(t, &mount);
        match (files, &vm.sub_path) {
            (Some(files), Some(sub)) => {
                // A subPath mount is a plain file, and it never sees later updates; close enough.
                if let Some(data) = files.get(sub) {
                    t.insert(mount, Node::File(data.clone()));
                }
            }
            (Some(files), None) => {
                t.insert(mount.clone(), Node::Dir);
                t.insert(format!("{mount}/{stamp}"), Node::Dir);
                t.insert(format!("{mount}/..data"), Node::Link(stamp.to_string()));
                for (k, data) in files {
                    t.insert(format!("{mount}/{stamp}/{k}"), Node::File(data));
                    t.insert(format!("{mount}/{k}"), Node::Link(format!("..data/{k}")));
                }
            }
            (None, _) => {
                t.insert(mount, Node::Dir);
            }
        }
    }
    let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
    add_dirs(t, sa);
    t.insert(sa.into(), Node::Dir);
    t.insert(
        format!("{sa}/namespace"),
        Node::File(ns.as_bytes().to_vec()),
    );
    t.insert(
        format!("{sa}/token"),
        Node::File(format!("eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9.{}", pod.meta.uid).into_bytes()),
    );
    t.insert(
        format!("{sa}/ca.crt"),
        Node::File(b"-----BEGIN CERTIFICATE-----\nMIIC/jCCAeagAwIBAgIBADANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwprdWJl\n-----END CERTIFICATE-----\n".to_vec()),
    );
}

fn add_dirs(t: &mut BTreeMap<String, Node>, path: &str) {
    let mut p = String::new();
    for part in path.split('/').filter(|s| !s.is_empty()) {
        p.push('/');
        p.push_str(part);
        t.entry(p.clone()).or_insert(Node::Dir);
    }
}

/// Follows links, in every component, to the node a path names.
pub fn resolve(t: &BTreeMap<String, Node>, path: &str) -> Result<(String, Node), FsError> {
    let mut hops = 0;
    let mut pending: Vec<String> = absolute("/", path)
        .split('/')
        .filter(|c| !c.is_empty())
        .rev()
        .map(str::to_string)
        .collect();
    let mut cur = "/".to_string();
    while let Some(comp) = pending.pop() {
        match t.get(&cur) {
            Some(Node::Dir) => {}
            Some(_) => return Err(FsError::NotDir),
            None => return Err(FsError::NotFound),
        }
        let next = if cur == "/" {
            format!("/{comp}")
        } else {
            format!("{cur}/{comp}")
        };
        match t.get(&next) {
            Some(Node::Link(target)) => {
                hops += 1;
                if hops > 16 {
                    return Err(FsError::NotFound);
                }
                // The link's target replaces it: its components go first.
                let target = absolute(&cur, target);
                pending.extend(
                    target
                        .split('/')
                        .filter(|c| !c.is_empty())
                        .rev()
                        .map(str::to_string),
                );
                cur = "/".into();
            }
            Some(_) => cur = next,
            None => return Err(FsError::NotFound),
        }
    }
    let node = t.get(&cur).cloned().ok_or(FsError::NotFound)?;
    Ok((cur, node))
}

/// Reads a file.
pub fn read(s: &Session, m: &Model, path: &str) -> Result<Vec<u8>, FsError> {
    let t = tree(s, m);
    match resolve(&t, &absolute(&s.cwd, path))? {
        (_, Node::File(d)) => Ok(d),
        (_, Node::Dir) => Err(FsError::IsDir),
        (_, Node::Link(_)) => Err(FsError::NotFound),
    }
}

/// The entries of a directory (name, node), or the file itself.
pub fn list(s: &Session, m: &Model, path: &str) -> Result<Vec<(String, Node)>, FsError> {
    let t = tree(s, m);
    let abs = absolute(&s.cwd, path);
    // A link to a directory is listed through; the link itself when it is the entry.
    let (real, node) = resolve(&t, &abs)?;
    if !matches!(node, Node::Dir) {
        let name = abs.rsplit('/').next().unwrap_or_default().to_string();
        return Ok(vec![(name, t.get(&abs).cloned().unwrap_or(node))]);
    }
    let prefix = if real == "/" {
        "/".to_string()
    } else {
        format!("{real}/")
    };
    Ok(t.range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter(|(k, _)| k.len() > prefix.len() && !k[prefix.len()..].contains('/'))
        .map(|(k, n)| (k[prefix.len()..].to_string(), n.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_dots() {
        assert_eq!(absolute("/etc", "../proc/./1"), "/proc/1");
        assert_eq!(absolute("/", ".."), "/");
        assert_eq!(absolute("/a", "/b//c/"), "/b/c");
    }

    #[test]
    fn links_are_followed_and_bounded() {
        let mut t = BTreeMap::new();
        t.insert("/".to_string(), Node::Dir);
        t.insert("/cfg".to_string(), Node::Dir);
        t.insert("/cfg/..v1".to_string(), Node::Dir);
        t.insert("/cfg/..v1/a".to_string(), Node::File(b"x".to_vec()));
        t.insert("/cfg/..data".to_string(), Node::Link("..v1".into()));
        t.insert("/cfg/a".to_string(), Node::Link("..data/a".into()));
        t.insert("/loop".to_string(), Node::Link("/loop".into()));
        assert_eq!(
            resolve(&t, "/cfg/a").unwrap(),
            ("/cfg/..v1/a".to_string(), Node::File(b"x".to_vec()))
        );
        assert_eq!(resolve(&t, "/loop"), Err(FsError::NotFound));
        assert_eq!(resolve(&t, "/cfg/a/b"), Err(FsError::NotDir));
    }
}
