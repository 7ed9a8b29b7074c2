//! The edits fault primitives make to configuration text, as plain functions: a JSON field in a
//! ConfigMap value, a feature flag's default variant, the port of a `host:port` address, the
//! CoreDNS block that answers NXDOMAIN. The simulator and the real-cluster injector apply the
//! same primitive to the same text, so both call these.

use serde_json::json;

/// The `host` and `port` of an address (`cart:7070`, `http://frontend:5000/x`,
/// `mongodb://mongodb-geo:27017/geo-db`).
pub fn split_address(addr: &str) -> Option<(&str, u16)> {
    let addr = addr
        .trim()
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_start_matches("mongodb://");
    let addr = addr.split('/').next()?;
    let (host, port) = addr.rsplit_once(':')?;
    Some((host, port.parse().ok()?))
}

/// The address with its port replaced (the first `host:port` in the text); `None` when the text
/// holds no address.
pub fn with_address_port(value: &str, port: u16) -> Option<String> {
    let (host, old) = split_address(value)?;
    let from = format!("{host}:{old}");
    Some(value.replacen(&from, &format!("{host}:{port}"), 1))
}

/// Removes (`value` absent) or sets a top-level or dotted field of a JSON document held in a
/// ConfigMap value; `value` is taken as JSON when it parses, else as a string. `None` when the
/// text is not a JSON object with the field's parents.
pub fn edit_json_field(text: &str, field: &str, value: Option<&str>) -> Option<String> {
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut cur = &mut v;
    let parts: Vec<&str> = field.split('.').collect();
    for p in &parts[..parts.len() - 1] {
        cur = cur.get_mut(*p)?;
    }
    let last = parts[parts.len() - 1];
    let obj = cur.as_object_mut()?;
    match value {
        Some(val) => {
            let parsed = serde_json::from_str(val).unwrap_or_else(|_| json!(val));
            obj.insert(last.to_string(), parsed);
        }
        None => {
            obj.remove(last);
        }
    }
    serde_json::to_string_pretty(&v).ok()
}

/// Sets a flag's default variant in its ConfigMap text (flagd JSON, `name=value` lines, or a
/// plain value).
pub fn set_flag_variant(text: &str, flag: &str, variant: &str) -> String {
    if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) {
        if v["flags"][flag].is_object() {
            v["flags"][flag]["defaultVariant"] = json!(variant);
            return serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string());
        }
        if v.get(flag).is_some() {
            v[flag] = json!(variant);
            return serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string());
        }
    }
    if text
        .lines()
        .any(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == flag))
    {
        return text
            .lines()
            .map(|l| match l.split_once('=') {
                Some((k, _)) if k.trim() == flag => format!("{flag}={variant}"),
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    variant.to_string()
}

/// A Corefile that answers NXDOMAIN for one service's name in `namespace` (or for every
/// `*.svc.cluster.local` name when `service` is absent): a `template` block ahead of the
/// `kubernetes` plugin, which would otherwise answer first.
pub fn corefile_nxdomain(corefile: &str, service: Option<&str>, namespace: &str) -> String {
    let block = match service {
        Some(s) => {
            let fqdn = format!("{s}.{namespace}.svc.cluster.local");
            format!(
                "    template ANY ANY {fqdn} {{\n       match \"^{}[.]$\"\n       rcode NXDOMAIN\n       fallthrough\n    }}\n",
                fqdn.replace('.', "[.]")
            )
        }
        None => "    template ANY ANY {\n       match \".*\\.svc\\.cluster\\.local\"\n       rcode NXDOMAIN\n       fallthrough\n    }\n".to_string(),
    };
    match corefile.find("    kubernetes ") {
        Some(pos) => format!("{}{block}{}", &corefile[..pos], &corefile[pos..]),
        None => format!("{corefile}{block}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_text_edits() {
        assert_eq!(split_address("cart:7070"), Some(("cart", 7070)));
        assert_eq!(
            split_address("mongodb://mongodb-geo:27017/geo-db"),
            Some(("mongodb-geo", 27017))
        );
        assert_eq!(split_address("nohost"), None);
        assert_eq!(
            with_address_port("http://cart:7070/x", 9999).as_deref(),
            Some("http://cart:9999/x")
        );
        let edited = edit_json_field(r#"{"a":{"b":1},"c":2}"#, "a.b", None).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&edited).unwrap(),
            json!({"a": {}, "c": 2})
        );
        assert!(edit_json_field("not json", "a", None).is_none());
        assert_eq!(set_flag_variant("X=v1\nY=1", "X", "v2"), "X=v2\nY=1");
        let flagd = r#"{"flags":{"f":{"defaultVariant":"off"}}}"#;
        assert!(set_flag_variant(flagd, "f", "on").contains("\"defaultVariant\": \"on\""));
        let dns = corefile_nxdomain(
            ".:53 {\n    kubernetes cluster.local\n}\n",
            Some("geo"),
            "h",
        );
        assert!(dns.find("template").unwrap() < dns.find("kubernetes").unwrap());
        assert!(dns.contains("geo[.]h[.]svc"));
    }
}
