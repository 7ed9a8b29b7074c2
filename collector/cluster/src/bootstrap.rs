//! Builds the cluster an application spec describes: nodes, namespaces, cluster DNS, and for each
//! service its workload, Service, ConfigMaps, PVCs and ServiceAccount, then lets the control plane
//! and kubelets bring it up before the captured window starts (as a deployed app would be).

use problems::app::{AppSpec, NodeRole, ProbeHandler, ServiceSpec, WorkloadKind};
use serde_json::json;

use super::objects::*;
use super::world::World;

/// Namespace of the cluster add-ons.
pub const KUBE_SYSTEM: &str = "kube-system";
/// The ClusterIP of kube-dns, the nameserver every pod with the default DNS policy uses.
pub const CLUSTER_DNS: &str = "10.96.0.10";

pub const COREFILE: &str = ".:53 {\n    errors\n    health {\n       lameduck 5s\n    }\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }\n    prometheus :9153\n    forward . /etc/resolv.conf {\n       max_concurrent 1000\n    }\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n";

fn probe(p: &problems::app::Probe) -> Probe {
    let base = Probe {
        http_get: None,
        tcp_socket: None,
        grpc: None,
        exec: None,
        initial_delay_seconds: (p.initial_delay.as_millis() / 1000) as i32,
        timeout_seconds: (p.timeout.as_millis() / 1000).max(1) as i32,
        period_seconds: (p.period.as_millis() / 1000).max(1) as i32,
        success_threshold: 1,
        failure_threshold: p.failure_threshold.max(1) as i32,
    };
    match &p.handler {
        ProbeHandler::Http { path, port } => Probe {
            http_get: Some(HttpGet {
                path: path.clone(),
                port: IntOrString::Int(i32::from(*port)),
                scheme: "HTTP".into(),
            }),
            ..base
        },
        ProbeHandler::Tcp { port } => Probe {
            tcp_socket: Some(PortOnly {
                port: IntOrString::Int(i32::from(*port)),
            }),
            ..base
        },
        ProbeHandler::Grpc { port } => Probe {
            grpc: Some(PortOnly {
                port: IntOrString::Int(i32::from(*port)),
            }),
            ..base
        },
        ProbeHandler::Exec { command } => Probe {
            exec: Some(ExecAction {
                command: command.clone(),
            }),
            ..base
        },
    }
}

/// Converts a spec probe (used by faults that replace probes too).
pub fn to_probe(p: &problems::app::Probe) -> Probe {
    probe(p)
}

/// The pod template of a service, as its manifest would declare it.
pub fn template(app: &AppSpec, s: &ServiceSpec) -> PodTemplate {
    let mut c = Container::new(s.container_name(), &s.image);
    c.command = s.command.clone();
    c.args = s.args.clone();
    c.ports = s
        .ports
        .iter()
        .map(|p| ContainerPort {
            name: None,
            container_port: i32::from(p.target_port()),
            host_port: None,
            protocol: "TCP".into(),
        })
        .collect();
    c.env = s.env.iter().map(|(k, v)| EnvVar::value(k, v)).collect();
    c.resources = Resources {
        limits: ResourceList {
            cpu_milli: s.resources.limits.cpu.map(|x| x.millicores() as i64),
            memory: s.resources.limits.memory.map(|x| x.bytes() as i64),
        },
        requests: ResourceList {
            cpu_milli: s.resources.requests.cpu.map(|x| x.millicores() as i64),
            memory: s.resources.requests.memory.map(|x| x.bytes() as i64),
        },
    };
    c.readiness_probe = s.readiness.as_ref().map(probe);
    c.liveness_probe = s.liveness.as_ref().map(probe);
    let mut volumes = vec![];
    for m in &s.config_mounts {
        let name = m.config_map.clone();
        if !volumes.iter().any(|v: &Volume| v.name == name) {
            volumes.push(Volume::config_map(&name, &m.config_map));
        }
        c.volume_mounts.push(VolumeMount {
            name,
            mount_path: m.mount_path.clone(),
            sub_path: m.sub_path.clone(),
            read_only: false,
        });
    }
    for v in &s.volumes {
        let name = format!("{}-data", s.name);
        volumes.push(Volume::pvc(&name, &v.claim));
        c.volume_mounts.push(VolumeMount {
            name,
            mount_path: v.mount_path.clone(),
            sub_path: None,
            read_only: false,
        });
    }
    let mut spec = PodSpec::new(vec![c]);
    spec.volumes = volumes;
    if let Some(sa) = &s.service_account {
        spec.service_account_name = sa.clone();
    }
    PodTemplate {
        metadata: TemplateMeta {
            labels: pod_labels(app, s),
            annotations: Labels::new(),
        },
        spec,
    }
}

fn pod_labels(app: &AppSpec, s: &ServiceSpec) -> Labels {
    let mut l = app.common_labels.clone();
    l.insert(app.selector_label.clone(), s.name.clone());
    l
}

fn selector(app: &AppSpec, s: &ServiceSpec) -> Labels {
    [(app.selector_label.clone(), s.name.clone())].into()
}

/// Creates every object of the app and the cluster around it, at the world's current time.
pub fn build(w: &mut World, app: &AppSpec) {
    build_cluster(w, app);
    build_app(w, app);
}

/// Creates the cluster the app runs on (its nodes, the `default` and `kube-system` namespaces,
/// cluster DNS) without the app: what a client deploys the app onto.
pub fn build_cluster(w: &mut World, app: &AppSpec) {
    for (i, n) in app.nodes.iter().enumerate() {
        let mut labels: Labels = [
            ("beta.kubernetes.io/arch", "amd64"),
            ("beta.kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        labels.insert("kubernetes.io/hostname".into(), n.name.clone());
        let mut taints: Vec<Taint> = n
            .taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: (!t.value.is_empty()).then(|| t.value.clone()),
                effect: t.effect.as_str().into(),
            })
            .collect();
        if n.role == NodeRole::ControlPlane {
            labels.insert(
                "node-role.kubernetes.io/control-plane".into(),
                String::new(),
            );
            labels.insert(
                "node.kubernetes.io/exclude-from-external-load-balancers".into(),
                String::new(),
            );
            if taints.is_empty() {
                taints.push(Taint {
                    key: "node-role.kubernetes.io/control-plane".into(),
                    value: None,
                    effect: "NoSchedule".into(),
                });
            }
        }
        labels.extend(n.labels.clone());
        let mut meta = w.meta(None, &n.name, labels);
        meta.annotations
            .insert("node.alpha.kubernetes.io/ttl".into(), "0".into());
        meta.annotations.insert(
            "volumes.kubernetes.io/controller-managed-attach-detach".into(),
            "true".into(),
        );
        let now = w.now;
        let mut conditions = vec![];
        for (kind, reason, msg) in [
            (
                "MemoryPressure",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            (
                "DiskPressure",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            (
                "PIDPressure",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
        ] {
            set_condition(&mut conditions, kind, false, Some(reason), Some(msg), now);
        }
        set_condition(
            &mut conditions,
            "Ready",
            true,
            Some("KubeletReady"),
            Some("kubelet is posting ready status"),
            now,
        );
        w.nodes.insert(
            n.name.clone(),
            Node {
                meta,
                cpu_milli: n.cpu.millicores() as i64,
                memory: n.memory.bytes() as i64,
                max_pods: 110,
                ip: format!("172.18.0.{}", i + 2),
                pod_cidr: format!("10.244.{}.0/24", i + 1),
                taints,
                unschedulable: false,
                conditions,
                kubelet_up: true,
                heartbeat: now,
            },
        );
        w.touch(Kind::Node, &key("", &n.name));
    }
    for ns in ["default", KUBE_SYSTEM] {
        namespace(w, ns);
    }
    cluster_dns(w);
}

/// Creates the app's namespace and objects (as deploying its manifests does).
pub fn build_app(w: &mut World, app: &AppSpec) {
    namespace(w, &app.namespace);
    for cm in &app.config_maps {
        let meta = w.meta(Some(&app.namespace), &cm.name, app.common_labels.clone());
        let k = key(&app.namespace, &cm.name);
        w.configmaps.insert(
            k.clone(),
            ConfigMap {
                meta,
                data: cm.data.clone(),
                extra: serde_json::Map::new(),
            },
        );
        w.touch(Kind::ConfigMap, &k);
    }
    for s in &app.services {
        service(w, app, s);
    }
}

fn namespace(w: &mut World, ns: &str) {
    let labels: Labels = [("kubernetes.io/metadata.name".to_string(), ns.to_string())].into();
    let meta = w.meta(None, ns, labels);
    w.namespaces.insert(
        ns.to_string(),
        Namespace {
            meta,
            body: json!({"spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        },
    );
    w.touch(Kind::Namespace, &key("", ns));
    default_service_account(w, ns);
    let mut meta = w.meta(Some(ns), "kube-root-ca.crt", Labels::new());
    meta.annotations.insert(
        "kubernetes.io/description".into(),
        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.".into(),
    );
    let k = key(ns, "kube-root-ca.crt");
    w.configmaps.insert(
        k.clone(),
        ConfigMap {
            meta,
            data: [(
                "ca.crt".to_string(),
                "-----BEGIN CERTIFICATE-----\nMIIDBTCCAe2gAwIBAgIIQ2VydGlmaWNhdGUwDQYJKoZIhvcNAQELBQAwFTETMBEG\n-----END CERTIFICATE-----\n".to_string(),
            )]
            .into(),
            extra: serde_json::Map::new(),
        },
    );
    w.touch(Kind::ConfigMap, &k);
}

fn cluster_dns(w: &mut World) {
    let ns = KUBE_SYSTEM;
    let labels: Labels = [("k8s-app".to_string(), "kube-dns".to_string())].into();
    let meta = w.meta(Some(ns), "coredns", Labels::new());
    let k = key(ns, "coredns");
    w.configmaps.insert(
        k.clone(),
        ConfigMap {
            meta,
            data: [("Corefile".to_string(), COREFILE.to_string())].into(),
            extra: serde_json::Map::new(),
        },
    );
    w.touch(Kind::ConfigMap, &k);
    let mut c = Container::new("coredns", "registry.k8s.io/coredns/coredns:v1.11.3");
    c.args = vec!["-conf".into(), "/etc/coredns/Corefile".into()];
    c.ports = vec![
        ContainerPort {
            name: Some("dns".into()),
            container_port: 53,
            host_port: None,
            protocol: "UDP".into(),
        },
        ContainerPort {
            name: Some("dns-tcp".into()),
            container_port: 53,
            host_port: None,
            protocol: "TCP".into(),
        },
        ContainerPort {
            name: Some("metrics".into()),
            container_port: 9153,
            host_port: None,
            protocol: "TCP".into(),
        },
    ];
    c.resources = Resources {
        limits: ResourceList {
            cpu_milli: None,
            memory: Some(170 << 20),
        },
        requests: ResourceList {
            cpu_milli: Some(100),
            memory: Some(70 << 20),
        },
    };
    c.volume_mounts = vec![VolumeMount {
        name: "config-volume".into(),
        mount_path: "/etc/coredns".into(),
        sub_path: None,
        read_only: true,
    }];
    let mut spec = PodSpec::new(vec![c]);
    spec.dns_policy = "Default".into();
    spec.volumes = vec![Volume::config_map("config-volume", "coredns")];
    spec.service_account_name = "coredns".into();
    spec.tolerations = vec![
        Toleration {
            key: Some("CriticalAddonsOnly".into()),
            operator: "Exists".into(),
            value: None,
            effect: None,
            toleration_seconds: None,
        },
        Toleration {
            key: Some("node-role.kubernetes.io/control-plane".into()),
            operator: "Exists".into(),
            value: None,
            effect: Some("NoSchedule".into()),
            toleration_seconds: None,
        },
    ];
    let sa = w.meta(Some(ns), "coredns", Labels::new());
    w.service_accounts.insert(
        key(ns, "coredns"),
        ServiceAccount {
            meta: sa,
            body: json!({}),
        },
    );
    w.touch(Kind::ServiceAccount, &key(ns, "coredns"));
    let template = PodTemplate {
        metadata: TemplateMeta {
            labels: labels.clone(),
            annotations: Labels::new(),
        },
        spec,
    };
    deployment(
        w,
        ns,
        "coredns",
        labels.clone(),
        labels.clone(),
        template,
        2,
    );
    let mut meta = w.meta(Some(ns), "kube-dns", labels.clone());
    meta.labels
        .insert("kubernetes.io/name".into(), "CoreDNS".into());
    meta.annotations
        .insert("prometheus.io/port".into(), "9153".into());
    meta.annotations
        .insert("prometheus.io/scrape".into(), "true".into());
    let k = key(ns, "kube-dns");
    w.services.insert(
        k.clone(),
        Service {
            meta,
            selector: labels,
            ports: vec![
                ServicePort {
                    name: Some("dns".into()),
                    protocol: "UDP".into(),
                    port: 53,
                    target_port: IntOrString::Int(53),
                },
                ServicePort {
                    name: Some("dns-tcp".into()),
                    protocol: "TCP".into(),
                    port: 53,
                    target_port: IntOrString::Int(53),
                },
                ServicePort {
                    name: Some("metrics".into()),
                    protocol: "TCP".into(),
                    port: 9153,
                    target_port: IntOrString::Int(9153),
                },
            ],
            cluster_ip: CLUSTER_DNS.into(),
            internal_traffic_policy: "Cluster".into(),
            spec_extra: serde_json::Map::new(),
        },
    );
    w.touch(Kind::Service, &k);
}

fn deployment(
    w: &mut World,
    ns: &str,
    name: &str,
    labels: Labels,
    selector: Labels,
    template: PodTemplate,
    replicas: i32,
) {
    let mut meta = w.meta(Some(ns), name, labels);
    meta.annotations
        .insert("deployment.kubernetes.io/revision".into(), "1".into());
    let k = key(ns, name);
    w.deployments.insert(
        k.clone(),
        Deployment {
            meta,
            replicas,
            selector,
            template,
            strategy: Strategy::rolling(),
            observed_generation: 1,
            counts: ReplicaCounts::default(),
            conditions: vec![],
            revision: 0,
            spec_extra: serde_json::Map::new(),
        },
    );
    w.touch(Kind::Deployment, &k);
}

/// Creates one app service's objects.
pub fn service(w: &mut World, app: &AppSpec, s: &ServiceSpec) {
    let ns = app.namespace.as_str();
    let labels = pod_labels(app, s);
    let template = template(app, s);
    match s.kind {
        WorkloadKind::StatefulSet => {
            let meta = w.meta(Some(ns), &s.name, labels.clone());
            let k = key(ns, &s.name);
            let revision = format!(
                "{}-{}",
                s.name,
                super::util::template_hash(&serde_json::to_string(&template).unwrap_or_default())
            );
            w.statefulsets.insert(
                k.clone(),
                StatefulSet {
                    meta,
                    replicas: s.replicas as i32,
                    selector: selector(app, s),
                    service_name: s.name.clone(),
                    template,
                    observed_generation: 1,
                    counts: ReplicaCounts::default(),
                    revision,
                },
            );
            w.touch(Kind::StatefulSet, &k);
        }
        WorkloadKind::Deployment | WorkloadKind::Job => {
            deployment(
                w,
                ns,
                &s.name,
                labels.clone(),
                selector(app, s),
                template,
                s.replicas as i32,
            );
        }
    }
    if let Some(sa) = &s.service_account {
        service_account(w, ns, sa, &app.common_labels);
    }
    for v in &s.volumes {
        let k = key(ns, &v.claim);
        if w.pvcs.contains_key(&k) {
            continue;
        }
        let mut meta = w.meta(Some(ns), &v.claim, labels.clone());
        meta.annotations
            .insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
        meta.annotations
            .insert("pv.kubernetes.io/bound-by-controller".into(), "yes".into());
        meta.annotations.insert(
            "volume.kubernetes.io/storage-provisioner".into(),
            "rancher.io/local-path".into(),
        );
        let volume_name = format!("pvc-{}", super::util::uuid(&mut w.rng));
        w.pvcs.insert(
            k.clone(),
            Pvc {
                meta,
                storage: v.size.bytes() as i64,
                access_mode: v.access_mode.clone(),
                volume_name,
                storage_class: v.storage_class.clone().unwrap_or_else(|| "standard".into()),
            },
        );
        w.touch(Kind::PersistentVolumeClaim, &k);
    }
    if s.has_service() {
        service_object(w, app, s);
    }
}

/// Creates the Service object of an app service (also used to restore a deleted one).
pub fn service_object(w: &mut World, app: &AppSpec, s: &ServiceSpec) {
    let ns = app.namespace.as_str();
    let meta = w.meta(Some(ns), &s.name, pod_labels(app, s));
    let ip = w.cluster_ip();
    let k = key(ns, &s.name);
    w.services.insert(
        k.clone(),
        Service {
            meta,
            selector: selector(app, s),
            ports: s
                .ports
                .iter()
                .map(|p| ServicePort {
                    name: Some(p.name.clone()),
                    protocol: "TCP".into(),
                    port: i32::from(p.port),
                    target_port: IntOrString::Int(i32::from(p.target_port())),
                })
                .collect(),
            cluster_ip: ip,
            internal_traffic_policy: "Cluster".into(),
            spec_extra: serde_json::Map::new(),
        },
    );
    w.touch(Kind::Service, &k);
}

/// The `default` ServiceAccount the service account controller gives every namespace, unless the
/// namespace has one.
pub fn default_service_account(w: &mut World, ns: &str) {
    service_account(w, ns, "default", &Labels::new());
}

/// Creates ServiceAccount `name` in `ns` unless it exists.
fn service_account(w: &mut World, ns: &str, name: &str, labels: &Labels) {
    let k = key(ns, name);
    if w.service_accounts.contains_key(&k) {
        return;
    }
    let meta = w.meta(Some(ns), name, labels.clone());
    w.service_accounts.insert(
        k.clone(),
        ServiceAccount {
            meta,
            body: json!({}),
        },
    );
    w.touch(Kind::ServiceAccount, &k);
}
