//! Errno names as users and the catalog write them (`ECONNREFUSED`), and the Linux numbers the BPF
//! programs return.

use std::fmt;

/// A Linux errno a faulted call fails with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(u32);

/// The errnos faults are made of, with their Linux numbers (the same on x86_64 and arm64).
const NAMES: [(&str, u32); 31] = [
    ("EPERM", 1),
    ("ENOENT", 2),
    ("EINTR", 4),
    ("EIO", 5),
    ("EBADF", 9),
    ("EAGAIN", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EBUSY", 16),
    ("EEXIST", 17),
    ("ENFILE", 23),
    ("EMFILE", 24),
    ("ENOSPC", 28),
    ("EROFS", 30),
    ("EPIPE", 32),
    ("EPROTONOSUPPORT", 93),
    ("EAFNOSUPPORT", 97),
    ("EADDRINUSE", 98),
    ("EADDRNOTAVAIL", 99),
    ("ENETDOWN", 100),
    ("ENETUNREACH", 101),
    ("ECONNABORTED", 103),
    ("ECONNRESET", 104),
    ("ENOBUFS", 105),
    ("ETIMEDOUT", 110),
    ("ECONNREFUSED", 111),
    ("EHOSTDOWN", 112),
    ("EHOSTUNREACH", 113),
    ("EDQUOT", 122),
    ("ENOTCONN", 107),
    ("EMSGSIZE", 90),
];

impl Errno {
    pub const EIO: Errno = Errno(5);
    pub const ECONNREFUSED: Errno = Errno(111);

    /// Parses a name (`ECONNREFUSED`, any case) or a number from 1 to 4095.
    pub fn parse(text: &str) -> Result<Errno, String> {
        let upper = text.trim().to_ascii_uppercase();
        if let Some((_, n)) = NAMES.iter().find(|(name, _)| *name == upper) {
            return Ok(Errno(*n));
        }
        match upper.parse::<u32>() {
            Ok(n) if (1..4096).contains(&n) => Ok(Errno(n)),
            _ => Err(format!(
                "unknown errno `{text}`: expected a name such as ECONNREFUSED, EIO, EMFILE, \
                 ETIMEDOUT, or a number from 1 to 4095 (known names: {})",
                NAMES.map(|(name, _)| name).join(", ")
            )),
        }
    }

    pub fn number(self) -> u32 {
        self.0
    }

    /// The name, when it is one of the known ones.
    pub fn name(self) -> Option<&'static str> {
        NAMES
            .iter()
            .find(|(_, n)| *n == self.0)
            .map(|(name, _)| *name)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "errno {}", self.0),
        }
    }
}

impl serde::Serialize for Errno {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_errors() {
        assert_eq!(Errno::parse("econnrefused").unwrap().number(), 111);
        assert_eq!(Errno::parse("EIO").unwrap(), Errno::EIO);
        assert_eq!(Errno::parse("24").unwrap().to_string(), "EMFILE");
        assert_eq!(Errno::parse("4000").unwrap().to_string(), "errno 4000");
        let err = Errno::parse("EAI_AGAIN").unwrap_err();
        assert!(err.contains("unknown errno `EAI_AGAIN`"), "{err}");
        assert!(Errno::parse("0").is_err());
    }
}
