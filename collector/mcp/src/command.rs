//! The rules a kubectl command line must pass before `exec_kubectl_cmd_safely` runs it, with no
//! IO: the line is split into words the way a POSIX shell would (quotes, backslashes), every
//! shell feature that would make it more than one kubectl invocation is refused (pipes,
//! redirects, `;`, `&&`, `||`, `&`, backticks, `$(...)`, variable expansion, subshells, comments),
//! and the words are classified: which subcommand, whether it reads or writes, whether the
//! server can dry-run it, and where its targets are (namespace, resource arguments).
//!
//! The words are handed to kubectl as an argument vector; no shell ever sees them. Refusing shell
//! syntax is therefore not what keeps the machine safe; it keeps an agent from believing a
//! pipeline ran (`kubectl get pods | grep geo` would otherwise reach kubectl as the arguments
//! `|`, `grep`, `geo`).

use std::fmt;

/// Why a command line was refused. The message is what the agent reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the command is empty: expected a single command starting with `kubectl`")]
    Empty,
    #[error("the command must start with `kubectl`, found `{0}`")]
    NotKubectl(String),
    #[error("unterminated {0} quote: every quote must be closed")]
    UnclosedQuote(&'static str),
    #[error("the command ends with a lone backslash")]
    TrailingBackslash,
    #[error(
        "shell syntax is not supported: {what} ({token}); run one kubectl command without pipes, redirects, command chaining or substitution, and filter with kubectl's own flags (-l, --field-selector, -o jsonpath=...)"
    )]
    ShellSyntax { what: &'static str, token: String },
    #[error("no kubectl subcommand given (e.g. `kubectl get pods`)")]
    NoSubcommand,
    #[error("`kubectl {0}` is not supported by this tool: {1}")]
    Unsupported(String, &'static str),
    #[error("unknown or disallowed kubectl subcommand `{0}`; supported: {SUPPORTED}")]
    Unknown(String),
    #[error(
        "the flag `{0}` is not allowed: the tool always talks to this session's cluster with its own credentials"
    )]
    ConnectionFlag(String),
}

/// The subcommands this tool runs, for the refusal message.
const SUPPORTED: &str = "get, describe, logs, top, explain, events, api-resources, api-versions, version, \
cluster-info, diff, auth can-i|whoami|reconcile, config view|get-contexts|current-context, \
rollout status|history|undo|restart|pause|resume, annotate, apply, autoscale, cordon, create, delete, \
drain, exec, expose, label, patch, replace, run, scale, set, taint, uncordon";

/// What running a command does to the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only (including any command the caller already made a dry run).
    Read,
    /// Writes; `kubectl ... --dry-run=server` checks it first.
    DryRunnable,
    /// Writes, but kubectl has no `--dry-run` for it (rollout restart|pause|resume, exec).
    NoDryRun,
}

/// How the targets of a write are found, so that it can be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Targets {
    /// The server dry run with `-o json` prints every object the write would leave behind.
    DryRunJson,
    /// The server dry run with `-o name` prints every object a delete would remove.
    DryRunNames,
    /// The positional arguments name nodes (cordon, uncordon, drain, taint node NAME).
    Nodes,
    /// The positional arguments are resource references (`deployment geo`, `deploy/geo`).
    ResourceArgs,
    /// Nothing to find: reads, and writes that cannot be undone (exec).
    None,
}

/// A command line that passed every rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The arguments after `kubectl`, in order.
    pub args: Vec<String>,
    /// The subcommand path, e.g. `get` or `rollout undo`.
    pub verb: String,
    /// Positional arguments after the subcommand path.
    pub positionals: Vec<String>,
    /// `-n`/`--namespace`, when given.
    pub namespace: Option<String>,
    /// `-A`/`--all-namespaces`.
    pub all_namespaces: bool,
    pub effect: Effect,
    pub targets: Targets,
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kubectl {}", self.args.join(" "))
    }
}

impl Checked {
    /// The arguments of the server dry run of this write, printing what `targets` needs.
    pub fn dry_run_args(&self) -> Vec<String> {
        let mut args = self.args.clone();
        args.push("--dry-run=server".into());
        // A later `-o` wins over the caller's own: the dry run's output is read by this tool,
        // and the caller's format applies to the real run.
        match self.targets {
            Targets::DryRunJson => args.extend(["-o".into(), "json".into()]),
            Targets::DryRunNames => args.extend(["-o".into(), "name".into()]),
            _ => {}
        }
        args
    }

    /// The nodes a node command names: `cordon a b`, `drain node/a`, `taint nodes a k=v:NoSchedule`.
    /// Empty when they are chosen by selector (then the write cannot be undone by this tool).
    pub fn node_names(&self) -> Vec<String> {
        let args: &[String] = match (self.verb.as_str(), self.positionals.split_first()) {
            ("taint", Some((kind, rest))) if is_node_kind(kind) => rest.get(..1).unwrap_or(&[]),
            ("taint", _) => &[],
            _ => &self.positionals,
        };
        args.iter()
            .filter(|a| !a.contains('='))
            .map(|a| match a.split_once('/') {
                Some((kind, name)) if is_node_kind(kind) => name.to_string(),
                _ => a.clone(),
            })
            .collect()
    }

    /// `-n NS` when the command named a namespace: the same scope for the follow-up reads of
    /// its targets (without it, kubectl's default namespace applies to both).
    pub fn namespace_args(&self) -> Vec<String> {
        match &self.namespace {
            Some(ns) => vec!["-n".into(), ns.clone()],
            None => Vec::new(),
        }
    }
}

fn is_node_kind(word: &str) -> bool {
    matches!(word, "node" | "nodes" | "no")
}

/// Splits, refuses and classifies a command line.
pub fn check(line: &str) -> Result<Checked, Refusal> {
    let words = split(line)?;
    let (first, rest) = words.split_first().ok_or(Refusal::Empty)?;
    if first != "kubectl" {
        return Err(Refusal::NotKubectl(first.clone()));
    }
    classify(rest.to_vec())
}

/// Splits a line into words as a POSIX shell does, refusing every shell feature beyond quoting.
pub fn split(line: &str) -> Result<Vec<String>, Refusal> {
    let mut words = Vec::new();
    let mut word = String::new();
    // Whether a word has started: `''` is an empty word, not nothing.
    let mut started = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            '\'' => {
                started = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(Refusal::UnclosedQuote("single")),
                    }
                }
            }
            '"' => {
                started = true;
                double_quoted(&mut chars, &mut word)?;
            }
            '\\' => {
                started = true;
                match chars.next() {
                    // A backslash-newline joins lines in a shell; here it is just a space.
                    Some('\n') => {}
                    Some(c) => word.push(c),
                    None => return Err(Refusal::TrailingBackslash),
                }
            }
            '$' => {
                refuse_expansion(chars.peek().copied())?;
                started = true;
                word.push(c);
            }
            '#' if !started => return Err(shell("a comment", "#")),
            _ => {
                if let Some(what) = operator(c) {
                    let mut token = c.to_string();
                    if let Some(&next) = chars.peek()
                        && (next == c || (c == '>' && next == '|') || (c == '&' && next == '>'))
                    {
                        token.push(next);
                    }
                    return Err(shell(what_of(&token, what), &token));
                }
                started = true;
                word.push(c);
            }
        }
    }
    if started {
        words.push(word);
    }
    Ok(words)
}

/// The inside of a double-quoted string: `\` escapes only `"`, `\`, `$`, `` ` `` and newline;
/// substitution is refused as it is outside quotes.
fn double_quoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    word: &mut String,
) -> Result<(), Refusal> {
    loop {
        match chars.next() {
            Some('"') => return Ok(()),
            Some('\\') => match chars.next() {
                Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                Some('\n') => {}
                Some(c) => {
                    word.push('\\');
                    word.push(c);
                }
                None => return Err(Refusal::UnclosedQuote("double")),
            },
            Some('`') => return Err(shell("command substitution", "`")),
            Some('$') => {
                refuse_expansion(chars.peek().copied())?;
                word.push('$');
            }
            Some(c) => word.push(c),
            None => return Err(Refusal::UnclosedQuote("double")),
        }
    }
}

/// `$(`, `${` and `$NAME` would be expanded by a shell; a `$` before anything else is literal.
fn refuse_expansion(next: Option<char>) -> Result<(), Refusal> {
    match next {
        Some('(') => Err(shell("command substitution", "$(")),
        Some('{') => Err(shell("variable expansion", "${")),
        Some(c) if c.is_ascii_alphanumeric() || "_?!#@*-$".contains(c) => {
            Err(shell("variable expansion", &format!("${c}")))
        }
        _ => Ok(()),
    }
}

/// The unquoted characters that end a simple command in a shell, and what they start.
fn operator(c: char) -> Option<&'static str> {
    match c {
        '|' => Some("a pipe"),
        '>' | '<' => Some("a redirect"),
        ';' | '\n' | '\r' => Some("a command separator"),
        '&' => Some("a background job or command chaining"),
        '`' => Some("command substitution"),
        '(' | ')' => Some("a subshell"),
        _ => None,
    }
}

/// The name of an operator once its second character is known (`||` chains, `|` pipes).
fn what_of(token: &str, single: &'static str) -> &'static str {
    match token {
        "||" | "&&" => "command chaining",
        "&>" | ">|" | ">>" | "<<" => "a redirect",
        _ => single,
    }
}

fn shell(what: &'static str, token: &str) -> Refusal {
    Refusal::ShellSyntax {
        what,
        token: token.escape_debug().to_string(),
    }
}

/// Flags that point kubectl at another cluster or identity: the session decides both.
const CONNECTION_FLAGS: &[&str] = &[
    "--kubeconfig",
    "--server",
    "-s",
    "--context",
    "--cluster",
    "--user",
    "--token",
    "--as",
    "--as-group",
    "--as-uid",
    "--username",
    "--password",
    "--certificate-authority",
    "--client-certificate",
    "--client-key",
    "--insecure-skip-tls-verify",
    "--tls-server-name",
];

/// Flags that take their value as the next word when written without `=`. Knowing them keeps a
/// value (`-n default`, `-o json`) from being read as a positional argument.
const VALUE_FLAGS: &[&str] = &[
    "-n",
    "--namespace",
    "-o",
    "--output",
    "-l",
    "--selector",
    "-f",
    "--filename",
    "-k",
    "--kustomize",
    "-c",
    "--container",
    "-p",
    "--patch",
    "--patch-file",
    "--type",
    "--field-selector",
    "--sort-by",
    "--template",
    "-L",
    "--label-columns",
    "--since",
    "--since-time",
    "--tail",
    "--limit-bytes",
    "--request-timeout",
    "--replicas",
    "--current-replicas",
    "--resource-version",
    "--image",
    "--port",
    "--target-port",
    "--protocol",
    "--name",
    "--overrides",
    "--timeout",
    "--grace-period",
    "--cascade",
    "--field-manager",
    "--revision",
    "--to-revision",
    "--from-literal",
    "--from-file",
    "--from-env-file",
    "-e",
    "--env",
    "--min",
    "--max",
    "--cpu-percent",
    "--limits",
    "--requests",
    "--containers",
    "--labels",
    "--chunk-size",
    "--pod-selector",
    "--subresource",
    "--for",
    "--types",
    "--for-object",
    "-v",
    "--v",
    "--log-file",
    "--cache-dir",
];

/// Splits arguments into flags and positionals; finds the namespace scope.
struct Parsed {
    positionals: Vec<String>,
    namespace: Option<String>,
    all_namespaces: bool,
    /// Long and short flag names given (without values), e.g. `--follow`, `-f`.
    flags: Vec<(String, Option<String>)>,
}

/// A flag's name and its value when written in the same word: `--output=json`, `-ojson`,
/// `-o=json` and `-lapp=geo` (kubectl's single-letter flags take the rest of the word). Combined
/// single-letter booleans (`-it`) stay one name.
fn flag_and_value(arg: &str) -> (String, Option<String>) {
    if let Some(short) = arg.strip_prefix('-').filter(|r| !r.starts_with('-')) {
        let mut chars = short.chars();
        let Some(first) = chars.next() else {
            return (arg.to_string(), None);
        };
        let flag = format!("-{first}");
        let tail = chars.as_str();
        return if tail.is_empty() {
            (flag, None)
        } else if VALUE_FLAGS.contains(&flag.as_str()) {
            let value = tail.strip_prefix('=').unwrap_or(tail);
            (flag, Some(value.to_string()))
        } else if let Some(value) = tail.strip_prefix('=') {
            (flag, Some(value.to_string()))
        } else {
            (arg.to_string(), None)
        };
    }
    match arg.split_once('=') {
        Some((n, v)) => (n.to_string(), Some(v.to_string())),
        None => (arg.to_string(), None),
    }
}

fn parse(args: &[String]) -> Result<Parsed, Refusal> {
    let mut p = Parsed {
        positionals: Vec::new(),
        namespace: None,
        all_namespaces: false,
        flags: Vec::new(),
    };
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        if arg == "--" {
            // Everything after `--` belongs to the container (`exec ... -- cmd`) or is a name.
            p.positionals.extend(args.iter().skip(i).cloned());
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            p.positionals.push(arg.clone());
            continue;
        }
        let (name, inline) = flag_and_value(arg);
        if CONNECTION_FLAGS.contains(&name.as_str()) {
            return Err(Refusal::ConnectionFlag(name));
        }
        let value = match inline {
            Some(v) => Some(v),
            None if VALUE_FLAGS.contains(&name.as_str()) => {
                i += 1;
                args.get(i - 1).cloned()
            }
            None => None,
        };
        match name.as_str() {
            "-n" | "--namespace" => p.namespace = value.clone(),
            "-A" | "--all-namespaces" => p.all_namespaces = value.as_deref() != Some("false"),
            _ => {}
        }
        p.flags.push((name, value));
    }
    Ok(p)
}

impl Parsed {
    fn has(&self, names: &[&str]) -> bool {
        self.flags
            .iter()
            .any(|(n, v)| names.contains(&n.as_str()) && v.as_deref() != Some("false"))
    }
}

/// Classifies the arguments after `kubectl`.
fn classify(args: Vec<String>) -> Result<Checked, Refusal> {
    let parsed = parse(&args)?;
    let mut positionals = parsed.positionals.iter();
    let verb = positionals.next().ok_or(Refusal::NoSubcommand)?.clone();
    let rest: Vec<String> = positionals.cloned().collect();
    let (verb, rest, effect, targets) = subcommand(&verb, rest, &parsed)?;
    // A command the caller already made a dry run (or asked help for) changes nothing. A bare
    // `--dry-run` is kubectl's deprecated spelling of a client dry run.
    let dry = parsed
        .flags
        .iter()
        .any(|(n, v)| n == "--dry-run" && v.as_deref() != Some("none"))
        || parsed.has(&["-h", "--help"]);
    let (effect, targets) = if dry {
        (Effect::Read, Targets::None)
    } else {
        (effect, targets)
    };
    Ok(Checked {
        args,
        verb,
        positionals: rest,
        namespace: parsed.namespace.clone(),
        all_namespaces: parsed.all_namespaces,
        effect,
        targets,
    })
}

type Classified = (String, Vec<String>, Effect, Targets);

/// Flags that attach a terminal or stdin, which this tool cannot offer.
const INTERACTIVE: &[&str] = &["-i", "--stdin", "-t", "--tty", "-it", "-ti"];

/// The rules per subcommand: refused, read, or a write and how its targets are found.
fn subcommand(verb: &str, rest: Vec<String>, p: &Parsed) -> Result<Classified, Refusal> {
    use Effect::*;
    let unsupported = |why| Err(Refusal::Unsupported(verb.to_string(), why));
    let read = |rest| Ok((verb.to_string(), rest, Read, Targets::None));
    let write = |rest, targets| Ok((verb.to_string(), rest, DryRunnable, targets));
    match verb {
        "debug" => unsupported("it starts interactive debug containers"),
        "edit" => unsupported("it opens an editor; use `kubectl patch` or `kubectl apply`"),
        "wait" => unsupported("it blocks; poll with `kubectl get` instead"),
        "proxy" | "port-forward" => unsupported("it serves until stopped"),
        "cp" => unsupported("it copies files through a container shell"),
        "attach" => unsupported("it streams a container's console until stopped"),
        "logs" if p.has(&["-f", "--follow"]) => Err(Refusal::Unsupported(
            "logs -f".into(),
            "it streams until stopped; use `kubectl logs --tail=N` or `--since=5m`",
        )),
        "get" if p.has(&["-w", "--watch", "--watch-only"]) => Err(Refusal::Unsupported(
            "get -w".into(),
            "it watches until stopped; run `kubectl get` again instead",
        )),
        "exec" if p.has(INTERACTIVE) => Err(Refusal::Unsupported(
            "exec -it".into(),
            "there is no terminal to attach",
        )),
        "run" if p.has(INTERACTIVE) || p.has(&["--attach", "--rm"]) => Err(Refusal::Unsupported(
            "run -i".into(),
            "there is no terminal to attach",
        )),
        "get" | "describe" | "logs" | "top" | "explain" | "events" | "api-resources"
        | "api-versions" | "version" | "cluster-info" | "diff" => read(rest),
        "annotate" | "apply" | "autoscale" | "create" | "expose" | "label" | "patch"
        | "replace" | "run" | "set" => write(rest, Targets::DryRunJson),
        // kubectl scale prints the object as it read it before scaling, even from a server dry
        // run: its output cannot tell a change from none, so the named targets are saved.
        "scale" => write(rest, Targets::ResourceArgs),
        "delete" => write(rest, Targets::DryRunNames),
        "cordon" | "uncordon" | "drain" | "taint" => write(rest, Targets::Nodes),
        "exec" => Ok((verb.to_string(), rest, NoDryRun, Targets::None)),
        "rollout" | "auth" | "config" => nested(verb, rest),
        _ => Err(Refusal::Unknown(verb.to_string())),
    }
}

/// Subcommands with their own subcommands (`rollout undo`, `auth can-i`, `config view`).
fn nested(verb: &str, rest: Vec<String>) -> Result<Classified, Refusal> {
    use Effect::*;
    let (sub, rest) = match rest.split_first() {
        Some((sub, rest)) => (sub.clone(), rest.to_vec()),
        None => return Err(Refusal::Unknown(verb.to_string())),
    };
    let path = format!("{verb} {sub}");
    let (effect, targets) = match path.as_str() {
        "rollout status" | "rollout history" => (Read, Targets::None),
        "rollout undo" => (DryRunnable, Targets::DryRunJson),
        "rollout restart" | "rollout pause" | "rollout resume" => (NoDryRun, Targets::ResourceArgs),
        "auth can-i" | "auth whoami" => (Read, Targets::None),
        "auth reconcile" => (DryRunnable, Targets::DryRunJson),
        "config view" | "config get-contexts" | "config current-context" => (Read, Targets::None),
        _ if verb == "config" => {
            return Err(Refusal::Unsupported(
                path,
                "it would change the session's kubeconfig; only view, get-contexts and current-context are allowed",
            ));
        }
        _ => return Err(Refusal::Unknown(path)),
    };
    Ok((path, rest, effect, targets))
}

#[cfg(test)]
mod tests;
