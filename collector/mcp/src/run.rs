//! Runs the real kubectl: an argument vector (never a shell), `KUBECONFIG` pointing at the
//! session's cluster, optional bytes on stdin (`replace -f -` when rolling back), a time limit
//! after which the process is killed, and a cap on how much of its output is kept (the rest is
//! read and dropped so that kubectl never blocks on a full pipe).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// How kubectl is run.
#[derive(Debug, Clone)]
pub struct Kubectl {
    pub program: PathBuf,
    pub kubeconfig: PathBuf,
    pub timeout: Duration,
    /// Bytes of stdout (and, separately, of stderr) kept.
    pub max_output: usize,
}

/// What one kubectl run printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The exit code; `None` when it was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Whether output past `max_output` was dropped.
    pub truncated: bool,
}

impl Ran {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Stdout and stderr as one text for the agent, with a note when output was cut.
    pub fn text(&self) -> String {
        let mut out = self.stdout.clone();
        if !self.stderr.is_empty() {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&self.stderr);
        }
        if self.truncated {
            out.push_str("\n[output truncated]");
        }
        out
    }
}

/// Why kubectl produced no result at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start {program}: {source} (is kubectl installed? set the kubectl path)")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("kubectl did not finish within {0:?} and was stopped")]
    Timeout(Duration),
    #[error("reading kubectl's output: {0}")]
    Io(#[from] std::io::Error),
}

impl Kubectl {
    /// Runs `kubectl ARGS`, feeding `stdin` when given.
    pub async fn run(&self, args: &[String], stdin: Option<&[u8]>) -> Result<Ran, RunError> {
        let mut child = Command::new(&self.program)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A timed-out run is dropped, and its process with it.
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| RunError::Start {
                program: self.program.display().to_string(),
                source,
            })?;
        let input = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let cap = self.max_output;
        let work = async {
            let feed = async {
                if let (Some(mut pipe), Some(bytes)) = (input, stdin) {
                    pipe.write_all(bytes).await?;
                    // Dropping the pipe closes it: kubectl reads to the end of its input.
                    drop(pipe);
                }
                Ok::<_, std::io::Error>(())
            };
            let (fed, out, err, status) = tokio::join!(
                feed,
                read_capped(stdout, cap),
                read_capped(stderr, cap),
                child.wait()
            );
            // A kubectl that exits before reading its input breaks the pipe; its own message
            // says why, so that is not an error here.
            if let Err(e) = fed
                && e.kind() != std::io::ErrorKind::BrokenPipe
            {
                return Err(e);
            }
            let (stdout, cut_out) = out?;
            let (stderr, cut_err) = err?;
            Ok::<_, std::io::Error>(Ran {
                code: status?.code(),
                stdout,
                stderr,
                truncated: cut_out || cut_err,
            })
        };
        match tokio::time::timeout(self.timeout, work).await {
            Ok(ran) => Ok(ran?),
            Err(_) => Err(RunError::Timeout(self.timeout)),
        }
    }
}

/// Reads a pipe to its end, keeping the first `cap` bytes; whether more came.
async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    cap: usize,
) -> std::io::Result<(String, bool)> {
    let Some(mut pipe) = pipe else {
        return Ok((String::new(), false));
    };
    let mut kept = Vec::new();
    let mut cut = false;
    let mut buf = [0u8; 8192];
    loop {
        let n = pipe.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len());
        let chunk = buf.get(..n).unwrap_or_default();
        if chunk.len() > room {
            cut = true;
        }
        kept.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
    }
    Ok((String::from_utf8_lossy(&kept).into_owned(), cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in kubectl: a shell script that echoes what it was given, so the runner's
    /// plumbing (arguments, environment, stdin, exit code, caps, timeout) is checked exactly.
    fn fake(dir: &std::path::Path, body: &str) -> Kubectl {
        use std::os::unix::fs::PermissionsExt;
        let program = dir.join("kubectl");
        std::fs::write(&program, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        Kubectl {
            program,
            kubeconfig: dir.join("kc"),
            timeout: Duration::from_secs(20),
            max_output: 64,
        }
    }

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[tokio::test]
    async fn arguments_reach_kubectl_verbatim_with_the_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let k = fake(
            dir.path(),
            r#"printf '%s|' "$@"; printf 'KC=%s' "$KUBECONFIG"; echo oops >&2; exit 3"#,
        );
        let ran = k
            .run(&args(&["get", "a b", "$(id)", ";"]), None)
            .await
            .unwrap();
        let kc = dir.path().join("kc");
        assert_eq!(ran.stdout, format!("get|a b|$(id)|;|KC={}", kc.display()));
        assert_eq!(ran.stderr, "oops\n");
        assert_eq!(ran.code, Some(3));
        assert!(!ran.success());
        assert!(ran.text().ends_with("oops\n"), "{}", ran.text());
    }

    #[tokio::test]
    async fn stdin_is_fed_and_output_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let k = fake(dir.path(), "cat; cat");
        let input = "x".repeat(200);
        let ran = k.run(&[], Some(input.as_bytes())).await.unwrap();
        assert_eq!(ran.stdout, "x".repeat(64));
        assert!(ran.truncated);
        assert!(ran.success());
        assert!(ran.text().ends_with("[output truncated]"));
    }

    #[tokio::test]
    async fn a_run_past_its_time_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let mut k = fake(dir.path(), "exec sleep 30");
        k.timeout = Duration::from_millis(200);
        let err = k.run(&[], None).await.unwrap_err();
        assert!(matches!(err, RunError::Timeout(_)), "{err}");
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error_naming_it() {
        let k = Kubectl {
            program: "/nonexistent/kubectl".into(),
            kubeconfig: "/nonexistent/kc".into(),
            timeout: Duration::from_secs(5),
            max_output: 10,
        };
        let err = k.run(&[], None).await.unwrap_err().to_string();
        assert!(err.contains("/nonexistent/kubectl"), "{err}");
    }
}
