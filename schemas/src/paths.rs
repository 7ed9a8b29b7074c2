//! Names that data files give to other files or directories: a manifest's table files, a run's
//! ground truth, the agent and trial names a judge turns into output directories. Data comes
//! from strangers, so such a name must stay inside the directory it is joined to.

use std::path::{Component, Path};

/// Checks that `name` is one plain path component: not empty, not absolute, no `..` or `.`, no
/// separator. The message says what was expected.
pub fn check_plain_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty; expected a plain name");
    }
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(_)), None) if !name.contains(['/', '\\', '\0']) => Ok(()),
        _ => Err(
            "is not a plain name: absolute paths, `..` and separators are refused (it must \
             stay inside its directory)",
        ),
    }
}

/// An output directory named on a command line (clap's value parser for `--out DIR`): `-` means
/// standard output to Unix tools, never a directory, so it is refused rather than created.
pub fn output_dir(s: &str) -> Result<std::path::PathBuf, String> {
    match s {
        "" => Err("expected a directory".into()),
        "-" => Err("`-` (standard output) cannot hold a directory; name a directory".into()),
        _ => Ok(std::path::PathBuf::from(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_plain_component_passes() {
        for ok in [
            "metrics.parquet",
            "run-1",
            "a.b.c",
            "ground_truth.json",
            "...",
        ] {
            assert_eq!(check_plain_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "..",
            ".",
            "/etc/passwd",
            "../../../../etc/passwd",
            "a/b",
            "a\\b",
            "./x",
            "x/",
        ] {
            assert!(check_plain_name(bad).is_err(), "{bad:?}");
        }
    }
}
