//! The catalog: applications, noise profiles and problems loaded from spec files, either the
//! built-in ones embedded in the binary or a user directory laid out the same way
//! (`apps/*.toml`, `noise/*.toml`, `problems/*.toml`).

use std::fmt;
use std::path::Path;

use crate::app::AppSpec;
use crate::noise::NoiseProfile;
use crate::problem::ProblemSpec;
use crate::source::{Diagnostic, Located, SourceFile};
use crate::validate;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/catalog_files.rs"));
}

/// Where built-in spec files are reported from (their path in the repository).
pub const BUILTIN_ROOT: &str = "problems/catalog";

/// What kind of spec a file holds, from the directory it sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecKind {
    App,
    Noise,
    Problem,
}

impl SpecKind {
    fn of_dir(dir: &str) -> Option<Self> {
        match dir {
            "apps" => Some(SpecKind::App),
            "noise" => Some(SpecKind::Noise),
            "problems" => Some(SpecKind::Problem),
            _ => None,
        }
    }
}

/// Loading or validating specs failed; every diagnostic found is listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.diagnostics.len();
        writeln!(
            f,
            "{n} error{} in the problem specs:",
            if n == 1 { "" } else { "s" }
        )?;
        for d in &self.diagnostics {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CatalogError {}

/// Applications, noise profiles and problems, validated together.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    apps: Vec<Located<AppSpec>>,
    noise: Vec<Located<NoiseProfile>>,
    problems: Vec<Located<ProblemSpec>>,
}

impl Catalog {
    /// The catalog embedded in the binary.
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::from_files(builtin_files())
    }

    /// The built-in catalog with a user directory laid over it: a spec in `dir` with the same
    /// name or id as a built-in one replaces it.
    pub fn builtin_with_dir(dir: &Path) -> Result<Catalog, CatalogError> {
        let user = read_dir_files(dir)?;
        let mut files: Vec<(SpecKind, SourceFile)> = builtin_files();
        // Replacement is decided on parsed names, so parse the user files' names first.
        let user_names: Vec<(SpecKind, String)> = user
            .iter()
            .filter_map(|(k, f)| spec_name(*k, &f.text).map(|n| (*k, n)))
            .collect();
        files
            .retain(|(k, f)| spec_name(*k, &f.text).is_none_or(|n| !user_names.contains(&(*k, n))));
        files.extend(user);
        Catalog::from_files(files)
    }

    /// Parses and validates a set of spec files.
    pub fn from_files(files: Vec<(SpecKind, SourceFile)>) -> Result<Catalog, CatalogError> {
        let mut diagnostics = Vec::new();
        let mut catalog = Catalog::default();
        for (kind, file) in files {
            match kind {
                SpecKind::App => parse_into(&mut catalog.apps, file, &mut diagnostics),
                SpecKind::Noise => parse_into(&mut catalog.noise, file, &mut diagnostics),
                SpecKind::Problem => parse_into(&mut catalog.problems, file, &mut diagnostics),
            }
        }
        catalog.problems.sort_by(|a, b| a.spec.id.cmp(&b.spec.id));
        diagnostics.extend(validate::catalog(catalog.specs()));
        if diagnostics.is_empty() {
            Ok(catalog)
        } else {
            Err(CatalogError { diagnostics })
        }
    }

    /// Parses one more spec file and validates it against this catalog (the apps and noise
    /// profiles it names) without adding it: every diagnostic, empty when it is valid.
    pub fn check_file(&self, kind: SpecKind, file: SourceFile) -> Vec<Diagnostic> {
        let mut diagnostics = Vec::new();
        let mut one = Catalog::default();
        match kind {
            SpecKind::App => parse_into(&mut one.apps, file, &mut diagnostics),
            SpecKind::Noise => parse_into(&mut one.noise, file, &mut diagnostics),
            SpecKind::Problem => parse_into(&mut one.problems, file, &mut diagnostics),
        }
        if !diagnostics.is_empty() {
            return diagnostics;
        }
        validate::catalog(validate::Specs {
            apps: if kind == SpecKind::App {
                &one.apps
            } else {
                &self.apps
            },
            noise: if kind == SpecKind::Noise {
                &one.noise
            } else {
                &self.noise
            },
            problems: &one.problems,
        })
    }

    fn specs(&self) -> validate::Specs<'_> {
        validate::Specs {
            apps: &self.apps,
            noise: &self.noise,
            problems: &self.problems,
        }
    }

    pub fn app(&self, name: &str) -> Option<&AppSpec> {
        self.specs().app(name)
    }

    pub fn problem(&self, id: &str) -> Option<&ProblemSpec> {
        self.problems.iter().map(|p| &p.spec).find(|p| p.id == id)
    }

    pub fn noise(&self, name: &str) -> Option<&NoiseProfile> {
        self.specs().noise(name)
    }

    pub fn apps(&self) -> impl Iterator<Item = &AppSpec> {
        self.apps.iter().map(|a| &a.spec)
    }

    pub fn noise_profiles(&self) -> impl Iterator<Item = &NoiseProfile> {
        self.noise.iter().map(|n| &n.spec)
    }

    /// Problems sorted by id.
    pub fn problems(&self) -> impl Iterator<Item = &ProblemSpec> {
        self.problems.iter().map(|p| &p.spec)
    }

    /// The file a problem was loaded from.
    pub fn problem_file(&self, id: &str) -> Option<&SourceFile> {
        self.problems
            .iter()
            .find(|p| p.spec.id == id)
            .map(|p| &p.file)
    }

    /// Problems whose id matches any of the comma-separated glob patterns (`hotel-*`,
    /// `*-oom,social-*`), sorted by id.
    pub fn problems_matching(&self, patterns: &str) -> Result<Vec<&ProblemSpec>, String> {
        let globs = patterns
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| glob::Pattern::new(p).map_err(|e| format!("bad pattern `{p}`: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        if globs.is_empty() {
            return Err("empty problem pattern (expected e.g. `hotel-*`)".into());
        }
        Ok(self
            .problems()
            .filter(|p| globs.iter().any(|g| g.matches(&p.id)))
            .collect())
    }
}

fn parse_into<T: serde::de::DeserializeOwned>(
    into: &mut Vec<Located<T>>,
    file: SourceFile,
    diagnostics: &mut Vec<Diagnostic>,
) {
    match toml::from_str::<T>(&file.text) {
        Ok(spec) => into.push(Located { spec, file }),
        Err(err) => diagnostics
            .push(fault_field_error(&file, &err).unwrap_or_else(|| file.from_toml_error(&err))),
    }
}

/// A fault's parameters are read through its `primitive` tag, and serde reports a mistake in
/// them (`target_port = "x"`, an unknown key) at the whole `[[faults]]` table. Each key of the
/// table the error points into is read again alone with the tag: the first one that fails on its
/// own (not for a missing field) is the culprit, reported at its own line.
fn fault_field_error(file: &SourceFile, err: &toml::de::Error) -> Option<Diagnostic> {
    let span = err.span()?;
    let doc: toml::Table = toml::from_str(&file.text).ok()?;
    for list in ["faults", "decoys"] {
        let Some(items) = doc.get(list).and_then(toml::Value::as_array) else {
            continue;
        };
        // The document is parsed once for every item's place (not once per item).
        let spans = crate::source::item_spans(&file.text, list);
        for (i, item) in items.iter().enumerate() {
            let at = format!("{list}[{i}]");
            let within = spans
                .get(i)
                .is_some_and(|s| s.start <= span.start && span.start <= s.end.max(s.start + 1));
            let (true, Some(table)) = (within, item.as_table()) else {
                continue;
            };
            // An unknown tag fails every key read with it: it is the culprit, at its own line.
            if let Some(tag) = table.get("primitive") {
                let mut tag_only = toml::Table::new();
                tag_only.insert("primitive".into(), tag.clone());
                if let Err(e) = toml::Value::Table(tag_only).try_into::<crate::problem::FaultSpec>()
                    && e.message().contains("unknown variant")
                {
                    return Some(file.at_field(&format!("{at}.primitive"), e.message().trim()));
                }
            }
            for (key, value) in table.iter().filter(|(k, _)| *k != "primitive") {
                let mut alone = toml::Table::new();
                if let Some(tag) = table.get("primitive") {
                    alone.insert("primitive".into(), tag.clone());
                }
                alone.insert(key.clone(), value.clone());
                if let Err(e) = toml::Value::Table(alone).try_into::<crate::problem::FaultSpec>() {
                    let message = e.message().trim().to_string();
                    if !message.starts_with("missing field") {
                        return Some(file.at_field(&format!("{at}.{key}"), message));
                    }
                }
            }
        }
    }
    None
}

/// The `name`/`id` a spec file declares, read without full parsing.
fn spec_name(kind: SpecKind, text: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(text).ok()?;
    let key = if kind == SpecKind::Problem {
        "id"
    } else {
        "name"
    };
    table.get(key)?.as_str().map(str::to_string)
}

/// The built-in spec files, with their repository paths.
pub fn builtin_files() -> Vec<(SpecKind, SourceFile)> {
    embedded::FILES
        .iter()
        .filter_map(|(rel, text)| {
            let kind = SpecKind::of_dir(rel.split('/').next()?)?;
            Some((
                kind,
                SourceFile {
                    path: format!("{BUILTIN_ROOT}/{rel}"),
                    text: (*text).to_string(),
                },
            ))
        })
        .collect()
}

/// Reads `apps/`, `noise/` and `problems/` `*.toml` files of a catalog directory. A directory
/// with none of these subdirectories is read as a directory of problem files.
pub fn read_dir_files(dir: &Path) -> Result<Vec<(SpecKind, SourceFile)>, CatalogError> {
    let io_err = |path: &Path, e: std::io::Error| CatalogError {
        diagnostics: vec![Diagnostic {
            file: path.display().to_string(),
            line: None,
            column: None,
            field: String::new(),
            message: format!("cannot read: {e}"),
        }],
    };
    let subdirs: Vec<(SpecKind, std::path::PathBuf)> = ["apps", "noise", "problems"]
        .iter()
        .filter_map(|d| Some((SpecKind::of_dir(d)?, dir.join(d))))
        .filter(|(_, p)| p.is_dir())
        .collect();
    let subdirs = if subdirs.is_empty() {
        vec![(SpecKind::Problem, dir.to_path_buf())]
    } else {
        subdirs
    };
    let mut out = Vec::new();
    for (kind, sub) in subdirs {
        let mut paths: Vec<_> = std::fs::read_dir(&sub)
            .map_err(|e| io_err(&sub, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
            out.push((
                kind,
                SourceFile {
                    path: path.display().to_string(),
                    text,
                },
            ));
        }
    }
    Ok(out)
}
