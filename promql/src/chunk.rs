//! Compressed sample chunks: delta-of-delta timestamps and XOR'd values, byte-aligned.
//!
//! A chunk holds up to [`CHUNK_SAMPLES`] samples. The first is stored as a zigzag varint time
//! and 8 raw value bytes; each next one as a control byte (bit 7: the timestamp's delta-of-delta
//! is zero, as on a regular scrape; bits 4–6: trailing zero bytes of the value XOR the previous
//! value; bits 0–3: its meaningful bytes, 0 = value unchanged), then the zigzag varint
//! delta-of-delta unless bit 7 said it is zero, then the meaningful bytes. An unchanged value on
//! a regular scrape takes one byte; typical monitoring data 1–5 bytes a sample instead of 16.

/// Samples per chunk: small enough that finding one sample decodes little.
pub const CHUNK_SAMPLES: usize = 120;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends samples to one open chunk.
#[derive(Clone, Debug, Default)]
pub struct ChunkEncoder {
    n: usize,
    prev_t: i64,
    prev_delta: i64,
    prev_bits: u64,
}

impl ChunkEncoder {
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn is_full(&self) -> bool {
        self.n >= CHUNK_SAMPLES
    }

    pub fn push(&mut self, out: &mut Vec<u8>, t: i64, v: f64) {
        let bits = v.to_bits();
        if self.n == 0 {
            put_varint(out, zigzag(t));
            out.extend_from_slice(&bits.to_le_bytes());
        } else {
            let delta = t.wrapping_sub(self.prev_t);
            let dod = delta.wrapping_sub(self.prev_delta);
            self.prev_delta = delta;
            let x = bits ^ self.prev_bits;
            let (trail, n) = if x == 0 {
                (0, 0)
            } else {
                let lead = (x.leading_zeros() / 8) as usize;
                let trail = (x.trailing_zeros() / 8) as usize;
                (trail, 8 - lead - trail)
            };
            let regular = if dod == 0 { 0x80 } else { 0 };
            out.push(regular | ((trail as u8) << 4) | n as u8);
            if dod != 0 {
                put_varint(out, zigzag(dod));
            }
            out.extend_from_slice(&(x >> (trail * 8)).to_le_bytes()[..n]);
        }
        self.prev_t = t;
        self.prev_bits = bits;
        self.n += 1;
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let x = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(x)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let x = self.byte()?;
            v |= u64::from(x & 0x7f) << shift;
            if x < 0x80 {
                return Some(v);
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }

    fn bytes(&mut self, n: usize) -> Option<u64> {
        let s = self.b.get(self.pos..self.pos + n)?;
        self.pos += n;
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(s);
        Some(u64::from_le_bytes(buf))
    }
}

/// Decodes a chunk of `n` samples, appending to `ts` and `vals`. Returns `None` (having
/// appended what it could) if the bytes are truncated, which only a bug can cause.
pub fn decode(bytes: &[u8], n: usize, ts: &mut Vec<i64>, vals: &mut Vec<f64>) -> Option<()> {
    if n == 0 {
        return Some(());
    }
    let mut r = Reader { b: bytes, pos: 0 };
    let mut t = unzigzag(r.varint()?);
    let mut bits = r.bytes(8)?;
    ts.push(t);
    vals.push(f64::from_bits(bits));
    let mut delta = 0i64;
    for _ in 1..n {
        let ctl = r.byte()?;
        if ctl & 0x80 == 0 {
            delta = delta.wrapping_add(unzigzag(r.varint()?));
        }
        t = t.wrapping_add(delta);
        let trail = ((ctl >> 4) & 0x07) as usize;
        let len = (ctl & 0x0f) as usize;
        if len + trail > 8 {
            return None;
        }
        if len > 0 {
            bits ^= r.bytes(len)? << (trail * 8);
        }
        ts.push(t);
        vals.push(f64::from_bits(bits));
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_awkward_values() {
        let pts: Vec<(i64, f64)> = vec![
            (-5_000, 1.0),
            (10_113, 1.0),
            (25_120, 2.5),
            (40_098, f64::NAN),
            (40_099, crate::storage::stale_nan()),
            (1_700_000_000_000, f64::NEG_INFINITY),
            (1_700_000_015_000, -0.0),
            (1_700_000_030_000, 123_456_789.123),
        ];
        let mut enc = ChunkEncoder::default();
        let mut bytes = Vec::new();
        for &(t, v) in &pts {
            enc.push(&mut bytes, t, v);
        }
        let (mut ts, mut vals) = (Vec::new(), Vec::new());
        decode(&bytes, pts.len(), &mut ts, &mut vals).unwrap();
        assert_eq!(ts, pts.iter().map(|p| p.0).collect::<Vec<_>>());
        let bits: Vec<u64> = vals.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, pts.iter().map(|p| p.1.to_bits()).collect::<Vec<_>>());
        assert!(decode(&bytes[..bytes.len() - 1], pts.len(), &mut ts, &mut vals).is_none());
    }

    #[test]
    fn regular_scrapes_compress() {
        let mut enc = ChunkEncoder::default();
        let mut bytes = Vec::new();
        let mut v = 1000.0;
        for k in 0..CHUNK_SAMPLES as i64 {
            v += 17.0;
            enc.push(&mut bytes, 1_700_000_000_000 + k * 15_000 + (k % 3), v);
        }
        // 16 bytes a sample uncompressed; a counter on a 15 s scrape needs far less.
        assert!(bytes.len() < CHUNK_SAMPLES * 5, "{} bytes", bytes.len());
    }

    #[test]
    fn constant_value_on_regular_scrape_is_one_byte() {
        let mut enc = ChunkEncoder::default();
        let mut bytes = Vec::new();
        for k in 0..CHUNK_SAMPLES as i64 {
            enc.push(&mut bytes, 1_700_000_000_000 + k * 15_000, 1.0);
        }
        // First sample 6+8 bytes, second carries the first delta, then one byte each.
        assert_eq!(bytes.len(), 6 + 8 + 1 + 3 + (CHUNK_SAMPLES - 2));
        let (mut ts, mut vals) = (Vec::new(), Vec::new());
        decode(&bytes, CHUNK_SAMPLES, &mut ts, &mut vals).unwrap();
        assert_eq!(
            ts[CHUNK_SAMPLES - 1],
            1_700_000_000_000 + (CHUNK_SAMPLES as i64 - 1) * 15_000
        );
        assert!(vals.iter().all(|v| *v == 1.0));
    }
}
