//! Request bodies recorded from real kubectl 1.32 and 1.33 (`fixtures/protobuf/capture.py`; the
//! command behind each file is in `commands.<minor>.txt`), decoded to API JSON.

use std::path::{Path, PathBuf};

use apiserver::protobuf;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protobuf")
}

/// Every recorded body: (file stem such as `deployment.32`, bytes).
fn recorded() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures())
        .expect("fixtures directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .map(|p| {
            let stem = p.file_stem().expect("stem").to_string_lossy().into_owned();
            (stem, std::fs::read(&p).expect("fixture bytes"))
        })
        .collect();
    out.sort();
    out
}

fn decoded(name: &str, minor: u32) -> Value {
    let bytes = std::fs::read(fixtures().join(format!("{name}.{minor}.bin"))).expect("fixture");
    protobuf::decode(&bytes).unwrap_or_else(|e| panic!("{name}.{minor}: {e}"))
}

/// kubectl 1.32/1.33 print `creationTimestamp: null` for an unset time; the current API types
/// (and so the decoder's table) mark the field omitzero and leave it out.
fn without_null_creation_timestamps(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.get("creationTimestamp") == Some(&Value::Null) {
                map.remove("creationTimestamp");
            }
            map.values_mut().for_each(without_null_creation_timestamps);
        }
        Value::Array(items) => items.iter_mut().for_each(without_null_creation_timestamps),
        _ => {}
    }
}

#[test]
fn every_recorded_body_decodes_to_the_json_kubectl_prints_for_it() {
    let mut compared = 0;
    for (stem, bytes) in recorded() {
        let got = protobuf::decode(&bytes).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let json_path = fixtures().join(format!("{stem}.json"));
        let Ok(text) = std::fs::read(&json_path) else {
            continue;
        };
        let mut want: Value = serde_json::from_slice(&text).expect("kubectl JSON");
        without_null_creation_timestamps(&mut want);
        assert_eq!(got, want, "{stem}");
        compared += 1;
    }
    assert!(
        compared >= 36,
        "only {compared} bodies had kubectl's JSON beside them"
    );
}

#[test]
fn configmap_and_secret_keep_their_data() {
    for minor in [32, 33] {
        let cm = decoded("configmap", minor);
        assert_eq!(cm["kind"], "ConfigMap");
        assert_eq!(cm["apiVersion"], "v1");
        assert_eq!(cm["metadata"], json!({"name": "c"}));
        assert_eq!(
            cm["data"],
            json!({"a": "1", "empty": "", "app.properties": "mode=fast\nlevel=2\n"})
        );
        let secret = decoded("secret-generic", minor);
        // bytes values travel as base64 in JSON: "x" and 00 01 02 fe ff.
        assert_eq!(secret["data"], json!({"p": "eA==", "blob": "AAEC/v8="}));
        assert!(secret.get("type").is_none(), "empty type is omitted");
        let reg = decoded("secret-docker-registry", minor);
        assert_eq!(reg["type"], "kubernetes.io/dockerconfigjson");
        assert!(reg["data"][".dockerconfigjson"].as_str().is_some());
    }
}

#[test]
fn deployments_carry_the_whole_pod_template() {
    for minor in [32, 33] {
        let d = decoded("deployment", minor);
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(
            d["spec"]["selector"],
            json!({"matchLabels": {"app": "web"}})
        );
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            *container,
            json!({"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}], "resources": {}})
        );
        // Non-pointer structs are always in Go's JSON, even empty.
        assert_eq!(d["spec"]["strategy"], json!({}));
        assert_eq!(d["status"], json!({}));
        // A pointer set to zero is sent and kept: replicas 0 is not "unset" (which would mean 1).
        let idle = decoded("deployment-zero", minor);
        assert_eq!(idle["spec"]["replicas"], 0);
        assert_eq!(
            idle["spec"]["template"]["spec"]["containers"][0]["command"],
            json!(["sleep", "3600"])
        );
    }
}

#[test]
fn services_pdbs_and_ingresses_keep_int_or_string() {
    for minor in [32, 33] {
        let s = decoded("service-clusterip", minor);
        assert_eq!(
            s["spec"]["ports"],
            json!([{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}])
        );
        assert_eq!(s["spec"]["type"], "ClusterIP");
        assert_eq!(
            decoded("service-nodeport", minor)["spec"]["ports"][0]["nodePort"],
            30080
        );
        assert_eq!(
            decoded("pdb-min-available", minor)["spec"]["minAvailable"],
            1
        );
        assert_eq!(
            decoded("pdb-max-unavailable", minor)["spec"]["maxUnavailable"],
            "50%"
        );
        let ing = decoded("ingress", minor);
        let path = &ing["spec"]["rules"][0]["http"]["paths"][0];
        assert_eq!(ing["spec"]["rules"][0]["host"], "foo.example");
        assert_eq!(
            path["backend"]["service"],
            json!({"name": "svc1", "port": {"number": 8080}})
        );
    }
}

#[test]
fn batch_rbac_and_cluster_kinds() {
    for minor in [32, 33] {
        let job = decoded("job", minor);
        assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
        let cj = decoded("cronjob", minor);
        assert_eq!(cj["spec"]["schedule"], "*/5 * * * *");
        assert_eq!(cj["spec"]["jobTemplate"]["metadata"]["name"], "cj");
        let role = decoded("role", minor);
        assert_eq!(
            role["rules"],
            json!([
                {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]},
                {"verbs": ["get", "list"], "apiGroups": ["apps"], "resources": ["deployments"]}
            ])
        );
        let rb = decoded("rolebinding", minor);
        assert_eq!(rb["roleRef"]["kind"], "Role");
        assert_eq!(
            rb["subjects"][1],
            json!({"kind": "ServiceAccount", "name": "bot", "namespace": "default"})
        );
        assert_eq!(
            decoded("clusterrole", minor)["rules"][0]["nonResourceURLs"],
            json!(["/healthz"])
        );
        assert_eq!(
            decoded("quota", minor)["spec"]["hard"],
            json!({"cpu": "2", "memory": "4Gi", "pods": "10"})
        );
        let pc = decoded("priorityclass", minor);
        assert_eq!(
            (pc["value"].clone(), pc["preemptionPolicy"].clone()),
            (json!(1000), json!("Never"))
        );
        assert_eq!(decoded("namespace", minor)["metadata"]["name"], "team");
        assert_eq!(decoded("serviceaccount", minor)["kind"], "ServiceAccount");
    }
}

#[test]
fn autoscale_sends_v1_from_kubectl_132_and_v2_from_133() {
    let v1 = decoded("autoscale", 32);
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 80);
    assert_eq!(v1["spec"]["scaleTargetRef"]["kind"], "Deployment");
    let v2 = decoded("autoscale", 33);
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        (
            v2["spec"]["minReplicas"].clone(),
            v2["spec"]["maxReplicas"].clone()
        ),
        (json!(2), json!(5))
    );
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
}

#[test]
fn access_reviews_and_token_requests() {
    for minor in [32, 33] {
        let review = decoded("can-i", minor);
        assert_eq!(review["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(
            review["spec"]["resourceAttributes"],
            json!({"namespace": "default", "verb": "create", "resource": "pods"})
        );
        let exec = decoded("can-i-exec", minor);
        assert_eq!(exec["spec"]["resourceAttributes"]["subresource"], "exec");
        assert_eq!(exec["spec"]["resourceAttributes"]["namespace"], "demo");
        let rules = decoded("can-i-list", minor);
        assert_eq!(rules["kind"], "SelfSubjectRulesReview");
        assert_eq!(rules["spec"], json!({"namespace": "default"}));
        let token = decoded("token", minor);
        assert_eq!(token["kind"], "TokenRequest");
        assert_eq!(token["spec"]["expirationSeconds"], 600);
    }
}

// --- bodies built here, for kinds and types kubectl's generators do not send ---

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn num(number: u32, v: u64) -> Vec<u8> {
    [varint(u64::from(number) << 3), varint(v)].concat()
}

fn bytes(number: u32, b: &[u8]) -> Vec<u8> {
    [
        varint((u64::from(number) << 3) | 2),
        varint(b.len() as u64),
        b.to_vec(),
    ]
    .concat()
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [bytes(1, api_version.as_bytes()), bytes(2, kind.as_bytes())].concat();
    [
        b"k8s\0".to_vec(),
        bytes(1, &type_meta),
        bytes(2, raw),
        bytes(3, b""),
        bytes(4, b""),
    ]
    .concat()
}

#[test]
fn eviction_with_delete_options_and_dry_run() {
    let meta = [bytes(1, b"web-0"), bytes(3, b"demo")].concat();
    let options = [num(1, 0), bytes(4, b"Background"), bytes(5, b"All")].concat();
    let body = envelope(
        "policy/v1",
        "Eviction",
        &[bytes(1, &meta), bytes(2, &options)].concat(),
    );
    assert_eq!(
        protobuf::decode(&body).unwrap(),
        json!({
            "kind": "Eviction", "apiVersion": "policy/v1",
            "metadata": {"name": "web-0", "namespace": "demo"},
            "deleteOptions": {"gracePeriodSeconds": 0, "propagationPolicy": "Background", "dryRun": ["All"]}
        })
    );
    // DeleteOptions is registered in every group version; it decodes as meta/v1's.
    for api_version in ["v1", "apps/v1", "meta.k8s.io/v1"] {
        let body = envelope(
            api_version,
            "DeleteOptions",
            &[num(3, 1), bytes(5, b"All")].concat(),
        );
        let v = protobuf::decode(&body).unwrap();
        assert_eq!(v["orphanDependents"], true, "{api_version}");
        assert_eq!(v["dryRun"], json!(["All"]));
    }
}

#[test]
fn times_raw_extensions_and_managed_fields() {
    let created = [num(1, 1_700_000_000), num(2, 123)].concat();
    let managed = [
        bytes(1, b"kubectl"),
        bytes(4, &num(1, 1_700_000_000)),
        bytes(7, &bytes(1, br#"{"f:data":{".":{}}}"#)),
    ]
    .concat();
    let meta = [bytes(1, b"rev"), bytes(8, &created), bytes(17, &managed)].concat();
    let inner = envelope(
        "v1",
        "ConfigMap",
        &[
            bytes(1, &bytes(1, b"c")),
            bytes(2, &[bytes(1, b"k"), bytes(2, b"v")].concat()),
        ]
        .concat(),
    );
    let body = envelope(
        "apps/v1",
        "ControllerRevision",
        &[
            bytes(1, &meta),
            bytes(2, &bytes(1, br#"{"spec":{"x":1}}"#)),
            num(3, 4),
        ]
        .concat(),
    );
    let v = protobuf::decode(&body).unwrap();
    // metav1.Time has whole seconds: the apiserver drops nanos when it decodes one.
    assert_eq!(v["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
    assert_eq!(
        v["metadata"]["managedFields"][0]["time"],
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(
        v["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {".": {}}})
    );
    assert_eq!(v["data"], json!({"spec": {"x": 1}}));
    assert_eq!(v["revision"], 4);
    // A RawExtension may hold a protobuf object of its own.
    let nested = envelope(
        "apps/v1",
        "ControllerRevision",
        &bytes(2, &bytes(1, &inner)),
    );
    let v = protobuf::decode(&nested).unwrap();
    assert_eq!(v["data"]["kind"], "ConfigMap");
    assert_eq!(v["data"]["data"], json!({"k": "v"}));
    // MicroTime keeps microseconds.
    let event = envelope(
        "events.k8s.io/v1",
        "Event",
        &[
            bytes(1, &bytes(1, b"e")),
            bytes(2, &[num(1, 1_700_000_000), num(2, 123_456_789)].concat()),
        ]
        .concat(),
    );
    assert_eq!(
        protobuf::decode(&event).unwrap()["eventTime"],
        "2023-11-14T22:13:20.123456Z"
    );
}

// --- malformed bodies: 400 (or 415 for what is well-formed but unknown), never a panic ---

fn status_of(body: &[u8]) -> (u16, String) {
    match protobuf::decode(body) {
        Ok(v) => panic!("decoded {v}"),
        Err(e) => (e.code, e.message),
    }
}

#[test]
fn malformed_envelopes_are_400_naming_the_problem() {
    let good = std::fs::read(fixtures().join("configmap.32.bin")).unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"k8s".to_vec(), "magic bytes"),
        (b"{\"kind\":\"ConfigMap\"}".to_vec(), "magic bytes"),
        (good[..good.len() / 2].to_vec(), "needs"),
        (
            [
                b"k8s\0".as_slice(),
                &[
                    0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
                ],
            ]
            .concat(),
            "overflows 64 bits",
        ),
        (
            [b"k8s\0".as_slice(), &[0x0a, 0x80]].concat(),
            "truncated varint",
        ),
        (
            [b"k8s\0".as_slice(), &num(1, 5)].concat(),
            "typeMeta must be length-delimited",
        ),
        (envelope("v1", "", b""), "no kind"),
    ];
    for (body, want) in cases {
        let (code, message) = status_of(&body);
        assert_eq!(code, 400, "{message}");
        assert!(message.contains(want), "want {want:?} in {message:?}");
    }
}

#[test]
fn malformed_objects_are_400_naming_the_field() {
    // spec.replicas sent as a string.
    let spec = bytes(1, b"two");
    let body = envelope("apps/v1", "Deployment", &bytes(2, &spec));
    let (code, message) = status_of(&body);
    assert_eq!(code, 400);
    assert!(
        message.contains("Deployment apps/v1: spec.replicas"),
        "{message}"
    );
    assert!(
        message.contains("int32 field cannot be a length-delimited value"),
        "{message}"
    );
    // A nested length running past its parent.
    let body = envelope("v1", "ConfigMap", &[0x0a, 0x03, 0x0a, 0x09, b'a']);
    let (code, message) = status_of(&body);
    assert_eq!(code, 400);
    assert!(
        message.contains("metadata: field 1 at byte 0 needs 9 bytes but only 1 remain"),
        "{message}"
    );
    // IntOrString with an impossible type.
    let port = [num(1, 7)].concat();
    let body = envelope(
        "policy/v1",
        "PodDisruptionBudget",
        &bytes(2, &bytes(1, &port)),
    );
    let (code, message) = status_of(&body);
    assert_eq!(
        (
            code,
            message.contains("spec.minAvailable: IntOrString type 7")
        ),
        (400, true),
        "{message}"
    );
    // Nesting past any real object, through RawExtensions.
    let mut body = envelope("apps/v1", "ControllerRevision", b"");
    for _ in 0..80 {
        body = envelope("apps/v1", "ControllerRevision", &bytes(2, &bytes(1, &body)));
    }
    let (code, message) = status_of(&body);
    assert_eq!(code, 400);
    assert!(message.contains("nested deeper than"), "{message}");
}

#[test]
fn unknown_kinds_are_415_naming_the_kind() {
    for (api_version, kind) in [
        ("example.com/v1", "Widget"),
        ("apps/v1", "Gadget"),
        ("v1", "Deployment"),
    ] {
        let (code, message) = status_of(&envelope(api_version, kind, b""));
        assert_eq!(code, 415, "{message}");
        assert!(
            message.contains(&format!("kind \"{kind}\" of apiVersion \"{api_version}\"")),
            "{message}"
        );
    }
}

/// A deterministic byte stream (xorshift) so a failure replays exactly.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn no_prefix_or_byte_flip_of_any_recorded_body_panics() {
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut outcomes = [0usize; 3];
    for (stem, body) in recorded() {
        let mut tally = |result: Result<Value, apiserver::status::Failure>, what: &str| match result
        {
            Ok(_) => outcomes[0] += 1,
            Err(e) if e.code == 400 => outcomes[1] += 1,
            Err(e) if e.code == 415 => outcomes[2] += 1,
            Err(e) => panic!("{stem} {what}: unexpected {e}"),
        };
        for cut in 0..body.len() {
            tally(protobuf::decode(&body[..cut]), &format!("prefix {cut}"));
        }
        for round in 0..300 {
            let mut flipped = body.clone();
            for _ in 0..1 + round % 3 {
                let at = (rng.next() % flipped.len() as u64) as usize;
                flipped[at] ^= 1 << (rng.next() % 8);
            }
            tally(protobuf::decode(&flipped), &format!("flip round {round}"));
        }
    }
    // The loop reached all three outcomes: the flips are not all caught at the magic bytes.
    assert!(outcomes.iter().all(|n| *n > 0), "{outcomes:?}");
}

#[test]
fn repeated_numbers_read_packed_or_not() {
    // PodSecurityContext.supplementalGroups (4, repeated int64): Go writes one field per value;
    // other encoders pack them into one length-delimited run. Both mean [1, 2, 300].
    let unpacked = [num(4, 1), num(4, 2), num(4, 300)].concat();
    let packed = bytes(4, &[varint(1), varint(2), varint(300)].concat());
    for security in [unpacked, packed] {
        let pod_spec = bytes(14, &security);
        let body = envelope("v1", "Pod", &bytes(2, &pod_spec));
        let v = protobuf::decode(&body).unwrap();
        assert_eq!(
            v["spec"]["securityContext"]["supplementalGroups"],
            json!([1, 2, 300])
        );
    }
}
