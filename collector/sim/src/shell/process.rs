//! A process started by `kubectl exec` (or reached by `kubectl attach`) as its streams see it:
//! a command that runs at once, one that first reads its stdin to the end (`cat`, `sh -c` with a
//! pipe into it), or an interactive shell that runs each line as it arrives. On a terminal
//! (`-t`) the line discipline is the kernel's: input is echoed, backspace erases, Ctrl-C drops
//! the line, Ctrl-D on an empty line ends the shell, output newlines become CR LF and a prompt
//! follows every command.

use super::parse::{self, Command, Part};
use super::{Model, Output, Session};

/// Bytes of stdin a command may be handed (more is dropped, as a full pipe would block).
const MAX_STDIN: usize = 1 << 20;
/// Longest line an interactive shell takes.
const MAX_LINE: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq)]
enum Mode {
    /// Reading stdin to the end, then running `argv` with it.
    Buffering(Vec<String>),
    /// A shell reading commands line by line.
    Interactive,
    /// The main process of a container that does not read stdin: nothing to do until the
    /// client leaves.
    Idle,
    Done,
}

/// A running process and its terminal.
pub struct Process {
    pub session: Session,
    mode: Mode,
    tty: bool,
    line: Vec<u8>,
    stdin: Vec<u8>,
}

/// Commands that read their stdin when given no file.
const STDIN_READERS: &[&str] = &[
    "cat",
    "grep",
    "egrep",
    "head",
    "tail",
    "wc",
    "sort",
    "uniq",
    "cut",
    "tr",
    "sed",
    "awk",
    "tee",
    "xargs",
    "nc",
    "mongo",
    "mongosh",
    "redis-cli",
    "valkey-cli",
    "psql",
    "sh",
    "bash",
    "ash",
    "read",
];

fn is_shell(arg: &str) -> bool {
    matches!(arg.rsplit('/').next(), Some("sh" | "bash" | "ash"))
}

/// Whether `argv` reads stdin: a stdin reader with no operand, or a shell script whose
/// pipelines start with one.
fn reads_stdin(argv: &[String]) -> bool {
    let Some(first) = argv.first() else {
        return false;
    };
    if is_shell(first) {
        let script = argv
            .iter()
            .position(|a| a.starts_with('-') && a.contains('c'))
            .and_then(|i| argv.get(i + 1));
        let Some(src) = script else {
            return true;
        };
        let Ok(parsed) = parse::parse(src) else {
            return false;
        };
        return parsed.0.iter().any(|ao| {
            std::iter::once(&ao.first)
                .chain(ao.rest.iter().map(|(_, p)| p))
                .any(|p| match p.commands.first() {
                    Some(Command::Simple(s)) => {
                        let words: Vec<String> = s
                            .words
                            .iter()
                            .map(|w| {
                                w.0.iter()
                                    .map(|part| match part {
                                        Part::Text(t, _) => t.clone(),
                                        _ => "$".into(),
                                    })
                                    .collect()
                            })
                            .collect();
                        !is_shell(words.first().map_or("", String::as_str)) && reads_stdin(&words)
                    }
                    _ => false,
                })
        });
    }
    let name = first.rsplit('/').next().unwrap_or(first);
    if !STDIN_READERS.contains(&name) {
        return false;
    }
    match name {
        "mongo" | "mongosh" => !argv.iter().any(|a| a == "--eval"),
        "psql" => !argv.iter().any(|a| a == "-c"),
        "redis-cli" | "valkey-cli" => argv.iter().skip(1).all(|a| a.starts_with('-')),
        "grep" | "egrep" | "sed" | "awk" => {
            argv.iter().skip(1).filter(|a| !a.starts_with('-')).count() <= 1
        }
        _ => argv.iter().skip(1).all(|a| a.starts_with('-')),
    }
}

impl Process {
    /// Starts `argv` (empty: attach to the container's main process); `stdin` says whether the
    /// client sends any.
    pub fn start(
        m: &mut Model,
        session: Session,
        argv: &[String],
        stdin: bool,
        tty: bool,
    ) -> (Process, Output) {
        let interactive_shell = argv.len() == 1 && is_shell(&argv[0]) && session.shell().is_some();
        let attach_shell = argv.is_empty()
            && stdin
            && m.world
                .pods
                .get(&session.target.pod)
                .and_then(|p| p.container(session.target.slot))
                .is_some_and(|c| {
                    let main = super::fs::main_argv(m, c);
                    main.len() == 1 && is_shell(&main[0])
                });
        let mut p = Process {
            session,
            mode: Mode::Done,
            tty,
            line: vec![],
            stdin: vec![],
        };
        let mut out = Output::default();
        if (interactive_shell && stdin) || attach_shell {
            p.mode = Mode::Interactive;
            if tty {
                out.stdout = p.session.prompt().into_bytes();
            }
        } else if argv.is_empty() {
            p.mode = Mode::Idle;
        } else if stdin && reads_stdin(argv) {
            p.mode = Mode::Buffering(argv.to_vec());
        } else {
            out = p.session.exec(m, argv, b"");
            p.mode = Mode::Done;
        }
        p.terminal(&mut out);
        (p, out)
    }

    /// Input from the client.
    pub fn input(&mut self, m: &mut Model, data: &[u8]) -> Output {
        let mut out = Output::default();
        match &self.mode {
            Mode::Buffering(_) => {
                let room = MAX_STDIN.saturating_sub(self.stdin.len());
                self.stdin.extend_from_slice(&data[..data.len().min(room)]);
            }
            Mode::Interactive if self.tty => self.keys(m, data, &mut out),
            Mode::Interactive => {
                self.line.extend_from_slice(data);
                while let Some(i) = self.line.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = self.line.drain(..=i).collect();
                    self.run_line(m, &line, &mut out);
                    if out.exit.is_some() {
                        break;
                    }
                }
                if self.line.len() > MAX_LINE {
                    self.line.clear();
                }
            }
            Mode::Idle | Mode::Done => {}
        }
        self.terminal(&mut out);
        out
    }

    /// The client closed stdin.
    pub fn close_stdin(&mut self, m: &mut Model) -> Output {
        let mut out = Output::default();
        match std::mem::replace(&mut self.mode, Mode::Done) {
            Mode::Buffering(argv) => {
                let stdin = std::mem::take(&mut self.stdin);
                out = self.session.exec(m, &argv, &stdin);
            }
            Mode::Interactive => {
                if !self.line.is_empty() {
                    let line = std::mem::take(&mut self.line);
                    self.run_line(m, &line, &mut out);
                }
                out.exit.get_or_insert(self.session.status);
            }
            Mode::Idle => self.mode = Mode::Idle,
            Mode::Done => {}
        }
        self.terminal(&mut out);
        out
    }

    /// Whether the process has ended.
    pub fn done(&self) -> bool {
        self.mode == Mode::Done
    }

    fn run_line(&mut self, m: &mut Model, line: &[u8], out: &mut Output) {
        let src = String::from_utf8_lossy(line).into_owned();
        let o = self.session.line(m, &src);
        out.stdout.extend(o.stdout);
        out.stderr.extend(o.stderr);
        out.elapsed_ms += o.elapsed_ms;
        if let Some(code) = o.exit {
            out.exit = Some(code);
            self.mode = Mode::Done;
        }
    }

    /// Keystrokes on a terminal: echo, erase, interrupt, end of input, and a line at Enter.
    fn keys(&mut self, m: &mut Model, data: &[u8], out: &mut Output) {
        let mut i = 0;
        while i < data.len() && self.mode == Mode::Interactive {
            match data[i] {
                b'\r' | b'\n' => {
                    out.stdout.extend_from_slice(b"\r\n");
                    let line = std::mem::take(&mut self.line);
                    self.run_line(m, &line, out);
                    if self.mode == Mode::Interactive {
                        out.stdout.extend(self.session.prompt().into_bytes());
                    }
                }
                0x7f | 0x08 => {
                    // Not a guard: a DEL on an empty line must not reach the printable arm.
                    let erased = self.line.pop().is_some();
                    if erased {
                        out.stdout.extend_from_slice(b"\x08 \x08");
                    }
                }
                0x03 => {
                    self.line.clear();
                    out.stdout.extend_from_slice(b"^C\r\n");
                    out.stdout.extend(self.session.prompt().into_bytes());
                }
                0x04 if self.line.is_empty() => {
                    out.stdout.extend_from_slice(b"exit\r\n");
                    out.exit = Some(self.session.status);
                    self.mode = Mode::Done;
                }
                // Escape sequences (arrow keys): no history here, skip them.
                0x1b => i += 2,
                b if b >= 0x20 && self.line.len() < MAX_LINE => {
                    self.line.push(b);
                    out.stdout.push(b);
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// On a terminal, stderr is the terminal too and newlines go out as CR LF.
    fn terminal(&self, out: &mut Output) {
        if !self.tty {
            return;
        }
        let err = std::mem::take(&mut out.stderr);
        out.stdout.extend(err);
        let mut crlf = Vec::with_capacity(out.stdout.len());
        let mut prev = 0u8;
        for &b in &out.stdout {
            if b == b'\n' && prev != b'\r' {
                crlf.push(b'\r');
            }
            crlf.push(b);
            prev = b;
        }
        out.stdout = crlf;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn who_waits_for_stdin() {
        assert!(reads_stdin(&argv(&["cat"])));
        assert!(!reads_stdin(&argv(&["cat", "/etc/hosts"])));
        assert!(reads_stdin(&argv(&["grep", "x"])));
        assert!(!reads_stdin(&argv(&["grep", "x", "/f"])));
        assert!(!reads_stdin(&argv(&["ls", "/"])));
        assert!(reads_stdin(&argv(&["sh"])));
        assert!(!reads_stdin(&argv(&["sh", "-c", "ls /; env"])));
        assert!(reads_stdin(&argv(&["sh", "-c", "cat > /tmp/x"])));
        assert!(reads_stdin(&argv(&["mongo", "admin"])));
        assert!(!reads_stdin(&argv(&[
            "mongo",
            "admin",
            "--eval",
            "db.getUsers()"
        ])));
    }
}
