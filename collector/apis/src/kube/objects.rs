//! List, get and watch of objects, as JSON, Table or PartialObjectMetadata.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use schemas::tables::ChangeType;
use serde_json::{Map, Value, json};

use super::resources::Resource;
use super::selector::{FieldSelector, LabelSelector};
use super::{KubeFacade, Params, json_response, printers, status};
use schemas::time::Reading;
use stores::objects::{ClusterState, ObjectKey, Version};

/// How the client wants objects rendered, from its Accept header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Render {
    Json,
    Table,
    Metadata,
}

fn render(accept: &str) -> Render {
    // The first acceptable alternative wins, as the apiserver negotiates.
    for part in accept.split(',') {
        if part.contains("as=Table") {
            return Render::Table;
        }
        if part.contains("as=PartialObjectMetadata") {
            return Render::Metadata;
        }
        if part.trim_start().starts_with("application/json") || part.contains("*/*") {
            return Render::Json;
        }
    }
    Render::Json
}

/// Shifts every timestamp-valued field (`creationTimestamp`, `lastTimestamp`, `startedAt`,
/// `lastTransitionTime`, ...) by the clock's shift, so that client-side ages look live.
fn shift_times(v: &mut Value, shift_ns: i64) {
    if shift_ns == 0 {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                let timey = k.ends_with("Timestamp") || k.ends_with("Time") || k.ends_with("At");
                match child {
                    Value::String(s) if timey => {
                        if let Some(t) = schemas::time::parse_rfc3339(s) {
                            let shifted = t.saturating_add(shift_ns);
                            *s = if s.contains('.') {
                                schemas::time::rfc3339_nanos(shifted)
                            } else {
                                schemas::time::rfc3339(shifted)
                            };
                        }
                    }
                    _ => shift_times(child, shift_ns),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| shift_times(x, shift_ns)),
        _ => {}
    }
}

/// An object as served: kind and apiVersion set, times shifted.
pub(super) fn served(res: &Resource, object: &Value, clock: &Reading) -> Value {
    let mut v = object.clone();
    if let Some(map) = v.as_object_mut() {
        map.insert("kind".into(), res.kind.clone().into());
        map.insert("apiVersion".into(), res.api_version().into());
    }
    shift_times(&mut v, clock.shift_ns);
    v
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn partial_metadata(v: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": v.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The selected objects, in (namespace, name) order.
pub(super) fn select(
    state: &ClusterState,
    res: &Resource,
    namespace: Option<&str>,
    params: &Params,
) -> Result<Vec<Arc<Value>>, Response> {
    if let Some(message) = &params.invalid {
        return Err(status::bad_request(message.clone()));
    }
    let labels = LabelSelector::parse(params.label_selector.as_deref().unwrap_or(""))
        .map_err(status::bad_request)?;
    let fields = FieldSelector::parse(params.field_selector.as_deref().unwrap_or(""), &res.kind)
        .map_err(status::bad_request)?;
    Ok(objects_of(state, res)
        .filter(|((ns, _), _)| namespace.is_none_or(|n| n == ns))
        .map(|(_, v)| v)
        .filter(|v| labels.matches(&labels_of(v)) && fields.matches(v))
        .cloned()
        .collect())
}

/// Objects of a resource. events.k8s.io Events are the core Events in their newer shape.
fn objects_of<'a>(
    state: &'a ClusterState,
    res: &Resource,
) -> impl Iterator<Item = (&'a (String, String), &'a Arc<Value>)> + 'a {
    let key = if res.group == "events.k8s.io" {
        ("v1".to_string(), "Event".to_string())
    } else {
        (res.api_version(), res.kind.clone())
    };
    state.kinds.get(&key).into_iter().flatten()
}

/// Continue tokens carry the list's resource version and the offset of the next item.
fn encode_continue(rv: u64, offset: usize) -> String {
    hex::encode(format!("{rv}:{offset}"))
}

fn decode_continue(token: &str, rv: u64) -> Result<usize, Response> {
    let text = hex::decode(token)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| status::bad_request("continue key is not valid"))?;
    let (token_rv, offset) = text
        .split_once(':')
        .and_then(|(r, o)| Some((r.parse::<u64>().ok()?, o.parse::<usize>().ok()?)))
        .ok_or_else(|| status::bad_request("continue key is not valid"))?;
    if token_rv != rv {
        return Err(status::gone(
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter.",
        ));
    }
    Ok(offset)
}

pub fn list(
    f: &KubeFacade,
    res: &Resource,
    namespace: Option<&str>,
    params: &Params,
    accept: &str,
) -> Response {
    let clock = f.clock.read();
    let (items, rv) = {
        let objects = f.objects.read();
        match select(&objects.state, res, namespace, params) {
            Ok(items) => (items, objects.state.resource_version),
            Err(e) => return e,
        }
    };
    let start = match params.continue_token.as_deref() {
        Some(token) => match decode_continue(token, rv) {
            Ok(o) => o,
            Err(e) => return e,
        },
        None => 0,
    };
    let end = params
        .limit
        .map_or(items.len(), |l| (start + l).min(items.len()));
    let page = &items[start.min(items.len())..end];
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if end < items.len() {
        metadata["continue"] = encode_continue(rv, end).into();
        metadata["remainingItemCount"] = (items.len() - end).into();
    }
    let body = match render(accept) {
        Render::Table => table(res, page, params, &clock, metadata, true),
        Render::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "items": page.iter().map(|v| partial_metadata(&served(res, v, &clock))).collect::<Vec<_>>(),
        }),
        Render::Json => {
            let items: Vec<Value> = page
                .iter()
                .map(|v| {
                    let mut v = served(res, v, &clock);
                    // List items carry neither kind nor apiVersion, as the apiserver sends them.
                    if let Some(m) = v.as_object_mut() {
                        m.remove("kind");
                        m.remove("apiVersion");
                    }
                    v
                })
                .collect();
            json!({
                "kind": format!("{}List", res.kind),
                "apiVersion": res.api_version(),
                "metadata": metadata,
                "items": items,
            })
        }
    };
    json_response(StatusCode::OK, &body)
}

fn table(
    res: &Resource,
    objects: &[Arc<Value>],
    params: &Params,
    clock: &Reading,
    metadata: Value,
    with_columns: bool,
) -> Value {
    let kind = if res.group == "events.k8s.io" {
        "Event"
    } else {
        res.kind.as_str()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|v| {
            let v = served(res, v, clock);
            let cells = printers::cells(kind, &v, clock.served_now_ns());
            let mut row = json!({"cells": cells});
            match params.include_object.as_deref() {
                Some("None") => {}
                Some("Object") => row["object"] = v,
                _ => row["object"] = partial_metadata(&v),
            }
            row
        })
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": rows,
    });
    if with_columns {
        t["columnDefinitions"] = printers::column_definitions(kind);
    }
    t
}

/// The named object, if it exists, and the cluster's resource version, read together.
fn find(
    f: &KubeFacade,
    res: &Resource,
    namespace: Option<&str>,
    name: &str,
) -> (Option<Arc<Value>>, u64) {
    let ns = namespace.unwrap_or("");
    let objects = f.objects.read();
    let found = objects_of(&objects.state, res)
        .find(|((n, nm), _)| n == ns && nm == name)
        .map(|(_, v)| v.clone());
    (found, objects.state.resource_version)
}

pub fn get(
    f: &KubeFacade,
    res: &Resource,
    namespace: Option<&str>,
    name: &str,
    params: &Params,
    accept: &str,
) -> Response {
    let clock = f.clock.read();
    let (object, rv) = find(f, res, namespace, name);
    let Some(object) = object else {
        return status::not_found(&res.plural, name);
    };
    let body = match render(accept) {
        Render::Table => table(
            res,
            &[object],
            params,
            &clock,
            json!({"resourceVersion": rv.to_string()}),
            true,
        ),
        Render::Metadata => partial_metadata(&served(res, &object, &clock)),
        Render::Json => served(res, &object, &clock),
    };
    json_response(StatusCode::OK, &body)
}

/// `GET .../<workload>/<name>/scale`.
pub fn get_scale(f: &KubeFacade, res: &Resource, namespace: Option<&str>, name: &str) -> Response {
    let clock = f.clock.read();
    match find(f, res, namespace, name).0 {
        Some(o) => json_response(
            StatusCode::OK,
            &super::writes::scale_of(&served(res, &o, &clock)),
        ),
        None => status::not_found(&res.plural, name),
    }
}

/// What a watch selects and how it renders, kept for the life of a live watch.
struct WatchSpec {
    res: Resource,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    render: Render,
    params: Params,
}

impl WatchSpec {
    fn selects(&self, key: &ObjectKey, object: &Value) -> bool {
        let (api, kind, ns, _) = key;
        let same_kind = (api, kind) == (&self.res.api_version(), &self.res.kind)
            || (self.res.group == "events.k8s.io" && kind == "Event");
        same_kind
            && self.namespace.as_ref().is_none_or(|n| n == ns)
            && self.labels.matches(&labels_of(object))
            && self.fields.matches(object)
    }

    /// The versions in `(after, upto]` this watch selects, as events.
    fn changes(&self, f: &KubeFacade, after: u64, upto: u64) -> Vec<(String, Value)> {
        let objects = f.objects.read();
        objects
            .timeline
            .changes(after, upto)
            .filter(|(key, v)| self.selects(key, &v.object))
            .map(|(_, v): (&ObjectKey, &Version)| {
                let ty = match v.change {
                    ChangeType::Added => "ADDED",
                    ChangeType::Modified => "MODIFIED",
                    ChangeType::Deleted => "DELETED",
                };
                (ty.to_string(), (*v.object).clone())
            })
            .collect()
    }

    /// Events as watch lines; the first line of a Table watch carries the columns.
    fn lines(&self, events: &[(String, Value)], clock: &Reading, first: bool) -> Vec<Bytes> {
        events
            .iter()
            .enumerate()
            .map(|(i, (ty, object))| {
                let object = match self.render {
                    Render::Table => table(
                        &self.res,
                        &[Arc::new(object.clone())],
                        &self.params,
                        clock,
                        json!({"resourceVersion": object.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)}),
                        first && i == 0,
                    ),
                    Render::Metadata => partial_metadata(&served(&self.res, object, clock)),
                    Render::Json => served(&self.res, object, clock),
                };
                Bytes::from(format!("{}\n", json!({"type": ty, "object": object})))
            })
            .collect()
    }

    fn bookmark(&self, rv: u64) -> Bytes {
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), rv.to_string().into());
        Bytes::from(format!(
            "{}\n",
            json!({"type": "BOOKMARK", "object": {"kind": self.res.kind, "apiVersion": self.res.api_version(), "metadata": meta}})
        ))
    }
}

/// A watch: the objects as ADDED (from resource version 0 or none), or the changes since the given
/// resource version; then, for a live cluster, every change as it happens, and bookmarks (if asked
/// for) until the timeout. A recording does not move, so nothing else ever arrives there.
pub fn watch(
    f: &Arc<KubeFacade>,
    res: &Resource,
    namespace: Option<&str>,
    params: &Params,
    accept: &str,
) -> Response {
    let clock = f.clock.read();
    let (selected, current) = {
        let objects = f.objects.read();
        match select(&objects.state, res, namespace, params) {
            Ok(items) => (items, objects.state.resource_version),
            Err(e) => return e,
        }
    };
    let from = match params.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(rv) => match rv.parse::<u64>() {
            Ok(n) if n <= current => Some(n),
            Ok(_) => return status::gone(format!("too old resource version: {rv} ({current})")),
            // Not a version at all: the apiserver's 400, not a 410 that tells a client to relist.
            Err(_) => {
                return status::bad_request(format!(
                    "resourceVersion: Invalid value: \"{rv}\": must be a non-negative integer"
                ));
            }
        },
    };
    let spec = WatchSpec {
        res: res.clone(),
        namespace: namespace.map(str::to_string),
        // Both parsed by `select` above: they are valid.
        labels: LabelSelector::parse(params.label_selector.as_deref().unwrap_or(""))
            .unwrap_or_default(),
        fields: FieldSelector::parse(params.field_selector.as_deref().unwrap_or(""), &res.kind)
            .unwrap_or_default(),
        render: render(accept),
        params: params.clone(),
    };
    let events: Vec<(String, Value)> = match from {
        None => selected
            .iter()
            .map(|v| ("ADDED".to_string(), (**v).clone()))
            .collect(),
        Some(after) => spec.changes(f, after, current),
    };
    let mut lines = spec.lines(&events, &clock, true);
    let bookmarks = params.allow_bookmarks;
    if bookmarks {
        lines.push(spec.bookmark(current));
    }
    let timeout = Duration::from_secs(params.timeout_seconds.unwrap_or(1800).min(3600));
    let body = if f.clock.is_live() {
        let tail = live_tail(f.clone(), spec, current, !events.is_empty(), timeout);
        Body::from_stream(futures_util::StreamExt::chain(
            futures_util::stream::iter(lines.into_iter().map(Ok)),
            tail,
        ))
    } else {
        let bookmark_line = spec.bookmark(current);
        Body::from_stream(async_stream(
            lines,
            bookmarks.then_some(bookmark_line),
            timeout,
        ))
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// A live watch after its initial lines: each append's selected changes, a bookmark a minute (if
/// asked for), until the timeout.
fn live_tail(
    f: Arc<KubeFacade>,
    spec: WatchSpec,
    from: u64,
    columns_sent: bool,
    timeout: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let changed = f.objects.subscribe();
    let state = (f, spec, changed, from, columns_sent);
    let batches = futures_util::stream::unfold(
        state,
        move |(f, spec, mut changed, seen, sent)| async move {
            let next_bookmark =
                (tokio::time::Instant::now() + Duration::from_secs(60)).min(deadline);
            tokio::select! {
                r = changed.changed() => {
                    if r.is_err() {
                        return None; // the environment stopped
                    }
                    let upto = *changed.borrow_and_update();
                    let events = spec.changes(&f, seen, upto);
                    let lines = spec.lines(&events, &f.clock.read(), !sent);
                    let sent = sent || !events.is_empty();
                    Some((lines, (f, spec, changed, upto, sent)))
                }
                _ = tokio::time::sleep_until(next_bookmark) => {
                    if next_bookmark >= deadline {
                        return None;
                    }
                    let lines = if spec.params.allow_bookmarks { vec![spec.bookmark(seen)] } else { vec![] };
                    Some((lines, (f, spec, changed, seen, sent)))
                }
            }
        },
    );
    futures_util::StreamExt::flat_map(batches, |lines| {
        futures_util::stream::iter(lines.into_iter().map(Ok))
    })
}

/// The initial lines, then a bookmark a minute (if asked for) until the timeout ends the stream.
fn async_stream(
    lines: Vec<Bytes>,
    bookmark: Option<Bytes>,
    timeout: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let initial = futures_util::stream::iter(lines.into_iter().map(Ok));
    let tail = futures_util::stream::unfold((), move |()| {
        let bookmark = bookmark.clone();
        async move {
            let next = (tokio::time::Instant::now() + Duration::from_secs(60)).min(deadline);
            tokio::time::sleep_until(next).await;
            if next >= deadline {
                return None;
            }
            Some((Ok(bookmark.clone().unwrap_or_default()), ()))
        }
    });
    futures_util::StreamExt::chain(initial, tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates_like_the_apiserver() {
        assert_eq!(
            render(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            ),
            Render::Table
        );
        assert_eq!(
            render(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            ),
            Render::Metadata
        );
        assert_eq!(render("application/json"), Render::Json);
        assert_eq!(render(""), Render::Json);
    }

    #[test]
    fn shifts_timestamp_fields_only() {
        let mut v = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z", "name": "2026-01-01T00:00:00Z"},
                           "status": {"containerStatuses": [{"state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]},
                           "eventTime": "2026-01-01T00:00:00.500000000Z"});
        shift_times(&mut v, 3_600_000_000_000);
        assert_eq!(v["metadata"]["creationTimestamp"], "2026-01-01T01:00:00Z");
        assert_eq!(v["metadata"]["name"], "2026-01-01T00:00:00Z");
        assert_eq!(
            v["status"]["containerStatuses"][0]["state"]["running"]["startedAt"],
            "2026-01-01T01:00:00Z"
        );
        assert_eq!(v["eventTime"], "2026-01-01T01:00:00.500000000Z");
    }

    #[test]
    fn continue_tokens_expire_with_the_list() {
        let t = encode_continue(7, 500);
        assert_eq!(decode_continue(&t, 7).unwrap(), 500);
        assert_eq!(
            decode_continue(&t, 8).unwrap_err().status(),
            StatusCode::GONE
        );
        assert_eq!(
            decode_continue("zz", 7).unwrap_err().status(),
            StatusCode::BAD_REQUEST
        );
    }
}
