//! Where runs are kept: a local directory, or object storage reached through `object_store`.
//!
//! A run is made in a local directory of its own and then *published* under its key, so that a
//! reader (the board, a merge, a shard deciding what is left to do) never takes a half-written run
//! as complete, whatever was killed when:
//!
//! - a **directory** store renames the finished run to `<root>/<key>/` (one atomic step; a second
//!   rename onto a finished run fails, so two racing writers leave one run). A run is complete when
//!   its done file (`run.json`, `sweep.json`) is there.
//! - an **object** store (`s3://`, `gs://`, `az://`, `file://`) uploads the files with create-only
//!   puts under `runs/<key>/<attempt>/`, an attempt being a fresh random name, and then writes the
//!   marker `done/<key>.json` with a create-only put. The marker names the attempt and lists its
//!   files with their sizes and SHA-256; it alone makes the run complete. A writer killed before
//!   its marker leaves an attempt no marker names, which no reader looks at; of two writers racing
//!   on one run (a retried pod) exactly one marker put succeeds, and the other writer deletes its
//!   attempt. The marker also carries the done file's JSON, so a merge reads every run's summary
//!   without fetching the runs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjPath;
use object_store::{
    ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutMode, PutOptions, PutPayload,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::plan::{Plan, check_key};

/// Uploads and downloads at once per run.
const TRANSFERS: usize = 8;
/// The plan's object / file name.
pub const PLAN_FILE: &str = "plan.json";

/// A results store: see the module documentation.
pub struct Store {
    inner: Inner,
    /// As the user named it.
    shown: String,
    /// The file whose presence makes a run directory complete, and whose JSON is its summary.
    done_file: &'static str,
}

enum Inner {
    Dir(PathBuf),
    Objects {
        store: Arc<dyn ObjectStore>,
        root: String,
    },
}

/// A plan's runs: those stored and those not (yet), each in plan order.
#[derive(Debug, Clone)]
pub struct Progress {
    pub plan: Plan,
    pub done: Vec<String>,
    pub missing: Vec<String>,
}

/// A store holding the runs of another plan: no try of this command can add to it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{store} holds the results of other work ({why}): use another --out, or the command that made it"
)]
pub struct OtherWork {
    pub store: String,
    pub why: String,
}

/// Whether an error of a store is worth another try: anything but a store of other work (a store
/// that did not answer, a file that could not be written).
pub fn worth_retrying(e: &anyhow::Error) -> bool {
    e.downcast_ref::<OtherWork>().is_none()
}

/// What publishing a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// This run is now the key's result.
    Mine,
    /// Another writer had published the key first; this run was discarded.
    AlreadyThere,
}

/// An object store's completion marker, `done/<key>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Marker {
    pub key: String,
    /// The attempt whose files are the run: `runs/<key>/<attempt>/`.
    pub attempt: String,
    /// Seconds since the epoch.
    pub published_at: u64,
    pub files: Vec<FileEntry>,
    /// The run's done file.
    pub summary: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the run, `/`-separated.
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

impl Store {
    /// Opens `spec`: a URL (`s3://bucket/prefix`, `gs://…`, `az://container/prefix`,
    /// `file:///abs/dir`) names an object store whose credentials and endpoint come from each
    /// cloud's standard environment variables (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT`,
    /// `AWS_ALLOW_HTTP`, `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_NAME`, …); anything else
    /// is a local directory.
    pub fn open(spec: &str, done_file: &'static str) -> anyhow::Result<Store> {
        let inner = if spec.contains("://") {
            let (store, root) = open_url(spec)?;
            Inner::Objects { store, root }
        } else {
            anyhow::ensure!(!spec.is_empty(), "expected a directory or a store URL");
            Inner::Dir(PathBuf::from(spec))
        };
        Ok(Store {
            inner,
            shown: spec.to_string(),
            done_file,
        })
    }

    pub fn describe(&self) -> &str {
        &self.shown
    }

    /// The directory runs are renamed into, for a directory store.
    pub fn local_root(&self) -> Option<&Path> {
        match &self.inner {
            Inner::Dir(root) => Some(root),
            Inner::Objects { .. } => None,
        }
    }

    /// A private directory for this shard's runs in the making. For a directory store it is
    /// `.unfinished/shard-K-of-N` beside the runs (publishing is then a rename), emptied now of
    /// what a killed earlier try of the same shard left; other shards' are left alone. For an
    /// object store it is a fresh temporary directory, the caller's to remove.
    pub fn scratch(&self, shard: crate::Shard) -> anyhow::Result<PathBuf> {
        let dir = match &self.inner {
            Inner::Dir(root) => {
                let dir = root
                    .join(".unfinished")
                    .join(format!("shard-{}-of-{}", shard.index, shard.count));
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)
                        .with_context(|| format!("clearing {}", dir.display()))?;
                }
                dir
            }
            Inner::Objects { .. } => {
                std::env::temp_dir().join(format!("faultline-{}", uuid::Uuid::new_v4().simple()))
            }
        };
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(dir)
    }

    /// Records the plan, or checks that the one recorded is the same.
    pub async fn put_plan(&self, plan: &Plan) -> anyhow::Result<()> {
        let bytes = serde_json::to_vec_pretty(plan)?;
        let created = match &self.inner {
            Inner::Dir(root) => create_file(root, PLAN_FILE, &bytes)?,
            Inner::Objects { store, root } => {
                match store
                    .put_opts(&obj(root, PLAN_FILE), bytes.into(), create_only())
                    .await
                {
                    Ok(_) => true,
                    Err(object_store::Error::AlreadyExists { .. }) => false,
                    Err(e) => return Err(e).context(format!("writing the plan to {}", self.shown)),
                }
            }
        };
        if !created {
            let there = self
                .plan()
                .await?
                .context("the plan vanished while it was being compared")?;
            if let Some(why) = plan.differs_from(&there) {
                return Err(OtherWork {
                    store: self.shown.clone(),
                    why,
                }
                .into());
            }
        }
        Ok(())
    }

    /// The recorded plan, if any.
    pub async fn plan(&self) -> anyhow::Result<Option<Plan>> {
        let Some(bytes) = self.read(PLAN_FILE).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{}/{PLAN_FILE}: not a plan", self.shown))
    }

    /// How far the work of the store's plan is, the plan being of `kind` (`sweep`, `eval`).
    pub async fn progress(&self, kind: &str) -> anyhow::Result<Progress> {
        let plan = self
            .plan()
            .await?
            .with_context(|| format!("{} holds no {kind} (no {PLAN_FILE})", self.shown))?;
        anyhow::ensure!(
            plan.kind == kind,
            "{} holds a {} where a {kind} was expected",
            self.shown,
            plan.kind
        );
        let stored = self.completed(&plan.work).await?;
        let (done, missing) = plan.work.iter().cloned().partition(|k| stored.contains(k));
        Ok(Progress {
            plan,
            done,
            missing,
        })
    }

    /// Which of `keys` are complete.
    pub async fn completed(&self, keys: &[String]) -> anyhow::Result<BTreeSet<String>> {
        match &self.inner {
            Inner::Dir(root) => Ok(keys
                .iter()
                .filter(|k| root.join(k).join(self.done_file).is_file())
                .cloned()
                .collect()),
            Inner::Objects { store, root } => {
                let done = obj(root, "done");
                let prefix = format!("{done}/");
                let listed: Vec<_> = match store.list(Some(&done)).try_collect().await {
                    Ok(l) => l,
                    Err(object_store::Error::NotFound { .. }) => vec![],
                    Err(e) => return Err(e).context(format!("listing {}", self.shown)),
                };
                let all: BTreeSet<String> = listed
                    .iter()
                    .filter_map(|m| {
                        m.location
                            .as_ref()
                            .strip_prefix(&prefix)?
                            .strip_suffix(".json")
                            .map(str::to_string)
                    })
                    .collect();
                Ok(keys.iter().filter(|k| all.contains(*k)).cloned().collect())
            }
        }
    }

    /// Publishes the finished run in `dir` (holding the done file) under `key`; `dir` is gone
    /// afterwards (renamed or uploaded and removed).
    pub async fn publish(&self, key: &str, dir: &Path) -> anyhow::Result<Published> {
        check_key(key).map_err(anyhow::Error::msg)?;
        let summary_path = dir.join(self.done_file);
        anyhow::ensure!(
            summary_path.is_file(),
            "{}: no {}, so not a finished run",
            dir.display(),
            self.done_file
        );
        let published = match &self.inner {
            Inner::Dir(root) => self.rename_into(root, key, dir)?,
            Inner::Objects { store, root } => {
                let summary: Value = serde_json::from_slice(&std::fs::read(&summary_path)?)
                    .with_context(|| format!("{}: not JSON", summary_path.display()))?;
                let published = upload(store.as_ref(), root, key, dir, summary)
                    .await
                    .with_context(|| format!("publishing {key} to {}", self.shown))?;
                remove_dir(dir);
                published
            }
        };
        Ok(published)
    }

    fn rename_into(&self, root: &Path, key: &str, dir: &Path) -> anyhow::Result<Published> {
        let target = root.join(key);
        if target.join(self.done_file).is_file() {
            remove_dir(dir);
            return Ok(Published::AlreadyThere);
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        match std::fs::rename(dir, &target) {
            Ok(()) => Ok(Published::Mine),
            Err(_) if target.join(self.done_file).is_file() => {
                remove_dir(dir);
                Ok(Published::AlreadyThere)
            }
            Err(e) => Err(e).with_context(|| {
                format!(
                    "moving the finished run {} to {}",
                    dir.display(),
                    target.display()
                )
            }),
        }
    }

    /// A complete run's done file, as JSON.
    pub async fn summary(&self, key: &str) -> anyhow::Result<Value> {
        match &self.inner {
            Inner::Dir(root) => {
                let path = root.join(key).join(self.done_file);
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                serde_json::from_slice(&bytes)
                    .with_context(|| format!("{}: not JSON", path.display()))
            }
            Inner::Objects { .. } => Ok(self.marker(key).await?.summary),
        }
    }

    async fn marker(&self, key: &str) -> anyhow::Result<Marker> {
        let name = marker_name(key);
        let bytes = self
            .read(&name)
            .await?
            .with_context(|| format!("{}: run {key} is not complete", self.shown))?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{}/{name}: not a marker", self.shown))
    }

    /// A complete run as a local directory: a directory store's own, or an object store's
    /// downloaded to `cache/<key>` (and kept there: a second call reads the cache). Every file is
    /// checked against the marker's SHA-256.
    pub async fn local_copy(&self, key: &str, cache: &Path) -> anyhow::Result<PathBuf> {
        check_key(key).map_err(anyhow::Error::msg)?;
        let (store, root) = match &self.inner {
            Inner::Dir(root) => return Ok(root.join(key)),
            Inner::Objects { store, root } => (store, root),
        };
        let dest = cache.join(key);
        if dest.join(self.done_file).is_file() {
            return Ok(dest);
        }
        let marker = self.marker(key).await?;
        let staging = cache
            .join(".partial")
            .join(uuid::Uuid::new_v4().simple().to_string());
        let run_prefix = attempt_prefix(key, &marker.attempt);
        futures_util::stream::iter(&marker.files)
            .map(|f| {
                let from = obj(root, &format!("{run_prefix}/{}", f.path));
                let to = staging.join(&f.path);
                async move {
                    let bytes = async { store.get(&from).await?.bytes().await }
                        .await
                        .with_context(|| format!("downloading {from}"))?;
                    anyhow::ensure!(
                        hex::encode(Sha256::digest(&bytes)) == f.sha256,
                        "{from} does not match its marker's SHA-256"
                    );
                    if let Some(parent) = to.parent() {
                        tokio::fs::create_dir_all(parent).await?;
                    }
                    tokio::fs::write(&to, &bytes)
                        .await
                        .with_context(|| format!("cannot write {}", to.display()))
                }
            })
            .buffer_unordered(TRANSFERS)
            .try_collect::<Vec<()>>()
            .await
            .inspect_err(|_| remove_dir(&staging))?;
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if std::fs::rename(&staging, &dest).is_err() && !dest.join(self.done_file).is_file() {
            remove_dir(&staging);
            bail!("cannot move the downloaded {key} to {}", dest.display());
        }
        remove_dir(&staging);
        Ok(dest)
    }

    /// Writes (or replaces) a file at the store's root: an index or a board.
    pub async fn put_file(&self, name: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        match &self.inner {
            Inner::Dir(root) => {
                std::fs::create_dir_all(root)
                    .with_context(|| format!("cannot create {}", root.display()))?;
                Ok(datasets::write_atomically(&root.join(name), &bytes)?)
            }
            Inner::Objects { store, root } => store
                .put(&obj(root, name), bytes.into())
                .await
                .map(|_| ())
                .with_context(|| format!("writing {name} to {}", self.shown)),
        }
    }

    /// A file at the store's root, if it is there.
    async fn read(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        match &self.inner {
            Inner::Dir(root) => match std::fs::read(root.join(name)) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => {
                    Err(e).with_context(|| format!("cannot read {}", root.join(name).display()))
                }
            },
            Inner::Objects { store, root } => match store.get(&obj(root, name)).await {
                Ok(g) => Ok(Some(g.bytes().await?.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e).with_context(|| format!("reading {name} from {}", self.shown)),
            },
        }
    }
}

/// Builds the object store a URL names, configured from the environment.
fn open_url(spec: &str) -> anyhow::Result<(Arc<dyn ObjectStore>, String)> {
    let url = url::Url::parse(spec).with_context(|| format!("`{spec}`: not a URL"))?;
    let unsupported = || {
        format!(
            "`{spec}`: expected s3://bucket/prefix, gs://bucket/prefix, az://container/prefix, file:///dir or a directory"
        )
    };
    let (scheme, path) = ObjectStoreScheme::parse(&url).with_context(unsupported)?;
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            warn_without_credentials(
                "S3",
                &[
                    "AWS_ACCESS_KEY_ID",
                    "AWS_WEB_IDENTITY_TOKEN_FILE",
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                ],
            );
            Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_url(spec)
                    .build()
                    .with_context(|| format!("{spec}: the S3 store (AWS_* variables)"))?,
            )
        }
        ObjectStoreScheme::GoogleCloudStorage => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(spec)
                .build()
                .with_context(|| format!("{spec}: the GCS store (GOOGLE_* variables)"))?,
        ),
        ObjectStoreScheme::MicrosoftAzure => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(spec)
                .build()
                .with_context(|| format!("{spec}: the Azure store (AZURE_* variables)"))?,
        ),
        ObjectStoreScheme::Local => {
            let dir = url
                .to_file_path()
                .map_err(|()| anyhow::anyhow!(unsupported()))?;
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let store = object_store::local::LocalFileSystem::new_with_prefix(&dir)
                .with_context(|| format!("{spec}: cannot open {}", dir.display()))?;
            return Ok((Arc::new(store), String::new()));
        }
        _ => bail!(unsupported()),
    };
    Ok((store, path.as_ref().to_string()))
}

/// Says, before the first request fails obscurely, that no credentials are in the environment:
/// the client then asks the cloud's instance metadata service, which off the cloud refuses.
fn warn_without_credentials(cloud: &str, variables: &[&str]) {
    if variables.iter().all(|v| std::env::var_os(v).is_none()) {
        tracing::warn!(
            "no {cloud} credentials in the environment ({}): asking the instance's metadata service",
            variables.join(", ")
        );
    }
}

/// A run's completion marker, relative to the store's root.
fn marker_name(key: &str) -> String {
    format!("done/{key}.json")
}

/// Where an attempt at a run keeps its files, relative to the store's root.
fn attempt_prefix(key: &str, attempt: &str) -> String {
    format!("runs/{key}/{attempt}")
}

/// `root/rel` as an object path.
fn obj(root: &str, rel: &str) -> ObjPath {
    if root.is_empty() {
        ObjPath::from(rel)
    } else {
        ObjPath::from(format!("{root}/{rel}"))
    }
}

fn create_only() -> PutOptions {
    PutMode::Create.into()
}

/// Uploads `dir` as a new attempt of `key`, then races for its marker.
async fn upload(
    store: &dyn ObjectStore,
    root: &str,
    key: &str,
    dir: &Path,
    summary: Value,
) -> anyhow::Result<Published> {
    let marker_path = obj(root, &marker_name(key));
    if store.head(&marker_path).await.is_ok() {
        return Ok(Published::AlreadyThere);
    }
    let attempt = uuid::Uuid::new_v4().simple().to_string();
    let run_prefix = attempt_prefix(key, &attempt);
    let files = files_of(dir)?;
    let entries: Vec<FileEntry> = futures_util::stream::iter(files)
        .map(|(rel, path)| {
            let to = obj(root, &format!("{run_prefix}/{rel}"));
            async move {
                let bytes = tokio::fs::read(&path)
                    .await
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let entry = FileEntry {
                    path: rel,
                    bytes: bytes.len() as u64,
                    sha256: hex::encode(Sha256::digest(&bytes)),
                };
                store
                    .put_opts(&to, PutPayload::from(bytes), create_only())
                    .await
                    .with_context(|| format!("uploading {to}"))?;
                anyhow::Ok(entry)
            }
        })
        .buffered(TRANSFERS)
        .try_collect()
        .await?;
    let marker = Marker {
        key: key.to_string(),
        attempt: attempt.clone(),
        published_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        files: entries,
        summary,
    };
    let bytes = serde_json::to_vec_pretty(&marker)?;
    match store
        .put_opts(&marker_path, bytes.into(), create_only())
        .await
    {
        Ok(_) => Ok(Published::Mine),
        Err(object_store::Error::AlreadyExists { .. }) => {
            // Lost the race: the other writer's attempt is the result; ours goes.
            for f in &marker.files {
                let _ = store
                    .delete(&obj(root, &format!("{run_prefix}/{}", f.path)))
                    .await;
            }
            Ok(Published::AlreadyThere)
        }
        Err(e) => Err(e).context(format!("writing the marker {marker_path}")),
    }
}

/// The regular files under `dir`, as (`/`-separated relative path, path), sorted; links are not
/// followed.
fn files_of(dir: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>) -> anyhow::Result<()> {
        for entry in
            std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?
        {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let kind = entry.file_type()?;
            if kind.is_dir() {
                walk(&entry.path(), &rel, out)?;
            } else if kind.is_file() {
                out.push((rel, entry.path()));
            }
        }
        Ok(())
    }
    let mut out = vec![];
    walk(dir, "", &mut out)?;
    out.sort();
    Ok(out)
}

/// Creates `root/name` holding `bytes` unless it exists; whether it created it. A hard link from a
/// file written aside makes the creation atomic: a reader sees all of it or none.
fn create_file(root: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<bool> {
    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    let tmp = root.join(format!(".{name}.tmp-{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    let linked = std::fs::hard_link(&tmp, root.join(name));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot create {}", root.join(name).display())),
    }
}

fn remove_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove {}: {e}", dir.display());
    }
}
