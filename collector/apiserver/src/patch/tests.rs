//! Patch tests: the exact bodies kubectl sends (LIVE.md §1.3), each directive, server-side apply
//! and update ownership, and malformed input of every kind.

use serde_json::{Value, json};

use super::*;

const T0: &str = "2026-11-24T22:00:00Z";
const T1: &str = "2026-11-24T22:05:00Z";

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "web",
                    "image": "nginx:1.25",
                    "env": [{"name": "A", "value": "1"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}]
                }]}
            }
        }
    })
}

fn smp(current: &Value, body: &str, kind: &str) -> Result<Value, Failure> {
    patch(current, body.as_bytes(), PatchType::Strategic, kind)
}

fn containers(d: &Value) -> &Value {
    &d["spec"]["template"]["spec"]["containers"]
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|a| a.iter().filter_map(|i| i["name"].as_str()).collect())
        .unwrap_or_default()
}

#[test]
fn content_types_pick_the_patch_type() {
    assert_eq!(
        PatchType::from_content_type("application/strategic-merge-patch+json"),
        Some(PatchType::Strategic)
    );
    assert_eq!(
        PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
        Some(PatchType::Merge)
    );
    assert_eq!(
        PatchType::from_content_type("application/json-patch+json"),
        Some(PatchType::Json)
    );
    assert_eq!(
        PatchType::from_content_type("application/apply-patch+yaml"),
        Some(PatchType::Apply)
    );
    assert_eq!(PatchType::from_content_type("application/json"), None);
    assert_eq!(PatchType::from_content_type(""), None);
    for ty in [
        PatchType::Json,
        PatchType::Merge,
        PatchType::Strategic,
        PatchType::Apply,
    ] {
        assert_eq!(PatchType::from_content_type(ty.content_type()), Some(ty));
    }
}

// ---- strategic merge patch: kubectl's bodies -------------------------------------------------

#[test]
fn set_env_adds_in_set_element_order() {
    let body = r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[{"$setElementOrder/env":[{"name":"A"},{"name":"B"}],"env":[{"name":"B","value":"2"}],"name":"web"}]}}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    assert_eq!(
        containers(&out)[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    // The rest of the container is untouched and no directive leaks into the object.
    assert_eq!(containers(&out)[0]["image"], "nginx:1.25");
    assert!(!out.to_string().contains('$'));
}

#[test]
fn set_env_removal_deletes_by_merge_key() {
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]);
    let body = r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[{"$setElementOrder/env":[{"name":"B"}],"env":[{"$patch":"delete","name":"A"}],"name":"web"}]}}}}"#;
    let out = smp(&d, body, "Deployment").unwrap();
    assert_eq!(
        containers(&out)[0]["env"],
        json!([{"name": "B", "value": "2"}])
    );
}

#[test]
fn set_image_and_resources_merge_into_the_named_container() {
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"] = json!([
        {"name": "web", "image": "nginx:1.25"},
        {"name": "side", "image": "envoy:1"}
    ]);
    let body = r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"},{"name":"side"}],"containers":[{"image":"nginx:1.27","name":"web"}]}}}}"#;
    let out = smp(&d, body, "Deployment").unwrap();
    assert_eq!(containers(&out)[0]["image"], "nginx:1.27");
    assert_eq!(
        containers(&out)[1],
        json!({"name": "side", "image": "envoy:1"})
    );

    let body = r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","resources":{"limits":{"cpu":"1","memory":"512Mi"},"requests":{"cpu":"100m"}}}]}}}}"#;
    let out = smp(&out, body, "Deployment").unwrap();
    assert_eq!(names(containers(&out)), ["web", "side"]);
    assert_eq!(
        containers(&out)[1]["resources"]["limits"]["memory"],
        "512Mi"
    );
    assert_eq!(containers(&out)[1]["image"], "envoy:1");
}

#[test]
fn rollout_restart_pause_and_resume() {
    let body = r#"{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-24T22:29:15Z"}}}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    assert_eq!(
        out["spec"]["template"]["metadata"],
        json!({"labels": {"app": "web"}, "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-24T22:29:15Z"}})
    );
    let paused = smp(&out, r#"{"spec":{"paused":true}}"#, "Deployment").unwrap();
    assert_eq!(paused["spec"]["paused"], true);
    let resumed = smp(&paused, r#"{"spec":{"paused":null}}"#, "Deployment").unwrap();
    assert_eq!(resumed["spec"].get("paused"), None);
    assert_eq!(resumed, out);
}

#[test]
fn cordon_and_taints_on_a_node() {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "a", "value": "1", "effect": "NoSchedule"}]}});
    let cordoned = smp(&node, r#"{"spec":{"unschedulable":true}}"#, "Node").unwrap();
    assert_eq!(cordoned["spec"]["unschedulable"], true);
    let uncordoned = smp(&cordoned, r#"{"spec":{"unschedulable":null}}"#, "Node").unwrap();
    assert_eq!(uncordoned, node);
    // Taints have no merge strategy: kubectl sends the whole new list, which replaces the old.
    let body = r#"{"spec":{"taints":[{"effect":"NoExecute","key":"b","value":"2"}]}}"#;
    let tainted = smp(&node, body, "Node").unwrap();
    assert_eq!(
        tainted["spec"]["taints"],
        json!([{"effect": "NoExecute", "key": "b", "value": "2"}])
    );
    let untainted = smp(&tainted, r#"{"spec":{"taints":null}}"#, "Node").unwrap();
    assert_eq!(untainted["spec"], json!({"podCIDR": "10.0.0.0/24"}));
}

#[test]
fn edit_two_way_patch_with_element_order() {
    let body = r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[{"image":"nginx:1.26","name":"web"}]}}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    let mut want = deployment();
    want["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    assert_eq!(out, want);
}

#[test]
fn client_side_apply_three_way_patch_on_a_configmap() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-cfg", "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{\"a\":\"1\"}}\n"}}, "data": {"a": "1", "b": "x"}});
    let body = r#"{"data":{"a":"2"},"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"a\":\"2\"}}\n"}}}"#;
    let out = smp(&cm, body, "ConfigMap").unwrap();
    assert_eq!(out["data"], json!({"a": "2", "b": "x"}));
    assert_eq!(
        out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"2\"}}\n"
    );
}

// ---- strategic merge patch: list semantics and directives -----------------------------------

#[test]
fn new_list_items_go_first_unless_ordered() {
    let body =
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"envoy:1"}]}}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    assert_eq!(names(containers(&out)), ["side", "web"]);
    let body = r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"},{"name":"side"}],"containers":[{"name":"side","image":"envoy:1"}]}}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    assert_eq!(names(containers(&out)), ["web", "side"]);
    // A merged item keeps its place among the server's items.
    let mut d = deployment();
    d["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]);
    let out = smp(
        &d,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"x"}]}}}}"#,
        "Deployment",
    )
    .unwrap();
    assert_eq!(names(containers(&out)), ["a", "b", "c"]);
    assert_eq!(containers(&out)[1]["image"], "x");
}

#[test]
fn ports_merge_by_container_port_or_service_port() {
    let body = r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","ports":[{"containerPort":80,"name":"http"},{"containerPort":9090}]}]}}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    assert_eq!(
        containers(&out)[0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 9090}])
    );
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]}});
    let out = smp(
        &svc,
        r#"{"spec":{"ports":[{"port":80,"targetPort":9000}]}}"#,
        "Service",
    )
    .unwrap();
    assert_eq!(
        out["spec"]["ports"],
        json!([{"port": 80, "targetPort": 9000}, {"port": 443, "targetPort": 8443}])
    );
    // The same body on a kind without list metadata replaces the list.
    let cm = json!({"kind": "Widget", "metadata": {"name": "w"}, "spec": {"ports": [{"port": 1}, {"port": 2}]}});
    let out = smp(&cm, r#"{"spec":{"ports":[{"port":1,"x":true}]}}"#, "Widget").unwrap();
    assert_eq!(out["spec"]["ports"], json!([{"port": 1, "x": true}]));
}

#[test]
fn atomic_lists_are_replaced_whole() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "tolerations": [{"key": "a", "operator": "Exists"}],
        "containers": [{"name": "c", "command": ["sleep", "10"], "args": ["-v"]}]}});
    let body = r#"{"spec":{"tolerations":[{"key":"b","operator":"Exists"}],"containers":[{"name":"c","command":["sh"]}]}}"#;
    let out = smp(&pod, body, "Pod").unwrap();
    assert_eq!(
        out["spec"]["tolerations"],
        json!([{"key": "b", "operator": "Exists"}])
    );
    assert_eq!(out["spec"]["containers"][0]["command"], json!(["sh"]));
    assert_eq!(out["spec"]["containers"][0]["args"], json!(["-v"]));
}

#[test]
fn conditions_owner_references_and_finalizers() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
            "finalizers": ["a", "b"],
            "ownerReferences": [{"uid": "u1", "name": "rs1"}, {"uid": "u2", "name": "rs2"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}});
    let body = r#"{"metadata":{"finalizers":["c","a"],"ownerReferences":[{"uid":"u2","controller":true}]},"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#;
    let out = smp(&pod, body, "Pod").unwrap();
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}])
    );
    assert_eq!(
        out["metadata"]["ownerReferences"],
        json!([{"uid": "u1", "name": "rs1"}, {"uid": "u2", "name": "rs2", "controller": true}])
    );
    // A set merges; the patch's order leads, server-only values keep their relative place.
    assert_eq!(out["metadata"]["finalizers"], json!(["c", "a", "b"]));
    let out = smp(
        &out,
        r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["a","zzz"]}}"#,
        "Pod",
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["c", "b"]));
}

#[test]
fn patch_replace_and_delete_directives() {
    // `$patch: replace` on a map: the map becomes the patch's.
    let body = r#"{"metadata":{"labels":{"$patch":"replace","tier":"front"}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"tier": "front"}));
    // `$patch: delete` on a map empties it.
    let out = smp(
        &deployment(),
        r#"{"metadata":{"labels":{"$patch":"delete"}}}"#,
        "Deployment",
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({}));
    // `{"$patch":"replace"}` as a list item: the list becomes the other items.
    let body = r#"{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"x"},{"$patch":"replace"}]}}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    assert_eq!(containers(&out), &json!([{"name": "only", "image": "x"}]));
    // `$patch: delete` of an item that is not there changes nothing.
    let body =
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"ghost","$patch":"delete"}]}}}}"#;
    assert_eq!(
        smp(&deployment(), body, "Deployment").unwrap(),
        deployment()
    );
}

#[test]
fn retain_keys_drops_unlisted_keys() {
    let mut d = deployment();
    d["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}});
    let body = r#"{"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}}"#;
    let out = smp(&d, body, "Deployment").unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
}

#[test]
fn nulls_and_directives_in_new_values_are_dropped() {
    let body = r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"x","env":[{"name":"A","value":null}],"$setElementOrder/env":[{"name":"A"}],"stdin":null}]}}}}"#;
    let out = smp(&deployment(), body, "Deployment").unwrap();
    assert_eq!(
        containers(&out)[0],
        json!({"name": "side", "image": "x", "env": [{"name": "A"}]})
    );
}

#[test]
fn malformed_directives_fail_with_the_apiservers_codes() {
    let d = deployment();
    let cases: &[(&str, u16, &str)] = &[
        (
            r#"{"spec":{"strategy":{"$retainKeys":"type"}}}"#,
            400,
            "invalid patch format of retainKeys",
        ),
        (
            r#"{"spec":{"strategy":{"$retainKeys":[1]}}}"#,
            400,
            "invalid patch format of retainKeys",
        ),
        (
            r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":"web"}}}}"#,
            400,
            "invalid patch format of setElementOrder list",
        ),
        (
            r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":3}}"#,
            400,
            "invalid patch format of primitive list",
        ),
        (
            r#"{"metadata":{"labels":{"$patch":"merge"}}}"#,
            500,
            "unknown patch type: merge in map",
        ),
        (
            r#"{"metadata":{"labels":{"$patch":5}}}"#,
            500,
            "unknown patch type: 5 in map",
        ),
        (
            r#"{"spec":{"template":{"spec":{"containers":[{"$patch":"delete","image":"x"}]}}}}"#,
            500,
            "does not contain declared merge key: name",
        ),
        (
            r#"{"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}}"#,
            500,
            "does not contain declared merge key: name",
        ),
        (
            r#"{"spec":{"template":{"spec":{"containers":[{"$patch":"merge"}]}}}}"#,
            500,
            "merging lists cannot yet be specified in the patch",
        ),
        (
            r#"{"spec":{"template":{"spec":{"containers":["web"]}}}}"#,
            422,
            "list items must be objects",
        ),
        (
            r#"{"metadata":{"finalizers":[{"a":1}]}}"#,
            422,
            "a list of scalars holds a structured item",
        ),
        (
            r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}],"containers":[{"name":"b"},{"name":"a"}]}}}}"#,
            500,
            "doesn't match $setElementOrder list",
        ),
    ];
    for (body, code, text) in cases {
        let err = smp(&d, body, "Deployment").expect_err(body);
        assert_eq!(err.code, *code, "{body}: {err}");
        assert!(err.message.contains(text), "{body}: {err}");
    }
}

// ---- JSON merge patch and JSON patch ---------------------------------------------------------

#[test]
fn merge_patch_as_kubectl_label_and_scale_send_it() {
    let out = patch(
        &deployment(),
        br#"{"metadata":{"labels":{"tier":"front"}}}"#,
        PatchType::Merge,
        "Deployment",
    )
    .unwrap();
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "web", "tier": "front"})
    );
    let out = patch(
        &out,
        br#"{"metadata":{"labels":{"tier":null}}}"#,
        PatchType::Merge,
        "Deployment",
    )
    .unwrap();
    assert_eq!(out, deployment());
    let out = patch(
        &out,
        br#"{"spec":{"replicas":5}}"#,
        PatchType::Merge,
        "Deployment",
    )
    .unwrap();
    assert_eq!(out["spec"]["replicas"], 5);
    // Lists are replaced whole, whatever their strategic semantics.
    let body = br#"{"spec":{"template":{"spec":{"containers":[{"name":"x"}]}}}}"#;
    let out = patch(&deployment(), body, PatchType::Merge, "Deployment").unwrap();
    assert_eq!(containers(&out), &json!([{"name": "x"}]));
}

#[test]
fn json_patch_as_rollout_undo_sends_it() {
    let mut template = deployment()["spec"]["template"].clone();
    template["spec"]["containers"][0]["image"] = json!("nginx:1.24");
    let body = json!([
        {"op": "replace", "path": "/spec/template", "value": template},
        {"op": "replace", "path": "/metadata/annotations", "value": {"deployment.kubernetes.io/revision": "3"}}
    ]);
    let mut d = deployment();
    d["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "2"});
    let out = patch(
        &d,
        body.to_string().as_bytes(),
        PatchType::Json,
        "Deployment",
    )
    .unwrap();
    assert_eq!(containers(&out)[0]["image"], "nginx:1.24");
    assert_eq!(
        out["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    let body = br#"[{"op":"test","path":"/spec/replicas","value":2},{"op":"add","path":"/metadata/labels/x","value":"y"}]"#;
    let out = patch(&deployment(), body, PatchType::Json, "Deployment").unwrap();
    assert_eq!(out["metadata"]["labels"]["x"], "y");
}

#[test]
fn json_patch_failures_are_422_and_apply_nothing() {
    let d = deployment();
    for body in [
        r#"[{"op":"replace","path":"/spec/nope/deeper","value":1}]"#,
        r#"[{"op":"remove","path":"/metadata/annotations"}]"#,
        r#"[{"op":"add","path":"/metadata/labels/x","value":"y"},{"op":"test","path":"/spec/replicas","value":3}]"#,
        r#"[{"op":"frobnicate","path":"/spec"}]"#,
        r#"[{"op":"add","value":1}]"#,
    ] {
        let err = patch(&d, body.as_bytes(), PatchType::Json, "Deployment").expect_err(body);
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"), "{body}");
        assert_eq!(
            err.message,
            "the server rejected our request due to an error in our request"
        );
    }
    // A patch turning the whole object into something else is refused after applying.
    let err = patch(
        &d,
        br#"[{"op":"replace","path":"","value":5}]"#,
        PatchType::Json,
        "Deployment",
    )
    .unwrap_err();
    assert_eq!(err.code, 422);
    assert_eq!(err.causes[0].field, "patch");
}

#[test]
fn undecodable_bodies_are_400() {
    let d = deployment();
    let cases: &[(PatchType, &[u8], &str)] = &[
        (PatchType::Json, b"not json", "error decoding patch: "),
        (
            PatchType::Json,
            br#"{"op":"add"}"#,
            "cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        ),
        (PatchType::Merge, b"{", "error decoding patch: "),
        (
            PatchType::Merge,
            b"[1,2]",
            "cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (PatchType::Merge, b"5", "cannot unmarshal number"),
        (PatchType::Merge, b"null", "Invalid JSON Patch"),
        (PatchType::Strategic, b"\xff\xfe", "error decoding patch: "),
        (
            PatchType::Strategic,
            br#"["a"]"#,
            "cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (PatchType::Strategic, b"", "error decoding patch: "),
        (
            PatchType::Apply,
            br#"{"kind":"Deployment"}"#,
            "patch::apply",
        ),
    ];
    for (ty, body, text) in cases {
        let err = patch(&d, body, *ty, "Deployment").unwrap_err();
        assert_eq!(
            (err.code, err.reason.as_str()),
            (400, "BadRequest"),
            "{ty:?} {body:?}"
        );
        assert!(err.message.contains(text), "{ty:?}: {}", err.message);
    }
    // A strategic patch of `null` decodes to an empty patch.
    assert_eq!(
        patch(&d, b"null", PatchType::Strategic, "Deployment").unwrap(),
        d
    );
}

#[test]
fn renaming_or_moving_the_object_is_refused() {
    let d = deployment();
    for (ty, body) in [
        (
            PatchType::Json,
            r#"[{"op":"replace","path":"/metadata/name","value":"other"}]"#,
        ),
        (PatchType::Merge, r#"{"metadata":{"name":"other"}}"#),
        (PatchType::Strategic, r#"{"metadata":{"name":"other"}}"#),
    ] {
        let err = patch(&d, body.as_bytes(), ty, "Deployment").unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "the name of the object (other) does not match the name on the URL (web)"
        );
    }
    let err = patch(
        &d,
        br#"{"metadata":{"name":null}}"#,
        PatchType::Merge,
        "Deployment",
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "the name of the object () does not match the name on the URL (web)"
    );
    let err = patch(
        &d,
        br#"{"metadata":{"namespace":"prod"}}"#,
        PatchType::Merge,
        "Deployment",
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "the namespace of the object (prod) does not match the namespace on the request (demo)"
    );
}

// ---- properties ------------------------------------------------------------------------------

/// A small deterministic generator (SplitMix64), so the property tests need no extra crate.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn value(&mut self, depth: u32) -> Value {
        let pick = if depth == 0 {
            self.below(4)
        } else {
            self.below(7)
        };
        match pick {
            0 => json!(self.below(1000)),
            1 => json!(format!("s{}", self.below(50))),
            2 => json!(self.below(2) == 0),
            3 => json!(self.below(100) as f64 / 8.0),
            4 | 5 => self.object(depth - 1),
            _ => {
                let n = self.below(4);
                Value::Array((0..n).map(|_| self.value(depth - 1)).collect())
            }
        }
    }

    fn object(&mut self, depth: u32) -> Value {
        const KEYS: &[&str] = &["a", "b", "spec", "metadata", "items", "name", "x-y", "ü"];
        let n = self.below(5);
        let mut m = serde_json::Map::new();
        for _ in 0..n {
            let k = KEYS[self.below(KEYS.len() as u64) as usize];
            m.insert(k.to_string(), self.value(depth));
        }
        Value::Object(m)
    }
}

#[test]
fn empty_patches_are_identity_and_full_objects_rebuild_from_nothing() {
    let mut g = Gen(7);
    for round in 0..300 {
        let mut obj = g.object(4);
        if let Some(m) = obj.as_object_mut() {
            m.insert("metadata".into(), json!({"name": format!("o{round}")}));
        }
        for kind in ["ConfigMap", "Widget", "Deployment", "Pod"] {
            assert_eq!(
                patch(&obj, b"{}", PatchType::Merge, kind).unwrap(),
                obj,
                "round {round}"
            );
            assert_eq!(
                patch(&obj, b"{}", PatchType::Strategic, kind).unwrap(),
                obj,
                "round {round}"
            );
            assert_eq!(
                patch(&obj, b"[]", PatchType::Json, kind).unwrap(),
                obj,
                "round {round}"
            );
        }
        let empty = json!({"metadata": {"name": format!("o{round}")}});
        let body = obj.to_string();
        assert_eq!(
            patch(&empty, body.as_bytes(), PatchType::Strategic, "ConfigMap").unwrap(),
            obj,
            "round {round}"
        );
    }
}

// ---- server-side apply -----------------------------------------------------------------------

fn config() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

fn entries(obj: &Value) -> &Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
}

fn entry<'a>(obj: &'a Value, manager: &str) -> Option<&'a Value> {
    entries(obj).iter().find(|e| e["manager"] == manager)
}

#[test]
fn apply_creates_with_apply_ownership() {
    let created = apply(None, &config(), "kubectl", false, T0).unwrap();
    let mut want = config();
    want["metadata"]["managedFields"] = json!([{
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": T0,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }
            }
        }
    }]);
    assert_eq!(created, want);
}

#[test]
fn reapplying_the_same_config_changes_nothing() {
    let created = apply(None, &config(), "kubectl", false, T0).unwrap();
    let again = apply(Some(&created), &config(), "kubectl", false, T1).unwrap();
    assert_eq!(again, created);
    // Status in the configuration is ignored on the main resource.
    let mut with_status = config();
    with_status["status"] = json!({"replicas": 9});
    assert_eq!(
        apply(Some(&created), &with_status, "kubectl", false, T1).unwrap(),
        created
    );
}

#[test]
fn apply_conflicts_with_an_earlier_update() {
    let created = apply(None, &config(), "kubectl", false, T0).unwrap();
    // `kubectl patch` (fieldManager kubectl-patch) sets replicas to 5.
    let mut scaled = patch(
        &created,
        br#"{"spec":{"replicas":5}}"#,
        PatchType::Strategic,
        "Deployment",
    )
    .unwrap();
    record_update(Some(&created), &mut scaled, "kubectl-patch", None, T1);
    assert_eq!(
        entry(&scaled, "kubectl-patch").unwrap()["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    // The Apply entry no longer owns what the update took.
    assert!(
        entry(&scaled, "kubectl").unwrap()["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );

    let err = apply(Some(&scaled), &config(), "kubectl", false, T1).unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-patch\" using apps/v1: .spec.replicas"
    );
    assert_eq!(
        err.causes,
        vec![Cause::new(
            "FieldManagerConflict",
            ".spec.replicas",
            "conflict with \"kubectl-patch\" using apps/v1"
        )]
    );
    assert_eq!(
        err.to_json()["details"]["causes"][0]["reason"],
        "FieldManagerConflict"
    );
    // Applying the value the other manager set is no conflict: both own it.
    let mut same = config();
    same["spec"]["replicas"] = json!(5);
    let shared = apply(Some(&scaled), &same, "kubectl", false, T1).unwrap();
    assert!(entry(&shared, "kubectl-patch").is_some());
    assert_eq!(
        entry(&shared, "kubectl").unwrap()["fieldsV1"]["f:spec"]["f:replicas"],
        json!({})
    );
}

#[test]
fn several_conflicts_are_grouped_by_manager() {
    let created = apply(None, &config(), "kubectl", false, T0).unwrap();
    let mut edited = created.clone();
    edited["spec"]["replicas"] = json!(4);
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    record_update(Some(&created), &mut edited, "kubectl-edit", None, T1);
    let mut scaled = edited.clone();
    scaled["metadata"]["labels"]["app"] = json!("api");
    record_update(Some(&edited), &mut scaled, "kubectl-label", None, T1);

    let err = apply(Some(&scaled), &config(), "sre-agent", false, T1).unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 3 conflicts: conflicts with \"kubectl-edit\" using apps/v1:\n\
         - .spec.replicas\n\
         - .spec.template.spec.containers[name=\"web\"].image\n\
         conflicts with \"kubectl-label\" using apps/v1:\n\
         - .metadata.labels.app"
    );
    assert_eq!(err.causes.len(), 3);
    assert_eq!(err.causes[2].field, ".metadata.labels.app");
}

#[test]
fn forced_apply_takes_ownership() {
    let created = apply(None, &config(), "kubectl", false, T0).unwrap();
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(5);
    record_update(Some(&created), &mut scaled, "kubectl", Some("scale"), T1);
    let err = apply(Some(&scaled), &config(), "kubectl", false, T1).unwrap_err();
    assert_eq!(
        err.causes[0].message,
        "conflict with \"kubectl\" with subresource \"scale\" using apps/v1"
    );

    let mut cfg = config();
    cfg["spec"]["replicas"] = json!(3);
    let forced = apply(Some(&scaled), &cfg, "sre-agent", true, T1).unwrap();
    assert_eq!(forced["spec"]["replicas"], 3);
    // The scale entry owned nothing else, so it is gone; kubectl's Apply entry keeps the rest.
    assert!(
        entries(&forced)
            .iter()
            .all(|e| e.get("subresource").is_none())
    );
    assert_eq!(
        entry(&forced, "sre-agent").unwrap()["fieldsV1"]["f:spec"]["f:replicas"],
        json!({})
    );
    assert!(
        entry(&forced, "kubectl").unwrap()["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );
}

#[test]
fn fields_dropped_from_the_config_are_removed_unless_shared() {
    let mut cfg = config();
    cfg["metadata"]["labels"]["tier"] = json!("front");
    cfg["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "image": "envoy:1"}));
    let created = apply(None, &cfg, "kubectl", false, T0).unwrap();
    let again = apply(Some(&created), &config(), "kubectl", false, T1).unwrap();
    assert_eq!(again["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(names(containers(&again)), ["web"]);
    assert_eq!(entry(&again, "kubectl").unwrap()["time"], T1);

    // When another manager also applied the label, dropping it from one config keeps it.
    let both = apply(
        Some(&created),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"tier": "front"}}}),
        "other",
        false,
        T1,
    )
    .unwrap();
    let kept = apply(Some(&both), &config(), "kubectl", false, T1).unwrap();
    assert_eq!(kept["metadata"]["labels"]["tier"], "front");
    assert_eq!(names(containers(&kept)), ["web"]);
}

#[test]
fn apply_rejects_bad_requests() {
    let err = apply(None, &config(), "", false, T0).unwrap_err();
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    for bad in [
        json!([1]),
        json!("Deployment"),
        json!({"kind": "Deployment", "metadata": {"name": "web"}}),
        json!({"apiVersion": "apps/v1", "kind": "", "metadata": {"name": "web"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "managedFields": [{"manager": "x"}]}}),
    ] {
        let err = apply(None, &bad, "kubectl", false, T0).unwrap_err();
        assert_eq!(err.code, 400, "{bad}");
    }
    let err = apply(
        None,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": 5}),
        "k",
        false,
        T0,
    )
    .unwrap_err();
    assert_eq!(err.code, 422);
    let live = apply(None, &config(), "kubectl", false, T0).unwrap();
    let mut renamed = config();
    renamed["metadata"]["name"] = json!("other");
    assert_eq!(
        apply(Some(&live), &renamed, "kubectl", false, T0)
            .unwrap_err()
            .code,
        400
    );
}

// ---- update ownership ------------------------------------------------------------------------

#[test]
fn create_records_what_the_apiserver_shows() {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "generateName": "web-", "labels": {"app": "web"},
            "ownerReferences": [{"uid": "u1", "name": "rs", "controller": true}]},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}], "restartPolicy": "Always"},
        "status": {"phase": "Pending"}});
    record_update(None, &mut pod, "kube-controller-manager", None, T0);
    assert_eq!(
        pod["metadata"]["managedFields"],
        json!([{
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {".": {}, "f:app": {}},
                    "f:ownerReferences": {".": {}, "k:{\"uid\":\"u1\"}": {}}
                },
                "f:spec": {
                    "f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}},
                    "f:restartPolicy": {}
                }
            }
        }])
    );
    // A status write owns status only, under its subresource.
    let before = pod.clone();
    pod["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False"}]);
    record_update(
        Some(&before),
        &mut pod,
        "kube-scheduler",
        Some("status"),
        T1,
    );
    let sched = entry(&pod, "kube-scheduler").unwrap();
    assert_eq!(sched["subresource"], "status");
    assert_eq!(
        sched["fieldsV1"],
        json!({"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"PodScheduled\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
    );
}

#[test]
fn updates_move_ownership_and_drop_empty_entries() {
    let mut d = config();
    record_update(None, &mut d, "kubectl-create", None, T0);
    let before = d.clone();
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    d["spec"]["replicas"] = json!(3);
    record_update(Some(&before), &mut d, "kubectl-set", None, T1);
    let set = entry(&d, "kubectl-set").unwrap();
    assert_eq!(
        set["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:image": {}}}}}}})
    );
    let create = &entry(&d, "kubectl-create").unwrap()["fieldsV1"];
    assert!(create["f:spec"].get("f:replicas").is_none());
    assert!(
        create["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]
            .get("f:image")
            .is_none()
    );

    // Removing a field takes it from everyone; an entry left empty goes.
    let before = d.clone();
    d["spec"].as_object_mut().unwrap().remove("replicas");
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.25");
    record_update(Some(&before), &mut d, "kubectl-edit", None, T1);
    assert!(entry(&d, "kubectl-set").is_none());
    assert!(entry(&d, "kubectl-edit").is_some());

    // A write that changes nothing leaves managedFields exactly as they were.
    let before = d.clone();
    record_update(
        Some(&before),
        &mut d,
        "someone",
        None,
        "2030-01-01T00:00:00Z",
    );
    assert_eq!(d, before);
}

#[test]
fn a_write_may_replace_managed_fields() {
    let mut d = config();
    record_update(None, &mut d, "kubectl-create", None, T0);
    let before = d.clone();
    d["metadata"]["managedFields"] = json!([{"manager": "imported", "operation": "Update",
        "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}, "junk"]);
    d["spec"]["paused"] = json!(true);
    record_update(Some(&before), &mut d, "kubectl-patch", None, T1);
    let managers: Vec<&str> = entries(&d)
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert_eq!(managers, ["imported", "kubectl-patch"]);
}

#[test]
fn default_manager_is_the_user_agent_prefix() {
    assert_eq!(
        default_manager("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07"),
        "kubectl"
    );
    assert_eq!(
        default_manager("kubectl-dispatcher/v1.0 (linux/amd64)"),
        "kubectl-dispatcher"
    );
    assert_eq!(default_manager(""), "");
    assert_eq!(default_manager("no-slash"), "no-slash");
    assert_eq!(default_manager("a\u{7}b/1"), "ab");
    assert_eq!(default_manager(&"é".repeat(100)).len(), 128);
}
