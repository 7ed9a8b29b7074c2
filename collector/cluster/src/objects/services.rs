//! Services and the Endpoints the endpoints controller keeps for them.

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
