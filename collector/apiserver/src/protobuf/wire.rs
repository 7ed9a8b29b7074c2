//! The protobuf wire format, read without trusting it: a message's bytes in, its fields out
//! (number and raw value), or a message saying at which byte and why the bytes are not protobuf.
//! Nothing here knows what a field means; `json.rs` gives them meaning from the schema.

/// One field as it sits on the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl Wire<'_> {
    /// The wire type's name, for errors that say what was found instead of what was expected.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Wire::Varint(_) => "a varint",
            Wire::Fixed64(_) => "a 64-bit value",
            Wire::Bytes(_) => "a length-delimited value",
            Wire::Fixed32(_) => "a 32-bit value",
        }
    }
}

/// A cursor over one message's bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// A base-128 varint; at most ten bytes, as a u64 holds no more.
    pub(crate) fn varint(&mut self) -> Result<u64, String> {
        let start = self.pos;
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(format!("truncated varint at byte {start}"));
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(format!("varint at byte {start} overflows 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(format!("varint at byte {start} is longer than 10 bytes"))
    }

    /// The next `n` bytes, or an error saying how many `what` wanted and how many remain.
    fn take(&mut self, n: usize, what: impl FnOnce() -> String) -> Result<&'a [u8], String> {
        let start = self.pos;
        let remain = self.buf.len().saturating_sub(start);
        let Some(bytes) = start
            .checked_add(n)
            .and_then(|end| self.buf.get(start..end))
        else {
            return Err(format!(
                "{} needs {n} bytes but only {remain} remain",
                what()
            ));
        };
        self.pos += n;
        Ok(bytes)
    }

    /// A little-endian 32-bit value (packed fixed32, sfixed32, float).
    pub(crate) fn fixed32(&mut self) -> Result<u32, String> {
        let at = self.pos;
        self.take(4, || format!("32-bit value at byte {at}"))
            .map(|b| u32::from_le_bytes(to_array(b)))
    }

    /// A little-endian 64-bit value (packed fixed64, sfixed64, double).
    pub(crate) fn fixed64(&mut self) -> Result<u64, String> {
        let at = self.pos;
        self.take(8, || format!("64-bit value at byte {at}"))
            .map(|b| u64::from_le_bytes(to_array(b)))
    }

    /// The next field, or `None` at the end of the message.
    pub(crate) fn field(&mut self) -> Result<Option<(u32, Wire<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let at = self.pos;
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| (1..=536_870_911).contains(n))
            .ok_or_else(|| format!("invalid field number {} at byte {at}", key >> 3))?;
        let value = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => Wire::Fixed64(self.fixed64()?),
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                Wire::Bytes(self.take(len, || format!("field {number} at byte {at}"))?)
            }
            5 => Wire::Fixed32(self.fixed32()?),
            other => {
                return Err(format!(
                    "field {number} at byte {at} has wire type {other}, which Kubernetes protobuf never uses"
                ));
            }
        };
        Ok(Some((number, value)))
    }

    /// Every field of the message, in wire order.
    pub(crate) fn all(buf: &'a [u8]) -> Result<Vec<(u32, Wire<'a>)>, String> {
        let mut reader = Reader::new(buf);
        let mut out = Vec::new();
        while let Some(field) = reader.field()? {
            out.push(field);
        }
        Ok(out)
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

/// `take` has already checked the length; a short slice still yields zeros, never a panic.
fn to_array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = *b;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_wire_type() {
        // 1: varint 150; 2: bytes "hi"; 3: fixed32 1; 4: fixed64 2
        let buf = [
            0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 0, 0, 0, 0x21, 2, 0, 0, 0, 0, 0, 0,
            0,
        ];
        let fields = Reader::all(&buf).unwrap();
        assert_eq!(
            fields,
            vec![
                (1, Wire::Varint(150)),
                (2, Wire::Bytes(b"hi")),
                (3, Wire::Fixed32(1)),
                (4, Wire::Fixed64(2)),
            ]
        );
    }

    #[test]
    fn malformed_wire_is_an_error_naming_the_byte() {
        let cases: [(&[u8], &str); 6] = [
            (&[0x08, 0x96], "truncated varint at byte 1"),
            (
                &[
                    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
                ],
                "overflows 64 bits",
            ),
            (
                &[0x12, 0x05, b'a'],
                "field 2 at byte 0 needs 5 bytes but only 1 remain",
            ),
            (
                &[
                    0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                ],
                "needs",
            ),
            (&[0x0b], "wire type 3"),
            (&[0x00, 0x01], "invalid field number 0"),
        ];
        for (buf, want) in cases {
            let err = Reader::all(buf).unwrap_err();
            assert!(err.contains(want), "{buf:?}: {err}");
        }
    }
}
