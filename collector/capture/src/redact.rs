//! Secret values are never captured: each one is replaced by a keyed hash (HMAC-SHA256), so that
//! equal values stay visibly equal within a capture (and across captures made with the same key)
//! while the value itself cannot be recovered or guessed without the key.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// What a redacted value starts with, once decoded from base64.
pub const REDACTED_PREFIX: &str = "faultline-redacted:hmac-sha256:";

/// The annotation `kubectl apply` leaves on objects: it repeats a Secret's data in clear text.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[derive(Clone)]
pub struct Redactor {
    key: Vec<u8>,
}

impl Redactor {
    pub fn new(key: &[u8]) -> Self {
        Redactor { key: key.to_vec() }
    }

    /// A redactor with a fresh random key: equality is visible within this capture only.
    pub fn random() -> Self {
        Redactor::new(&rand::random::<[u8; 32]>())
    }

    /// The redacted form of a value: `faultline-redacted:hmac-sha256:<first 16 bytes, hex>`.
    pub fn hash(&self, value: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(value);
        let digest = mac.finalize().into_bytes();
        format!("{REDACTED_PREFIX}{}", hex::encode(&digest[..16]))
    }

    /// Redacts a Secret object in place: `data` values (base64) are replaced by the base64 of their
    /// hash, `stringData` values by the hash, and the last-applied annotation by its hash. A value
    /// already redacted is left as it is, so redacting twice (a dataset exported and imported
    /// again) changes nothing.
    pub fn redact_secret(&self, secret: &mut Value) {
        let redacted = |raw: &[u8]| raw.starts_with(REDACTED_PREFIX.as_bytes());
        if let Some(data) = secret.get_mut("data").and_then(Value::as_object_mut) {
            for v in data.values_mut() {
                if let Some(text) = v.as_str() {
                    // Hash the decoded bytes, so the same value hashes alike in data and stringData.
                    let raw = BASE64
                        .decode(text)
                        .unwrap_or_else(|_| text.as_bytes().to_vec());
                    if !redacted(&raw) {
                        *v = BASE64.encode(self.hash(&raw)).into();
                    }
                }
            }
        }
        if let Some(data) = secret.get_mut("stringData").and_then(Value::as_object_mut) {
            for v in data.values_mut() {
                if let Some(text) = v.as_str()
                    && !redacted(text.as_bytes())
                {
                    *v = self.hash(text.as_bytes()).into();
                }
            }
        }
        if let Some(annotations) = secret
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
            && let Some(v) = annotations.get_mut(LAST_APPLIED)
            && let Some(text) = v.as_str()
            && !redacted(text.as_bytes())
        {
            *v = self.hash(text.as_bytes()).into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_keep_equality_but_not_values() {
        let r = Redactor::new(b"k");
        let mut s = json!({"metadata": {"annotations": {LAST_APPLIED: "{\"data\":{\"p\":\"aHVudGVyMg==\"}}"}},
                           "data": {"a": "aHVudGVyMg==", "b": "aHVudGVyMg==", "c": "b3RoZXI="},
                           "stringData": {"d": "hunter2"}});
        r.redact_secret(&mut s);
        let text = s.to_string();
        assert!(
            !text.contains("aHVudGVyMg") && !text.contains("hunter2"),
            "{text}"
        );
        assert_eq!(s["data"]["a"], s["data"]["b"]);
        assert_ne!(s["data"]["a"], s["data"]["c"]);
        let decoded = BASE64.decode(s["data"]["a"].as_str().unwrap()).unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), s["stringData"]["d"]);
        assert_ne!(Redactor::new(b"other").hash(b"hunter2"), r.hash(b"hunter2"));
        let once = s.clone();
        Redactor::new(b"another key").redact_secret(&mut s);
        assert_eq!(s, once, "a redacted secret stays as it is");
    }
}
