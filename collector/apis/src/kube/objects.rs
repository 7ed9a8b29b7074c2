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
fn served(res: &Resource, object: &Value, clock: &Reading) -> Value {
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
fn select(
    f: &KubeFacade,
    res: &Resource,
    namespace: Option<&str>,
    params: &Params,
) -> Result<Vec<Arc<Value>>, Response> {
    let labels = LabelSelector::parse(params.label_selector.as_deref().unwrap_or(""))
        .map_err(status::bad_request)?;
    let fields = FieldSelector::parse(params.field_selector.as_deref().unwrap_or(""), &res.kind)
        .map_err(status::bad_request)?;
    Ok(objects_of(f, res)
        .filter(|((ns, _), _)| namespace.is_none_or(|n| n == ns))
        .map(|(_, v)| v)
        .filter(|v| labels.matches(&labels_of(v)) && fields.matches(v))
        .cloned()
        .collect())
}

/// Objects of a resource. events.k8s.io Events are the core Events in their newer shape.
fn objects_of<'a>(
    f: &'a KubeFacade,
    res: &Resource,
) -> impl Iterator<Item = (&'a (String, String), &'a Arc<Value>)> + 'a {
    let key = if res.group == "events.k8s.io" {
        ("v1".to_string(), "Event".to_string())
    } else {
        (res.api_version(), res.kind.clone())
    };
    f.state.kinds.get(&key).into_iter().flatten()
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
    let items = match select(f, res, namespace, params) {
        Ok(items) => items,
        Err(e) => return e,
    };
    let rv = f.state.resource_version;
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

pub fn get(
    f: &KubeFacade,
    res: &Resource,
    namespace: Option<&str>,
    name: &str,
    params: &Params,
    accept: &str,
) -> Response {
    let clock = f.clock.read();
    let ns = namespace.unwrap_or("");
    let Some(object) = objects_of(f, res)
        .find(|((n, nm), _)| n == ns && nm == name)
        .map(|(_, v)| v.clone())
    else {
        return status::not_found(&res.plural, name);
    };
    let body = match render(accept) {
        Render::Table => table(
            res,
            &[object],
            params,
            &clock,
            json!({"resourceVersion": f.state.resource_version.to_string()}),
            true,
        ),
        Render::Metadata => partial_metadata(&served(res, &object, &clock)),
        Render::Json => served(res, &object, &clock),
    };
    json_response(StatusCode::OK, &body)
}

/// A watch: the objects as ADDED (from resource version 0 or none), or the changes since the given
/// resource version, then bookmarks until the timeout. The recording does not move, so nothing else
/// ever arrives.
pub fn watch(
    f: &Arc<KubeFacade>,
    res: &Resource,
    namespace: Option<&str>,
    params: &Params,
    accept: &str,
) -> Response {
    let clock = f.clock.read();
    let current = f.state.resource_version;
    let selected = match select(f, res, namespace, params) {
        Ok(items) => items,
        Err(e) => return e,
    };
    let from = match params.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(rv) => match rv.parse::<u64>() {
            Ok(n) if n <= current => Some(n),
            _ => return status::gone(format!("too old resource version: {rv} ({current})")),
        },
    };
    let render_mode = render(accept);
    let mut events: Vec<(String, Value)> = Vec::new();
    match from {
        None => {
            for v in &selected {
                events.push(("ADDED".into(), (**v).clone()));
            }
        }
        Some(after) => {
            let labels = LabelSelector::parse(params.label_selector.as_deref().unwrap_or(""))
                .unwrap_or_default();
            let fields =
                FieldSelector::parse(params.field_selector.as_deref().unwrap_or(""), &res.kind)
                    .unwrap_or_default();
            for ((api, kind, ns, _), version) in f.timeline.changes(after, current) {
                let same_kind = (api, kind) == (&res.api_version(), &res.kind)
                    || (res.group == "events.k8s.io" && kind == "Event");
                let object = &version.object;
                if !same_kind
                    || namespace.is_some_and(|n| n != ns)
                    || !(labels.matches(&labels_of(object)) && fields.matches(object))
                {
                    continue;
                }
                let ty = match version.change {
                    ChangeType::Added => "ADDED",
                    ChangeType::Modified => "MODIFIED",
                    ChangeType::Deleted => "DELETED",
                };
                events.push((ty.into(), (**object).clone()));
            }
        }
    }
    let mut lines: Vec<Bytes> = Vec::new();
    for (i, (ty, object)) in events.iter().enumerate() {
        let object = match render_mode {
            Render::Table => table(
                res,
                &[Arc::new(object.clone())],
                params,
                &clock,
                json!({"resourceVersion": object.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)}),
                i == 0,
            ),
            Render::Metadata => partial_metadata(&served(res, object, &clock)),
            Render::Json => served(res, object, &clock),
        };
        lines.push(Bytes::from(format!(
            "{}\n",
            json!({"type": ty, "object": object})
        )));
    }
    let bookmark = |kind: &str, api: &str| {
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), current.to_string().into());
        Bytes::from(format!(
            "{}\n",
            json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api, "metadata": meta}})
        ))
    };
    let bookmarks = params.allow_bookmarks;
    let bookmark_line = bookmark(&res.kind, &res.api_version());
    if bookmarks {
        lines.push(bookmark_line.clone());
    }
    let timeout = Duration::from_secs(params.timeout_seconds.unwrap_or(1800).min(3600));
    let stream = async_stream(lines, bookmarks.then_some(bookmark_line), timeout);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
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
