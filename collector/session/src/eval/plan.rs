//! What an evaluation runs: the agents file (TOML) read and checked, and the matrix of agents ×
//! problems × runs × noise settings laid out as run directories
//! `<out>/<agent>/<problem>/<noise|quiet>-<run>/`. Run `k` uses seed `k` with and without noise, so
//! the two settings meet the same failure. IO-free apart from reading the agents file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use problems::Dur;
use serde::{Deserialize, Serialize};

/// One agent of the agents file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    /// Names the agent's runs and its leaderboard rows; a directory name.
    pub name: String,
    /// A shell command line, run from the directory `collector eval` was started in.
    pub command: String,
    /// Extra environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A prompt template file, relative to the agents file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PathBuf>,
    /// This agent's time limit, overriding `--time-limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<Dur>,
    /// The LLM API this agent's calls are counted on their way to, overriding `--llm-upstream`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_upstream: Option<String>,
    /// How long the agent may go on after its last stage (default 60s, as SREGym).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_last_stage: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentsFile {
    #[serde(default)]
    agents: Vec<AgentEntry>,
}

/// Reads and checks an agents file; prompt paths come back resolved against its directory.
pub fn read_agents(path: &Path) -> anyhow::Result<Vec<AgentEntry>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse_agents(&text, base).map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))
}

/// [`read_agents`] over the file's text.
pub fn parse_agents(text: &str, base: &Path) -> anyhow::Result<Vec<AgentEntry>> {
    let file: AgentsFile = toml::from_str(text).context(
        "expected [[agents]] tables with name, command and optionally env, prompt, time_limit, llm_upstream, after_last_stage",
    )?;
    if file.agents.is_empty() {
        bail!("no [[agents]] table: nothing to evaluate");
    }
    let mut seen = BTreeSet::new();
    let mut agents = file.agents;
    for (i, a) in agents.iter_mut().enumerate() {
        let at = format!("agents[{i}]");
        if !is_dir_name(&a.name) {
            bail!(
                "{at}.name `{}`: expected letters, digits, `-`, `_` or `.` (it names a directory)",
                a.name
            );
        }
        if !seen.insert(a.name.clone()) {
            bail!("{at}.name `{}`: another agent has this name", a.name);
        }
        if a.command.trim().is_empty() {
            bail!("{at}.command: empty (expected a shell command line)");
        }
        if let Some(p) = &a.prompt {
            a.prompt = Some(base.join(p));
        }
    }
    Ok(agents)
}

fn is_dir_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// One cell of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Index into the agents.
    pub agent: usize,
    pub problem: String,
    /// 1-based run number; also the seed.
    pub run: u64,
    pub noise: bool,
    /// The run's key in the results store: `<agent>/<problem>/<trial>`.
    pub key: String,
    /// The trial name in `run.json`.
    pub trial: String,
}

/// Every cell, agents outermost; problems in the order given.
pub fn cells(agents: &[AgentEntry], problems: &[String], runs: u64, noise: &[bool]) -> Vec<Cell> {
    let mut all = Vec::new();
    for (a, agent) in agents.iter().enumerate() {
        for problem in problems {
            for &with_noise in noise {
                for run in 1..=runs {
                    let trial = format!("{}-{run}", if with_noise { "noise" } else { "quiet" });
                    all.push(Cell {
                        agent: a,
                        problem: problem.clone(),
                        run,
                        noise: with_noise,
                        key: format!("{}/{problem}/{trial}", agent.name),
                        trial,
                    });
                }
            }
        }
    }
    all
}

/// Reads `--noise on,off` (also `true`/`false`, `yes`/`no`).
pub fn parse_noise(s: &str) -> Result<Vec<bool>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let v = match part {
            "on" | "true" | "yes" => true,
            "off" | "false" | "no" => false,
            other => {
                return Err(format!(
                    "`{other}`: expected on or off (e.g. --noise on,off)"
                ));
            }
        };
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        return Err("expected on, off or on,off".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_file_is_read_and_checked() {
        let agents = parse_agents(
            r#"
            [[agents]]
            name = "fixer"
            command = "./fixer.sh"
            prompt = "p.md"
            env = { MODEL = "small" }
            [[agents]]
            name = "idle"
            command = "true"
            time_limit = "30s"
            "#,
            Path::new("/cfg"),
        )
        .unwrap();
        assert_eq!(agents.len(), 2);
        assert_eq!(agents[0].prompt.as_deref(), Some(Path::new("/cfg/p.md")));
        assert_eq!(agents[0].env["MODEL"], "small");
        assert_eq!(agents[1].time_limit, Some(Dur::from_secs(30)));
    }

    #[test]
    fn bad_agents_files_name_the_field() {
        let cases = [
            ("", "no [[agents]]"),
            ("[[agents]]\nname = \"a\"\n", "command"),
            (
                "[[agents]]\nname = \"../x\"\ncommand = \"true\"\n",
                "agents[0].name",
            ),
            (
                "[[agents]]\nname = \"a\"\ncommand = \"t\"\n[[agents]]\nname = \"a\"\ncommand = \"t\"\n",
                "agents[1].name `a`: another agent",
            ),
            (
                "[[agents]]\nname = \"a\"\ncommand = \" \"\n",
                "agents[0].command",
            ),
            (
                "[[agents]]\nname = \"a\"\ncommand = \"t\"\ncolour = 1\n",
                "colour",
            ),
        ];
        for (text, expected) in cases {
            let e = format!("{:#}", parse_agents(text, Path::new(".")).unwrap_err());
            assert!(e.contains(expected), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_matrix_pairs_each_seed_with_and_without_noise() {
        let agents = parse_agents(
            "[[agents]]\nname = \"a\"\ncommand = \"t\"\n[[agents]]\nname = \"b\"\ncommand = \"t\"\n",
            Path::new("."),
        )
        .unwrap();
        let problems = vec!["p1".to_string(), "p2".to_string()];
        let noise = parse_noise("on,off").unwrap();
        let all = cells(&agents, &problems, 3, &noise);
        assert_eq!(all.len(), 2 * 2 * 2 * 3);
        let keys: BTreeSet<_> = all.iter().map(|c| c.key.clone()).collect();
        assert_eq!(keys.len(), all.len(), "every cell has its own key");
        assert_eq!(all[0].key, "a/p1/noise-1");
        assert_eq!(all[3].key, "a/p1/quiet-1");
        assert_eq!((all[3].run, all[3].noise), (1, false));
        assert_eq!(parse_noise("off, on,off").unwrap(), vec![false, true]);
        assert!(parse_noise("maybe").unwrap_err().contains("maybe"));
    }
}
