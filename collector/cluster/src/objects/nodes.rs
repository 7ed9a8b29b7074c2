//! Nodes: capacity, taints, conditions and heartbeats.

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub meta: Meta,
    pub cpu_milli: i64,
    pub memory: i64,
    pub max_pods: i64,
    pub ip: String,
    pub pod_cidr: String,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub conditions: Vec<Condition>,
    /// Whether the kubelet is posting status (false: condition Ready shows Unknown).
    pub kubelet_up: bool,
    pub heartbeat: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
}

impl Node {
    pub fn ready(&self) -> bool {
        self.kubelet_up
            && self
                .conditions
                .iter()
                .any(|c| c.kind == "Ready" && c.status)
    }

    pub fn to_json(&self) -> Value {
        let alloc_mem = self.memory - (100 << 20);
        let mut spec = json!({"podCIDR": self.pod_cidr, "podCIDRs": [self.pod_cidr], "providerID": format!("kind://docker/kind/{}", self.meta.name)});
        if !self.taints.is_empty() {
            spec["taints"] = json!(self.taints);
        }
        if self.unschedulable {
            spec["unschedulable"] = json!(true);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": self.meta.to_json(false),
            "spec": spec,
            "status": {
                "addresses": [{"type": "InternalIP", "address": self.ip}, {"type": "Hostname", "address": self.meta.name}],
                "allocatable": {"cpu": cpu_quantity(self.cpu_milli), "ephemeral-storage": "102626232Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": format!("{}Ki", alloc_mem >> 10), "pods": self.max_pods.to_string()},
                "capacity": {"cpu": cpu_quantity(self.cpu_milli), "ephemeral-storage": "102626232Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": format!("{}Ki", self.memory >> 10), "pods": self.max_pods.to_string()},
                "conditions": self.conditions.iter().map(|c| node_condition_json(c, self.heartbeat, !self.kubelet_up)).collect::<Vec<_>>(),
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": self.meta.uid,
                    "containerRuntimeVersion": "containerd://1.7.18",
                    "kernelVersion": "6.8.0-49-generic",
                    "kubeProxyVersion": "v1.31.2",
                    "kubeletVersion": "v1.31.2",
                    "machineID": self.meta.uid.replace('-', ""),
                    "operatingSystem": "linux",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "systemUUID": self.meta.uid,
                },
            },
        })
    }
}
