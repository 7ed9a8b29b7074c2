//! The real `kubectl` mitigating a problem in `collector env up`: writes of every common shape
//! (strategic merge, merge and JSON patches, scale, rollout restart, set env, apply, create,
//! replace, delete), server dry runs, conflicts and invalid writes, and the cluster reacting.

use e2e::live::{GEO_PORT_FIX, Live, NS, up, write};

fn ok(l: &Live, args: &[&str]) -> String {
    l.ok(args)
}

fn fails(l: &Live, args: &[&str]) -> String {
    l.fails(args)
}

fn until(l: &Live, args: &[&str], what: &str, done: impl Fn(&str) -> bool) -> String {
    l.until(args, what, done)
}

#[test]
fn kubectl_fixes_a_wrong_target_port_and_the_endpoints_follow() {
    let l = up("hotel-geo-target-port", &[]);
    assert!(l.endpoints["ready_secs"].as_f64().unwrap() < 30.0);
    let before = ok(
        &l,
        &[
            "-n",
            NS,
            "get",
            "endpoints",
            "geo",
            "-o",
            "jsonpath={.subsets[0].ports[0].port}",
        ],
    );
    assert_ne!(before, "8083", "the fault is in place before the fix");
    // A server dry run changes nothing.
    let dry = ok(
        &l,
        &[
            "-n",
            NS,
            "patch",
            "svc",
            "geo",
            "--dry-run=server",
            "-p",
            GEO_PORT_FIX,
        ],
    );
    assert!(dry.contains("service/geo patched"), "{dry}");
    let still = l.geo_target_port();
    assert_ne!(still, "8083", "dry run must not write");
    let out = ok(&l, &["-n", NS, "patch", "svc", "geo", "-p", GEO_PORT_FIX]);
    assert_eq!(out.trim(), "service/geo patched");
    // The same patch again changes nothing, and kubectl can tell.
    let again = ok(&l, &["-n", NS, "patch", "svc", "geo", "-p", GEO_PORT_FIX]);
    assert_eq!(again.trim(), "service/geo patched (no change)");
    until(
        &l,
        &[
            "-n",
            NS,
            "get",
            "endpoints",
            "geo",
            "-o",
            "jsonpath={.subsets[0].ports[0].port}",
        ],
        "endpoints follow the fixed targetPort",
        |o| o == "8083",
    );
}

#[test]
fn kubectl_writes_of_every_shape_change_the_live_cluster() {
    // Without noise: a noise pod kill would replace the geo pod between kubectl listing it and
    // the test deleting it by name.
    let l = up("hotel-profile-oom", &["--no-noise"]);
    // auth can-i: a SelfSubjectAccessReview sent as protobuf; the operator may do anything.
    assert_eq!(
        ok(&l, &["-n", NS, "auth", "can-i", "delete", "pods"]).trim(),
        "yes"
    );
    // autoscale: a protobuf HorizontalPodAutoscaler, stored and served back.
    let hpa = [
        "-n",
        NS,
        "autoscale",
        "deploy/geo",
        "--min=1",
        "--max=3",
        "--cpu-percent=80",
    ];
    assert!(ok(&l, &hpa).contains("autoscaled"));
    let max = [
        "-n",
        NS,
        "get",
        "hpa",
        "geo",
        "-o",
        "jsonpath={.spec.maxReplicas}",
    ];
    assert_eq!(ok(&l, &max), "3");
    // scale: merge patch on the scale subresource; the ReplicaSet makes the pods.
    assert!(ok(&l, &["-n", NS, "scale", "deploy/geo", "--replicas=3"]).contains("scaled"));
    until(
        &l,
        &[
            "-n",
            NS,
            "get",
            "deploy",
            "geo",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        "three geo pods ready",
        |o| o == "3",
    );
    // set env: strategic merge with $setElementOrder; a new ReplicaSet rolls out.
    assert!(ok(&l, &["-n", NS, "set", "env", "deploy/search", "FOO=bar"]).contains("env updated"));
    let env = ok(
        &l,
        &[
            "-n",
            NS,
            "get",
            "deploy",
            "search",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].env[?(@.name==\"FOO\")].value}",
        ],
    );
    assert_eq!(env, "bar");
    until(
        &l,
        &["-n", NS, "get", "rs", "-o", "name"],
        "a second search ReplicaSet",
        |o| o.lines().filter(|n| n.contains("/search-")).count() == 2,
    );
    // rollout restart: the restartedAt annotation; rollout status follows to the end.
    assert!(ok(&l, &["-n", NS, "rollout", "restart", "deploy/frontend"]).contains("restarted"));
    let status = ok(
        &l,
        &[
            "-n",
            NS,
            "rollout",
            "status",
            "deploy/frontend",
            "--timeout=60s",
        ],
    );
    assert!(status.contains("successfully rolled out"), "{status}");
    // set resources: the OOM-killed service gets room.
    assert!(
        ok(
            &l,
            &[
                "-n",
                NS,
                "set",
                "resources",
                "deploy/profile",
                "--limits=memory=1Gi"
            ]
        )
        .contains("resource requirements updated")
    );
    let limit = ok(
        &l,
        &[
            "-n",
            NS,
            "get",
            "deploy",
            "profile",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].resources.limits.memory}",
        ],
    );
    assert_eq!(limit, "1Gi");
    // label / annotate: merge patches on metadata.
    assert!(ok(&l, &["-n", NS, "label", "deploy/geo", "team=sre"]).contains("labeled"));
    assert!(ok(&l, &["-n", NS, "annotate", "deploy/geo", "note=checked"]).contains("annotated"));
    // JSON patch.
    ok(
        &l,
        &[
            "-n",
            NS,
            "patch",
            "deploy",
            "geo",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/replicas","value":2}]"#,
        ],
    );
    assert_eq!(
        ok(
            &l,
            &[
                "-n",
                NS,
                "get",
                "deploy",
                "geo",
                "-o",
                "jsonpath={.spec.replicas}"
            ]
        ),
        "2"
    );
    // apply (needs /openapi/v3), then apply again unchanged, then replace with a stale version.
    let dir = l.tmp.path();
    let cm = write(
        dir,
        "cm.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: {NS}\ndata:\n  a: \"1\"\n"
        ),
    );
    assert!(ok(&l, &["apply", "-f", &cm]).contains("configmap/extra created"));
    assert!(ok(&l, &["apply", "-f", &cm]).contains("configmap/extra unchanged"));
    let server_side = ok(&l, &["apply", "--server-side", "-f", &cm]);
    assert!(server_side.contains("serverside-applied"), "{server_side}");
    let stale = write(
        dir,
        "stale.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: {NS}\n  resourceVersion: \"1\"\ndata:\n  a: \"2\"\n"
        ),
    );
    let err = fails(&l, &["replace", "-f", &stale]);
    assert!(
        err.contains("Error from server (Conflict)")
            && err.contains("the object has been modified"),
        "{err}"
    );
    // create -f of an existing object: AlreadyExists.
    let err = fails(&l, &["create", "-f", &cm]);
    assert!(err.contains("AlreadyExists"), "{err}");
    // create configmap: kubectl sends protobuf.
    assert!(
        ok(
            &l,
            &[
                "-n",
                NS,
                "create",
                "configmap",
                "proto",
                "--from-literal=k=v"
            ]
        )
        .contains("configmap/proto created")
    );
    assert_eq!(
        ok(
            &l,
            &["-n", NS, "get", "cm", "proto", "-o", "jsonpath={.data.k}"]
        ),
        "v"
    );
    // Invalid: negative replicas, with the apiserver's wording.
    let err = fails(
        &l,
        &[
            "-n",
            NS,
            "patch",
            "deploy",
            "geo",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":-1}}"#,
        ],
    );
    assert!(
        err.contains("is invalid") && err.contains("spec.replicas"),
        "{err}"
    );
    // delete a pod: its ReplicaSet replaces it.
    let pods = ok(
        &l,
        &[
            "-n",
            NS,
            "get",
            "pods",
            "-l",
            "io.kompose.service=geo",
            "-o",
            "name",
        ],
    );
    let victim = pods.lines().next().expect("a geo pod").to_string();
    assert!(ok(&l, &["-n", NS, "delete", &victim, "--wait=false"]).contains("deleted"));
    until(
        &l,
        &[
            "-n",
            NS,
            "get",
            "pods",
            "-l",
            "io.kompose.service=geo",
            "-o",
            "name",
        ],
        "a replacement pod",
        |o| !o.lines().any(|p| p == victim) && o.lines().count() >= 2,
    );
    // delete of what does not exist.
    let err = fails(&l, &["-n", NS, "delete", "cm", "nope"]);
    assert!(err.contains("NotFound"), "{err}");
}

/// The API is served over TLS as a real apiserver is: the kubeconfig names the HTTPS port and the
/// environment's own certificate authority, kubectl verifies the server against it (and refuses
/// the server under any other authority), and plain HTTP stays served on its own port.
#[test]
fn kubectl_verifies_the_api_over_tls_with_the_kubeconfigs_authority() {
    let l = up("hotel-geo-target-port", &[]);
    let config = std::fs::read_to_string(&l.kubeconfig).expect("the kubeconfig");
    let https = l.endpoints["kubernetes_https"]["url"]
        .as_str()
        .expect("the TLS endpoint in the ready line")
        .to_string();
    assert!(https.starts_with("https://127.0.0.1:"), "{https}");
    assert!(config.contains(&format!("server: {https}")), "{config}");
    assert!(config.contains("certificate-authority-data: "), "{config}");
    assert!(ok(&l, &["get", "namespace", NS, "-o", "name"]).contains(NS));
    // Another authority (the system's public roots) does not vouch for this server.
    let other = l.fails(&[
        "--certificate-authority",
        "/etc/ssl/certs/ca-certificates.crt",
        "get",
        "namespaces",
    ]);
    assert!(
        other.contains("x509") || other.contains("certificate"),
        "{other}"
    );
    let plain = e2e::http_get(format!("{}/api/v1/namespaces/{NS}", l.url()));
    assert!(plain.status().is_success(), "{}", plain.status());
}
