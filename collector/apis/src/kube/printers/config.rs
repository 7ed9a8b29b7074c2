//! Configuration and quotas: ConfigMaps, Secrets, ServiceAccounts, ResourceQuotas, PersistentVolumeClaims.

use serde_json::Value;

use super::*;

pub(super) const CONFIG_MAP: Printer = Printer {
    columns: &[NAME, int("Data", 0, "Number of keys"), AGE],
    cells: config_map,
};

fn config_map(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
    let count = ["/data", "/binaryData"]
        .iter()
        .filter_map(|p| v.pointer(p).and_then(Value::as_object))
        .map(|m| m.len())
        .sum::<usize>();
    vec![name.into(), count.into(), created.into()]
}

pub(super) const SECRET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Type",
            0,
            "Used to facilitate programmatic handling of secret data.",
        ),
        int("Data", 0, "Number of keys"),
        AGE,
    ],
    cells: secret,
};

fn secret(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
    let count = v
        .pointer("/data")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    vec![
        name.into(),
        s(v, "/type").into(),
        count.into(),
        created.into(),
    ]
}

pub(super) const SERVICE_ACCOUNT: Printer = Printer {
    columns: &[
        NAME,
        int(
            "Secrets",
            0,
            "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
        ),
        AGE,
    ],
    cells: service_account,
};

fn service_account(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
    vec![name.into(), arr(v, "/secrets").len().into(), created.into()]
}

pub(super) const RESOURCE_QUOTA: Printer = Printer {
    columns: &[
        NAME,
        AGE,
        col(
            "Request",
            0,
            "Request represents a minimum amount of cpu/memory that a container may consume.",
        ),
        col(
            "Limit",
            0,
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
    ],
    cells: resource_quota,
};

fn resource_quota(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
    let mut req = Vec::new();
    let mut lim = Vec::new();
    if let Some(hard) = v.pointer("/status/hard").and_then(Value::as_object) {
        for (k, h) in hard {
            let used = v
                .pointer(&format!("/status/used/{}", k.replace('/', "~1")))
                .and_then(Value::as_str)
                .unwrap_or("0");
            let item = format!("{k}: {used}/{}", h.as_str().unwrap_or(""));
            if k.starts_with("limits") {
                lim.push(item);
            } else {
                req.push(item);
            }
        }
    }
    vec![
        name.into(),
        created.into(),
        req.join(", ").into(),
        lim.join(", ").into(),
    ]
}

pub(super) const PERSISTENT_VOLUME_CLAIM: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Status",
            0,
            "Phase represents the current phase of PersistentVolumeClaim.",
        ),
        col(
            "Volume",
            0,
            "volumeName is the binding reference to the PersistentVolume backing this claim.",
        ),
        col(
            "Capacity",
            0,
            "capacity represents the actual resources of the underlying volume.",
        ),
        col(
            "Access Modes",
            0,
            "accessModes contains the actual access modes the volume backing the PVC has.",
        ),
        col(
            "StorageClass",
            0,
            "storageClassName is the name of the StorageClass required by the claim.",
        ),
        col(
            "VolumeAttributesClass",
            0,
            "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
        ),
        AGE,
        col(
            "VolumeMode",
            1,
            "volumeMode defines what type of volume is required by the claim.",
        ),
    ],
    cells: persistent_volume_claim,
};

fn persistent_volume_claim(v: &Value, now_ns: i64) -> Vec<Value> {
    let name = name_of(v);
    let created = created_age(v, now_ns);
    let modes: Vec<String> = arr(v, "/status/accessModes")
        .iter()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO".into(),
            "ReadOnlyMany" => "ROX".into(),
            "ReadWriteMany" => "RWX".into(),
            "ReadWriteOncePod" => "RWOP".into(),
            other => other.to_string(),
        })
        .collect();
    vec![
        name.into(),
        s(v, "/status/phase").into(),
        s(v, "/spec/volumeName").into(),
        s(v, "/status/capacity/storage").into(),
        modes.join(",").into(),
        s(v, "/spec/storageClassName").into(),
        or_unset(s(v, "/spec/volumeAttributesClassName")).into(),
        created.into(),
        match s(v, "/spec/volumeMode") {
            "" => "Filesystem",
            m => m,
        }
        .into(),
    ]
}
