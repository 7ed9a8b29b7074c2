//! What `collector sweep` and `collector eval` share to run as shards: the shard flags and where
//! the results go.

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use results::{Shard, Store};

/// `--shard-index` / `--shard-count`.
#[derive(Debug, Clone, clap::Args)]
pub struct ShardArgs {
    /// This process's shard of the work, 0-based (an Indexed Job's pod is given it as
    /// JOB_COMPLETION_INDEX). Every shard computes the same work list and takes every
    /// --shard-count-th run of it, starting at its index.
    #[arg(long, env = "JOB_COMPLETION_INDEX")]
    pub shard_index: Option<u64>,
    /// How many shards share the work.
    #[arg(long, env = "FAULTLINE_SHARD_COUNT")]
    pub shard_count: Option<u64>,
}

impl ShardArgs {
    pub fn shard(&self) -> anyhow::Result<Shard> {
        Shard::new(self.shard_index, self.shard_count).map_err(anyhow::Error::msg)
    }
}

/// Opens `--out`: a directory, or an object store URL.
pub fn open_store(out: &str, done_file: &'static str) -> anyhow::Result<Store> {
    Store::open(out, done_file).with_context(|| format!("--out {out}"))
}

/// The `--out` help shared by sweep and eval.
pub const OUT_HELP: &str = "Where the runs go: a directory, or object storage (s3://bucket/prefix, gs://bucket/prefix, az://container/prefix, file:///dir) with credentials from each cloud's usual variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT, AWS_ALLOW_HTTP; GOOGLE_SERVICE_ACCOUNT; AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY).";

/// A progress bar over `total` things (hidden when the output is JSON).
pub fn progress(hidden: bool, total: u64, what: &str) -> ProgressBar {
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{bar:30}}] {{pos}}/{{len}} {what} ({{elapsed}}, eta {{eta}}) {{msg}}"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

/// A store that did not answer is worth another try: the error says so through the exit code.
pub fn retry(e: anyhow::Error) -> anyhow::Error {
    if results::worth_retrying(&e) {
        e.context(crate::Retry)
    } else {
        e
    }
}
