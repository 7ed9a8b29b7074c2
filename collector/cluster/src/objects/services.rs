//! Services, and the Endpoints and EndpointSlices their controllers keep for them.

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default = "defaults::tcp")]
    pub protocol: String,
    pub port: i32,
    /// 0 when a client left it out: defaulting sets it to `port`.
    #[serde(default = "defaults::no_port")]
    pub target_port: IntOrString,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub meta: Meta,
    pub selector: Labels,
    pub ports: Vec<ServicePort>,
    pub cluster_ip: String,
    pub internal_traffic_policy: String,
    /// Spec fields the model does not use (`type: NodePort`, `sessionAffinity`, ...), rendered
    /// over the defaults.
    pub spec_extra: Map<String, Value>,
}

impl Service {
    pub fn to_json(&self) -> Value {
        let mut spec = json!({
            "clusterIP": self.cluster_ip,
            "clusterIPs": [self.cluster_ip],
            "internalTrafficPolicy": self.internal_traffic_policy,
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": self.ports,
            "sessionAffinity": "None",
            "type": "ClusterIP",
        });
        if !self.selector.is_empty() {
            spec["selector"] = json!(self.selector);
        }
        merge_extra(&mut spec, &self.spec_extra);
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.meta.to_json(false),
            "spec": spec,
            "status": {"loadBalancer": {}},
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EndpointAddress {
    pub ip: String,
    pub node: String,
    pub pod: String,
    pub pod_uid: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    pub meta: Meta,
    pub ready: Vec<EndpointAddress>,
    pub not_ready: Vec<EndpointAddress>,
    /// (name, port) the addresses serve.
    pub ports: Vec<(Option<String>, i32)>,
}

impl Endpoints {
    pub fn to_json(&self) -> Value {
        let addr = |a: &EndpointAddress| {
            json!({
                "ip": a.ip,
                "nodeName": a.node,
                "targetRef": {
                    "kind": "Pod",
                    "namespace": self.meta.namespace,
                    "name": a.pod,
                    "uid": a.pod_uid,
                },
            })
        };
        let mut subsets = vec![];
        if (!self.ready.is_empty() || !self.not_ready.is_empty()) && !self.ports.is_empty() {
            let mut s = serde_json::Map::new();
            if !self.ready.is_empty() {
                s.insert(
                    "addresses".into(),
                    Value::Array(self.ready.iter().map(addr).collect()),
                );
            }
            if !self.not_ready.is_empty() {
                s.insert(
                    "notReadyAddresses".into(),
                    Value::Array(self.not_ready.iter().map(addr).collect()),
                );
            }
            s.insert(
                "ports".into(),
                Value::Array(
                    self.ports
                        .iter()
                        .map(|(n, p)| {
                            let mut v = json!({"port": p, "protocol": "TCP"});
                            if let Some(n) = n {
                                v["name"] = json!(n);
                            }
                            v
                        })
                        .collect(),
                ),
            );
            subsets.push(Value::Object(s));
        }
        let mut v = json!({
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": self.meta.to_json(false),
        });
        if !subsets.is_empty() {
            v["subsets"] = Value::Array(subsets);
        }
        v
    }
}

/// `kubernetes.io/service-name`: the label that ties an EndpointSlice to its Service (what
/// `kubectl describe svc` selects slices by).
pub const SLICE_SERVICE_LABEL: &str = "kubernetes.io/service-name";
/// `endpointslice.kubernetes.io/managed-by`: which controller owns a slice.
pub const SLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The value the EndpointSlice controller writes in [`SLICE_MANAGED_BY_LABEL`].
pub const SLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";

/// One endpoint of an EndpointSlice, with the API's field names (`discovery.k8s.io/v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SliceEndpoint {
    pub addresses: Vec<String>,
    #[serde(default)]
    pub conditions: SliceConditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<SliceTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// An endpoint's conditions. The API leaves each optional (unknown); the controller sets all three.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SliceConditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
}

/// The object behind an endpoint (a Pod, for slices the controller keeps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SliceTarget {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// A port every endpoint of a slice serves. The controller writes the Service port's name, `""`
/// for an unnamed one, as the real controller does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlicePort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

/// `discovery.k8s.io/v1` EndpointSlice: what `kubectl describe svc` reads a Service's endpoints
/// from. The endpoints controller keeps one per selecting Service (see `controllers.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointSlice {
    pub meta: Meta,
    pub address_type: String,
    pub endpoints: Vec<SliceEndpoint>,
    pub ports: Vec<SlicePort>,
}

impl EndpointSlice {
    pub fn to_json(&self) -> Value {
        // Neither list is `omitempty` in the API types: an empty slice shows `null`, as a
        // Service that selects no pod yet shows in a real cluster.
        let list = |v: Value, empty: bool| if empty { Value::Null } else { v };
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": self.meta.to_json(true),
            "addressType": self.address_type,
            "endpoints": list(json!(self.endpoints), self.endpoints.is_empty()),
            "ports": list(json!(self.ports), self.ports.is_empty()),
        })
    }

    /// The Service this slice serves, by its label.
    pub fn service(&self) -> Option<&str> {
        self.meta
            .labels
            .get(SLICE_SERVICE_LABEL)
            .map(String::as_str)
    }

    /// Whether the EndpointSlice controller manages this slice (clients may write their own).
    pub fn controller_managed(&self) -> bool {
        self.meta
            .labels
            .get(SLICE_MANAGED_BY_LABEL)
            .map(String::as_str)
            == Some(SLICE_CONTROLLER)
    }
}
