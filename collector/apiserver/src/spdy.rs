//! SPDY/3.1 framing, the server side of what `kubectl port-forward` speaks (tunnelled inside a
//! WebSocket, `SPDY/3.1+portforward.k8s.io`), IO-free: bytes in, frames out, and frames to bytes.
//! Header blocks are zlib streams primed with the protocol's dictionary, one stream per
//! direction for the whole connection, as SPDY/3 requires.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

pub const FLAG_FIN: u8 = 0x01;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// Largest frame payload taken (SPDY's length field allows 16 MiB; nothing here needs more
/// than a small multiple of the data frames kubectl sends).
pub const MAX_FRAME: usize = 1 << 20;
/// Largest decompressed header block.
const MAX_HEADERS: usize = 64 * 1024;

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream_id: u32,
        headers: Vec<(String, String)>,
        fin: bool,
    },
    SynReply {
        stream_id: u32,
        headers: Vec<(String, String)>,
        fin: bool,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    Settings,
    Ping(u32),
    GoAway {
        last_stream_id: u32,
    },
    Headers {
        stream_id: u32,
    },
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    Data {
        stream_id: u32,
        fin: bool,
        payload: Vec<u8>,
    },
}

/// A framing error: the connection cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

/// The SPDY/3 header-compression dictionary: the protocol's words, each with its length, then
/// common values.
fn dictionary() -> Vec<u8> {
    const WORDS: &[&str] = &[
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ];
    const TAIL: &str = "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";
    let mut d = Vec::with_capacity(1500);
    for w in WORDS {
        d.extend_from_slice(&(w.len() as u32).to_be_bytes());
        d.extend_from_slice(w.as_bytes());
    }
    d.extend_from_slice(TAIL.as_bytes());
    d
}

/// One side of a SPDY connection: the bytes received so far and both header-compression
/// contexts.
pub struct Codec {
    buf: Vec<u8>,
    inflate: Decompress,
    deflate: Compress,
    dictionary: Vec<u8>,
}

impl Default for Codec {
    fn default() -> Self {
        Codec::new()
    }
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

impl Codec {
    pub fn new() -> Codec {
        let dictionary = dictionary();
        let mut deflate = Compress::new(Compression::default(), true);
        // The peer inflates with the same dictionary; priming ours makes the blocks smaller.
        let _ = deflate.set_dictionary(&dictionary);
        Codec {
            buf: vec![],
            inflate: Decompress::new(true),
            deflate,
            dictionary,
        }
    }

    /// Bytes from the peer.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame received, if any.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, Error> {
        if self.buf.len() < 8 {
            return Ok(None);
        }
        let len = (u32_at(&self.buf, 4) & 0x00ff_ffff) as usize;
        if len > MAX_FRAME {
            return Err(Error(format!("frame of {len} bytes")));
        }
        if self.buf.len() < 8 + len {
            return Ok(None);
        }
        let frame: Vec<u8> = self.buf.drain(..8 + len).collect();
        let flags = frame[4];
        let body = &frame[8..];
        if frame[0] & 0x80 == 0 {
            return Ok(Some(Frame::Data {
                stream_id: u32_at(&frame, 0) & 0x7fff_ffff,
                fin: flags & FLAG_FIN != 0,
                payload: body.to_vec(),
            }));
        }
        let version = u16::from_be_bytes([frame[0] & 0x7f, frame[1]]);
        if version != 3 {
            return Err(Error(format!("SPDY version {version}")));
        }
        let kind = u16::from_be_bytes([frame[2], frame[3]]);
        let need = |n: usize| {
            if body.len() < n {
                Err(Error(format!(
                    "control frame {kind} of {} bytes",
                    body.len()
                )))
            } else {
                Ok(())
            }
        };
        let fin = flags & FLAG_FIN != 0;
        Ok(Some(match kind {
            SYN_STREAM => {
                need(10)?;
                Frame::SynStream {
                    stream_id: u32_at(body, 0) & 0x7fff_ffff,
                    headers: self.headers(&body[10..])?,
                    fin,
                }
            }
            SYN_REPLY => {
                need(4)?;
                Frame::SynReply {
                    stream_id: u32_at(body, 0) & 0x7fff_ffff,
                    headers: self.headers(&body[4..])?,
                    fin,
                }
            }
            RST_STREAM => {
                need(8)?;
                Frame::RstStream {
                    stream_id: u32_at(body, 0) & 0x7fff_ffff,
                    status: u32_at(body, 4),
                }
            }
            PING => {
                need(4)?;
                Frame::Ping(u32_at(body, 0))
            }
            GOAWAY => {
                need(4)?;
                Frame::GoAway {
                    last_stream_id: u32_at(body, 0) & 0x7fff_ffff,
                }
            }
            HEADERS => {
                need(4)?;
                // Decompressed to keep the shared zlib stream in step; nothing here uses them.
                let stream_id = u32_at(body, 0) & 0x7fff_ffff;
                self.headers(&body[4..])?;
                Frame::Headers { stream_id }
            }
            WINDOW_UPDATE => {
                need(8)?;
                Frame::WindowUpdate {
                    stream_id: u32_at(body, 0) & 0x7fff_ffff,
                    delta: u32_at(body, 4) & 0x7fff_ffff,
                }
            }
            SETTINGS => Frame::Settings,
            other => return Err(Error(format!("unknown control frame type {other}"))),
        }))
    }

    /// A header block: inflated (the dictionary supplied when the stream asks for it), then
    /// (name, value) pairs; names are lowercase on the wire.
    fn headers(&mut self, block: &[u8]) -> Result<Vec<(String, String)>, Error> {
        let mut out = Vec::with_capacity(256);
        let mut input = block;
        loop {
            let before_in = self.inflate.total_in();
            out.reserve(1024);
            let status = self
                .inflate
                .decompress_vec(input, &mut out, FlushDecompress::Sync);
            let used = (self.inflate.total_in() - before_in) as usize;
            input = &input[used.min(input.len())..];
            match status {
                Ok(Status::Ok | Status::BufError)
                    if input.is_empty() && out.len() < out.capacity() =>
                {
                    break;
                }
                Ok(Status::StreamEnd) => break,
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(&self.dictionary)
                        .map_err(|e| Error(format!("header dictionary: {e}")))?;
                }
                Err(e) => return Err(Error(format!("header block: {e}"))),
            }
            if out.len() > MAX_HEADERS {
                return Err(Error("header block too large".into()));
            }
        }
        parse_pairs(&out)
    }

    /// A frame as bytes.
    pub fn encode(&mut self, frame: &Frame) -> Vec<u8> {
        let control = |kind: u16, flags: u8, body: Vec<u8>| {
            let mut f = Vec::with_capacity(8 + body.len());
            f.extend_from_slice(&(0x8003u16).to_be_bytes());
            f.extend_from_slice(&kind.to_be_bytes());
            f.extend_from_slice(&((u32::from(flags) << 24) | body.len() as u32).to_be_bytes());
            f.extend(body);
            f
        };
        let fin_flag = |fin: bool| if fin { FLAG_FIN } else { 0 };
        match frame {
            Frame::SynStream {
                stream_id,
                headers,
                fin,
            } => {
                let mut body = stream_id.to_be_bytes().to_vec();
                body.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
                body.extend(self.compress(headers));
                control(SYN_STREAM, fin_flag(*fin), body)
            }
            Frame::SynReply {
                stream_id,
                headers,
                fin,
            } => {
                let mut body = stream_id.to_be_bytes().to_vec();
                body.extend(self.compress(headers));
                control(SYN_REPLY, fin_flag(*fin), body)
            }
            Frame::RstStream { stream_id, status } => {
                let mut body = stream_id.to_be_bytes().to_vec();
                body.extend_from_slice(&status.to_be_bytes());
                control(RST_STREAM, 0, body)
            }
            Frame::Settings => control(SETTINGS, 0, 0u32.to_be_bytes().to_vec()),
            Frame::Ping(id) => control(PING, 0, id.to_be_bytes().to_vec()),
            Frame::GoAway { last_stream_id } => {
                let mut body = last_stream_id.to_be_bytes().to_vec();
                body.extend_from_slice(&0u32.to_be_bytes());
                control(GOAWAY, 0, body)
            }
            Frame::Headers { stream_id } => {
                let mut body = stream_id.to_be_bytes().to_vec();
                body.extend(self.compress(&[]));
                control(HEADERS, 0, body)
            }
            Frame::WindowUpdate { stream_id, delta } => {
                let mut body = stream_id.to_be_bytes().to_vec();
                body.extend_from_slice(&delta.to_be_bytes());
                control(WINDOW_UPDATE, 0, body)
            }
            Frame::Data {
                stream_id,
                fin,
                payload,
            } => {
                let mut f = Vec::with_capacity(8 + payload.len());
                f.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
                f.extend_from_slice(
                    &((u32::from(fin_flag(*fin)) << 24) | payload.len() as u32).to_be_bytes(),
                );
                f.extend_from_slice(payload);
                f
            }
        }
    }

    fn compress(&mut self, headers: &[(String, String)]) -> Vec<u8> {
        let mut raw = (headers.len() as u32).to_be_bytes().to_vec();
        for (k, v) in headers {
            raw.extend_from_slice(&(k.len() as u32).to_be_bytes());
            raw.extend_from_slice(k.to_lowercase().as_bytes());
            raw.extend_from_slice(&(v.len() as u32).to_be_bytes());
            raw.extend_from_slice(v.as_bytes());
        }
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut input = raw.as_slice();
        loop {
            out.reserve(256);
            let before = self.deflate.total_in();
            let _ = self
                .deflate
                .compress_vec(input, &mut out, FlushCompress::Sync);
            let used = (self.deflate.total_in() - before) as usize;
            input = &input[used..];
            // Done once all input is in and the flush left room unused.
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
        }
        out
    }
}

/// (name, value) pairs of an inflated header block; values holding NULs are several values.
fn parse_pairs(b: &[u8]) -> Result<Vec<(String, String)>, Error> {
    let short = || Error("truncated header block".into());
    if b.len() < 4 {
        return Err(short());
    }
    let n = u32_at(b, 0) as usize;
    let mut i = 4;
    let mut out = vec![];
    for _ in 0..n.min(1024) {
        let mut field = || -> Result<String, Error> {
            if b.len() < i + 4 {
                return Err(short());
            }
            let len = u32_at(b, i) as usize;
            i += 4;
            let end = i
                .checked_add(len)
                .filter(|e| *e <= b.len())
                .ok_or_else(short)?;
            let s = String::from_utf8_lossy(&b[i..end]).into_owned();
            i = end;
            Ok(s)
        };
        let k = field()?;
        let v = field()?;
        for value in v.split('\0') {
            out.push((k.clone(), value.to_string()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_the_protocols() {
        let d = dictionary();
        assert_eq!(&d[..11], b"\0\0\0\x07options");
        assert!(d.ends_with(b"enq=0."));
        assert_eq!(d.len(), 1423);
    }

    #[test]
    fn frames_round_trip_between_two_codecs() {
        let (mut a, mut b) = (Codec::new(), Codec::new());
        let frames = [
            Frame::SynStream {
                stream_id: 1,
                headers: vec![
                    ("streamtype".into(), "error".into()),
                    ("port".into(), "8080".into()),
                    ("requestid".into(), "0".into()),
                ],
                fin: false,
            },
            Frame::SynStream {
                stream_id: 3,
                headers: vec![("streamtype".into(), "data".into())],
                fin: false,
            },
            Frame::Data {
                stream_id: 3,
                fin: true,
                payload: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            },
            Frame::Ping(7),
            Frame::WindowUpdate {
                stream_id: 3,
                delta: 65536,
            },
            Frame::RstStream {
                stream_id: 1,
                status: 5,
            },
            Frame::GoAway { last_stream_id: 3 },
        ];
        let mut wire = vec![];
        for f in &frames {
            wire.extend(a.encode(f));
        }
        // Bytes arrive in arbitrary pieces, as WebSocket messages split them.
        for piece in wire.chunks(5) {
            b.feed(piece);
        }
        for f in &frames {
            assert_eq!(b.next_frame().unwrap().as_ref(), Some(f));
        }
        assert_eq!(b.next_frame().unwrap(), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut c = Codec::new();
        c.feed(&[
            0x80, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0c, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 2,
        ]);
        assert!(c.next_frame().is_err());
        let mut c = Codec::new();
        c.feed(&[0x80, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00]);
        assert!(c.next_frame().is_err());
        let mut c = Codec::new();
        c.feed(&[0x80, 0x03, 0x00, 0x01, 0x00, 0xff, 0xff, 0xff]);
        assert!(c.next_frame().is_err());
    }
}
