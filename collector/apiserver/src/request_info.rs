//! What a Kubernetes API request is about, from its method, path and query alone: the verb and the
//! object it names, as the apiserver's request-info resolver works them out before authorizing or
//! auditing a request.
//!
//! The grammar: `/api/{version}/...` (the core group) and `/apis/{group}/{version}/...` are resource
//! requests; the rest after the version is `[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]`.
//! Everything else (`/version`, `/openapi/v3`, discovery documents such as `/api` or `/apis/apps/v1`)
//! is a non-resource request, whose verb is the lowercased HTTP method. The HTTP method gives the
//! verb (`GET` → get, `POST` → create, `PUT` → update, `PATCH` → patch, `DELETE` → delete); a `GET`
//! that names no object is a `list`, or a `watch` with `?watch=true` (or the old `/watch/` prefix);
//! a `DELETE` that names no object is a `deletecollection`.

/// The parts of a request the apiserver authorizes and audits by.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// Whether the path names a resource (under `/api/{version}` or `/apis/{group}/{version}`).
    pub is_resource_request: bool,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`; for a
    /// non-resource request, the lowercased HTTP method.
    pub verb: String,
    /// `api` or `apis`, for a resource request.
    pub api_prefix: String,
    /// The API group, `""` for the core group.
    pub api_group: String,
    pub api_version: String,
    pub namespace: Option<String>,
    /// The resource's plural name (`pods`, `deployments`).
    pub resource: String,
    /// The object's name; a list or watch with a `metadata.name=` field selector names one too.
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Namespace subresources: `namespaces/{ns}/status` is the Namespace's status, not a resource
/// `status` inside namespace `ns`.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

impl RequestInfo {
    /// Resolves a request. `query` is the raw query string (without `?`); never fails: a path
    /// outside the resource grammar is a non-resource request.
    pub fn parse(method: &str, path: &str, query: &str) -> RequestInfo {
        let method_verb = method.to_ascii_lowercase();
        let non_resource = RequestInfo {
            verb: method_verb.clone(),
            ..RequestInfo::default()
        };
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (prefix, group, version, mut rest) = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => ("api", "", *version, rest),
            ["apis", group, version, rest @ ..] if !rest.is_empty() => {
                ("apis", *group, *version, rest)
            }
            _ => return non_resource,
        };
        let mut info = RequestInfo {
            is_resource_request: true,
            verb: match method_verb.as_str() {
                "get" | "head" => "get".to_string(),
                "post" => "create".to_string(),
                "put" => "update".to_string(),
                "patch" => "patch".to_string(),
                "delete" => "delete".to_string(),
                other => other.to_string(),
            },
            api_prefix: prefix.to_string(),
            api_group: group.to_string(),
            api_version: version.to_string(),
            ..RequestInfo::default()
        };
        // The deprecated `/watch/` path prefix, still honoured for GETs.
        if info.verb == "get"
            && let ["watch", tail @ ..] = rest
        {
            info.verb = "watch".to_string();
            rest = tail;
        }
        if let ["namespaces", ns, tail @ ..] = rest {
            info.namespace = Some(ns.to_string());
            if let Some(next) = tail.first()
                && !NAMESPACE_SUBRESOURCES.contains(next)
            {
                rest = tail;
            }
        }
        if let Some(resource) = rest.first() {
            info.resource = resource.to_string();
        }
        info.name = rest.get(1).map(|s| s.to_string());
        info.subresource = rest.get(2).map(|s| s.to_string());
        if info.name.is_none() {
            match info.verb.as_str() {
                "get" | "watch" => {
                    let (watch, named) = list_options(query);
                    if info.verb == "get" {
                        info.verb = if watch { "watch" } else { "list" }.to_string();
                    }
                    info.name = named;
                }
                "delete" => info.verb = "deletecollection".to_string(),
                _ => {}
            }
        }
        info
    }
}

/// From a list's query: whether it is a watch, and the name a `metadata.name` field selector
/// pins it to.
fn list_options(query: &str) -> (bool, Option<String>) {
    let mut watch = false;
    let mut name = None;
    for (key, value) in form_pairs(query) {
        match key.as_str() {
            // As the apiserver decodes a query bool.
            "watch" => watch = matches!(value.as_str(), "true" | "True" | "1"),
            "fieldSelector" => name = exact_name(&value),
            _ => {}
        }
    }
    (watch, name)
}

/// `metadata.name=x` (or `==x`) among a field selector's requirements.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|req| {
        let value = req.trim().strip_prefix("metadata.name")?;
        let value = value
            .strip_prefix("==")
            .or_else(|| value.strip_prefix('='))?;
        Some(value.to_string())
    })
}

/// The query's pairs, decoded (a malformed escape is kept as sent).
fn form_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, path: &str, query: &str) -> RequestInfo {
        RequestInfo::parse(method, path, query)
    }

    /// (verb, group, version, namespace, resource, name, subresource) of a resource request.
    type Parts<'a> = (
        &'a str,
        &'a str,
        &'a str,
        Option<&'a str>,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
    );

    fn parts(i: &RequestInfo) -> Parts<'_> {
        assert!(i.is_resource_request, "{i:?}");
        (
            &i.verb,
            &i.api_group,
            &i.api_version,
            i.namespace.as_deref(),
            &i.resource,
            i.name.as_deref(),
            i.subresource.as_deref(),
        )
    }

    #[test]
    fn a_get_without_a_name_is_a_list_or_a_watch() {
        let list = info("GET", "/api/v1/namespaces/x/pods", "limit=500");
        assert_eq!(
            parts(&list),
            ("list", "", "v1", Some("x"), "pods", None, None)
        );
        assert_eq!(list.api_prefix, "api");
        let watch = info(
            "GET",
            "/api/v1/namespaces/x/pods",
            "allowWatchBookmarks=true&resourceVersion=12&watch=true",
        );
        assert_eq!(watch.verb, "watch");
        assert_eq!(info("GET", "/api/v1/pods", "watch=1").verb, "watch");
        assert_eq!(info("GET", "/api/v1/pods", "watch=false").verb, "list");
        let all = info("GET", "/apis/apps/v1/deployments", "");
        assert_eq!(
            parts(&all),
            ("list", "apps", "v1", None, "deployments", None, None)
        );
    }

    #[test]
    fn a_named_get_is_a_get() {
        let get = info("GET", "/apis/apps/v1/namespaces/x/deployments/y", "");
        assert_eq!(
            parts(&get),
            (
                "get",
                "apps",
                "v1",
                Some("x"),
                "deployments",
                Some("y"),
                None
            )
        );
        assert_eq!(get.api_prefix, "apis");
        assert_eq!(info("HEAD", "/api/v1/nodes/n1", "").verb, "get");
        let logs = info(
            "GET",
            "/api/v1/namespaces/x/pods/p/log",
            "container=c&follow=true",
        );
        assert_eq!(
            parts(&logs),
            ("get", "", "v1", Some("x"), "pods", Some("p"), Some("log"))
        );
    }

    #[test]
    fn writes_take_their_verb_from_the_method() {
        let scale = info(
            "PATCH",
            "/apis/apps/v1/namespaces/x/deployments/y/scale",
            "",
        );
        assert_eq!(
            parts(&scale),
            (
                "patch",
                "apps",
                "v1",
                Some("x"),
                "deployments",
                Some("y"),
                Some("scale")
            )
        );
        let put = info("PUT", "/apis/apps/v1/namespaces/x/deployments/y/scale", "");
        assert_eq!(put.verb, "update");
        let create = info(
            "POST",
            "/api/v1/namespaces/x/configmaps",
            "fieldManager=kubectl-create",
        );
        assert_eq!(
            parts(&create),
            ("create", "", "v1", Some("x"), "configmaps", None, None)
        );
        let evict = info("POST", "/api/v1/namespaces/x/pods/p/eviction", "");
        assert_eq!(evict.verb, "create");
        assert_eq!(evict.subresource.as_deref(), Some("eviction"));
        assert_eq!(
            info("DELETE", "/api/v1/namespaces/x/pods/p", "").verb,
            "delete"
        );
        assert_eq!(
            info("DELETE", "/api/v1/namespaces/x/pods", "labelSelector=a%3Db").verb,
            "deletecollection"
        );
    }

    #[test]
    fn non_resource_requests_use_the_method() {
        for path in [
            "/version",
            "/openapi/v3",
            "/openapi/v3/apis/apps/v1",
            "/api",
            "/apis",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/healthz",
            "/",
        ] {
            let i = info("GET", path, "timeout=32s");
            assert!(!i.is_resource_request, "{path}: {i:?}");
            assert_eq!(i.verb, "get", "{path}");
            assert_eq!(i.resource, "", "{path}");
        }
        assert_eq!(info("POST", "/version", "").verb, "post");
    }

    #[test]
    fn namespaces_are_both_a_resource_and_a_scope() {
        let ns = info("GET", "/api/v1/namespaces/x", "");
        assert_eq!(
            parts(&ns),
            ("get", "", "v1", Some("x"), "namespaces", Some("x"), None)
        );
        let status = info("PUT", "/api/v1/namespaces/x/status", "");
        assert_eq!(
            parts(&status),
            (
                "update",
                "",
                "v1",
                Some("x"),
                "namespaces",
                Some("x"),
                Some("status")
            )
        );
        let finalize = info("PUT", "/api/v1/namespaces/x/finalize", "");
        assert_eq!(finalize.subresource.as_deref(), Some("finalize"));
        let list = info("GET", "/api/v1/namespaces", "");
        assert_eq!(
            parts(&list),
            ("list", "", "v1", None, "namespaces", None, None)
        );
    }

    #[test]
    fn a_name_field_selector_names_the_object_of_a_list() {
        let one = info(
            "GET",
            "/apis/apps/v1/namespaces/x/deployments",
            "fieldSelector=metadata.name%3Dgeo&limit=500&resourceVersion=0",
        );
        assert_eq!(
            (one.verb.as_str(), one.name.as_deref()),
            ("list", Some("geo"))
        );
        let watch = info(
            "GET",
            "/apis/apps/v1/namespaces/x/deployments",
            "fieldSelector=status.phase%3DRunning%2Cmetadata.name%3D%3Dgeo&watch=true",
        );
        assert_eq!(
            (watch.verb.as_str(), watch.name.as_deref()),
            ("watch", Some("geo"))
        );
        let other = info("GET", "/api/v1/pods", "fieldSelector=spec.nodeName%3Dn1");
        assert_eq!(other.name, None);
    }

    #[test]
    fn the_old_watch_prefix_is_a_watch() {
        let w = info("GET", "/api/v1/watch/namespaces/x/pods", "");
        assert_eq!(
            parts(&w),
            ("watch", "", "v1", Some("x"), "pods", None, None)
        );
        let named = info("GET", "/api/v1/watch/namespaces/x/pods/p", "");
        assert_eq!(
            (named.verb.as_str(), named.name.as_deref()),
            ("watch", Some("p"))
        );
    }

    #[test]
    fn query_decoding_survives_malformed_escapes() {
        let i = info(
            "GET",
            "/api/v1/pods",
            "fieldSelector=metadata.name%3D%E2%9C%93&watch",
        );
        assert_eq!(i.name.as_deref(), Some("✓"));
        assert_eq!(i.verb, "list");
    }
}
