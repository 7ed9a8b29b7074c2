//! Calls between services, from the spans table: a span calls the services of its child spans; a
//! client or producer span without a child calls the service its peer attributes name (a call
//! that never reached its server). The spans are read on their own here, only the columns this
//! needs, as borrowed text: the topology is asked for without the trace tools' spans.

use std::collections::BTreeMap;

use polars::prelude::*;
use schemas::tables::Table;
use schemas::tables::columns::spans as c;

use crate::frame::{collect, each_map};
use crate::traces::{link_attributes, peer_service};
use crate::{Result, Source};

/// Calls being counted: (caller, callee) → (the first calling span that names a protocol, that
/// protocol's number; spans).
type Pairs<'a> = PlHashMap<(&'a str, &'a str), (Option<(usize, usize)>, u64)>;

/// The columns of the spans that calls are made of, row by row.
struct Spans<'a> {
    traces: Vec<&'a str>,
    ids: Vec<&'a str>,
    parents: Vec<&'a str>,
    services: Vec<&'a str>,
    kinds: Vec<&'a str>,
    /// The service each span's peer attributes name.
    peers: Vec<Option<String>>,
    /// The number (in `protocols`) of the protocol each span's attributes name.
    protocol: Vec<Option<usize>>,
    protocols: Vec<String>,
}

impl Spans<'_> {
    /// Counts a call of `callee` by the span `from` (a service calling itself is no call).
    fn add<'a>(&'a self, pairs: &mut Pairs<'a>, from: usize, callee: &'a str) {
        let caller = self.services[from];
        if callee == caller {
            return;
        }
        let entry = pairs.entry((caller, callee)).or_default();
        entry.1 += 1;
        if let Some(p) = self.protocol[from]
            && entry.0.is_none_or(|(first, _)| from < first)
        {
            entry.0 = Some((from, p));
        }
    }
}

/// Calls between services seen in traces: (caller, callee) → (protocol, spans). The protocol
/// is the one the first calling span (in table order) names.
pub fn calls(source: &Source) -> Result<BTreeMap<(String, String), (String, u64)>> {
    let df = collect(source.scan(Table::Spans)?.select([
        col(c::TRACE_ID),
        col(c::SPAN_ID),
        col(c::PARENT_SPAN_ID),
        col(c::SERVICE),
        col(c::KIND),
        col(c::ATTRIBUTES),
    ]))?;
    let text = |name: &str| -> Result<Vec<&str>> {
        let column = df.column(name)?.str()?;
        Ok(column.iter().map(Option::unwrap_or_default).collect())
    };
    let mut spans = Spans {
        traces: text(c::TRACE_ID)?,
        ids: text(c::SPAN_ID)?,
        parents: text(c::PARENT_SPAN_ID)?,
        services: text(c::SERVICE)?,
        kinds: text(c::KIND)?,
        peers: Vec::with_capacity(df.height()),
        protocol: Vec::with_capacity(df.height()),
        protocols: Vec::new(),
    };
    each_map(&df, c::ATTRIBUTES, |attributes, _| {
        let (peer, protocol) = link_attributes(attributes);
        spans.peers.push(peer.and_then(peer_service));
        let number = protocol.filter(|p| !p.is_empty()).map(|p| {
            match spans.protocols.iter().position(|known| known == p) {
                Some(n) => n,
                None => {
                    spans.protocols.push(p.to_string());
                    spans.protocols.len() - 1
                }
            }
        });
        spans.protocol.push(number);
    })?;
    let spans = spans;
    let by_id: PlHashMap<(&str, &str), usize> = (0..spans.ids.len())
        .map(|i| ((spans.traces[i], spans.ids[i]), i))
        .collect();
    let mut pairs: Pairs = PlHashMap::default();
    let mut has_child = vec![false; spans.ids.len()];
    for child in 0..spans.ids.len() {
        let parent = Some(spans.parents[child]).filter(|p| !p.is_empty());
        if let Some(&p) = parent.and_then(|p| by_id.get(&(spans.traces[child], p))) {
            has_child[p] = true;
            spans.add(&mut pairs, p, spans.services[child]);
        }
    }
    for (i, peer) in spans.peers.iter().enumerate() {
        let kind = spans.kinds[i];
        let calls_out =
            kind.eq_ignore_ascii_case("client") || kind.eq_ignore_ascii_case("producer");
        if !has_child[i]
            && calls_out
            && let Some(peer) = peer
        {
            spans.add(&mut pairs, i, peer);
        }
    }
    Ok(pairs
        .into_iter()
        .map(|((from, to), (protocol, n))| {
            let protocol = protocol.map_or(String::new(), |(_, p)| spans.protocols[p].clone());
            ((from.to_string(), to.to_string()), (protocol, n))
        })
        .collect())
}
