//! The response body of a metered call on its way from the upstream to the client: chunks pass
//! on as they arrive while a copy is read for usage, which is added to the counter once, when the
//! body ends, fails, or is dropped because the client went away (a cut stream still reports what
//! it had, such as an Anthropic stream's input tokens).
//!
//! One case is changed: when the proxy added `stream_options.include_usage` to a chat or
//! completions request, the upstream sends one extra chunk, with empty `choices` and the usage,
//! before `[DONE]`. That chunk is dropped, so the client receives exactly the events it asked for
//! (the other chunks then carry `"usage": null`, a field every chunk's schema already has). This
//! is why adding the option is safe even for clients that index `choices[0]` of every chunk. To
//! drop one event the stream is passed on event by event: a chunk's complete events go at once and
//! an unfinished event waits for its end, which an SSE client could not act on before anyway.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Bytes;
use futures_util::Stream;

use super::UsageCounter;
use super::usage::{self, Api, SseSplitter, StreamUsage};

/// How much of a JSON body is kept to read its usage; a larger body (embeddings of a big batch)
/// is still passed on whole but counted as unmetered.
const MAX_JSON_COPY: usize = 32 << 20;

pub(super) enum Mode {
    Json {
        copy: Vec<u8>,
        overflow: bool,
    },
    Sse {
        split: SseSplitter,
        usage: StreamUsage,
        drop_usage_chunk: bool,
    },
}

impl Mode {
    pub(super) fn json() -> Self {
        Mode::Json {
            copy: Vec::new(),
            overflow: false,
        }
    }

    pub(super) fn sse(api: Api, drop_usage_chunk: bool) -> Self {
        Mode::Sse {
            split: SseSplitter::default(),
            usage: StreamUsage::new(api),
            drop_usage_chunk,
        }
    }
}

type UpstreamBody = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

pub(super) struct Metered {
    inner: UpstreamBody,
    mode: Mode,
    api: Api,
    /// Taken when the usage has been recorded, so that it is recorded once.
    counter: Option<Arc<UsageCounter>>,
    ended: bool,
}

impl Metered {
    pub(super) fn new(
        inner: UpstreamBody,
        mode: Mode,
        api: Api,
        counter: Arc<UsageCounter>,
    ) -> Self {
        Self {
            inner,
            mode,
            api,
            counter: Some(counter),
            ended: false,
        }
    }

    /// Reads a chunk; returns the bytes to pass on.
    fn observe(&mut self, chunk: Bytes) -> Bytes {
        match &mut self.mode {
            Mode::Json { copy, overflow } => {
                if !*overflow {
                    if copy.len() + chunk.len() > MAX_JSON_COPY {
                        *overflow = true;
                        *copy = Vec::new();
                    } else {
                        copy.extend_from_slice(&chunk);
                    }
                }
                chunk
            }
            Mode::Sse {
                split,
                usage,
                drop_usage_chunk,
            } => {
                let events = split.feed(&chunk);
                if !*drop_usage_chunk {
                    for e in &events {
                        usage.event(&e.data);
                    }
                    return chunk;
                }
                let mut out = Vec::with_capacity(chunk.len());
                for e in events {
                    usage.event(&e.data);
                    if !usage::is_usage_only_chunk(&e.data) {
                        out.extend_from_slice(&e.raw);
                    }
                }
                Bytes::from(out)
            }
        }
    }

    /// Bytes held back when the upstream ended inside an event (only when passing events on).
    fn rest(&mut self) -> Bytes {
        match &mut self.mode {
            Mode::Sse {
                split,
                drop_usage_chunk: true,
                ..
            } => Bytes::from(split.rest()),
            _ => Bytes::new(),
        }
    }

    fn record(&mut self) {
        let Some(counter) = self.counter.take() else {
            return;
        };
        let found = match &self.mode {
            Mode::Json { copy, overflow } => (!*overflow)
                .then(|| usage::from_body(self.api, copy))
                .flatten(),
            Mode::Sse { usage, .. } => usage.usage(),
        };
        counter.record_call(self.api, found);
    }
}

impl Stream for Metered {
    type Item = reqwest::Result<Bytes>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        loop {
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    let out = this.observe(chunk);
                    // A chunk holding only part of an event gives nothing to send yet.
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(out)));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.record();
                    this.ended = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(None) => {
                    this.record();
                    this.ended = true;
                    let rest = this.rest();
                    return Poll::Ready((!rest.is_empty()).then_some(Ok(rest)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.record();
    }
}
