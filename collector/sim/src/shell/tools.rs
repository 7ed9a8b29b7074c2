//! Coreutils-style commands over the container's files and the model: `cat`, `ls`, `env`, text
//! filters (`grep`, `head`, `tail`, `wc`, `sort`, `uniq`, `cut`, `tr`, `sed`, `awk`), process
//! and system views (`ps`, `df`, `free`, `uname`, `netstat`/`ss`, `ip`), and the session's
//! writable files (`touch`, `mkdir`, `rm`, `tee`). Options are the ones agents use; an unknown
//! one is refused as the real tool refuses it.

use super::fs::{self, Node};
use super::image::toolbox;
use super::run::{Ctx, Io, command};
use crate::objects::CState;
use crate::programs;

/// Runs tool `name` with `args`; returns the exit status.
pub fn run(ctx: &mut Ctx, name: &str, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    match name {
        "cat" => cat(ctx, args, stdin, io),
        "ls" => ls(ctx, args, io),
        "env" | "printenv" => env(ctx, name, args, stdin, io),
        "head" | "tail" => head_tail(ctx, name, args, stdin, io),
        "grep" | "egrep" => grep(ctx, name, args, stdin, io),
        "wc" => wc(ctx, args, stdin, io),
        "sort" | "uniq" | "cut" | "tr" | "sed" | "awk" | "tee" | "xargs" => {
            filter(ctx, name, args, stdin, io)
        }
        "hostname" => {
            io.out_line(&ctx.s.target.pod.1);
            0
        }
        "id" => {
            io.out_line(if args.iter().any(|a| a == "-u") {
                "0"
            } else {
                "uid=0(root) gid=0(root) groups=0(root)"
            });
            0
        }
        "whoami" => {
            io.out_line("root");
            0
        }
        "uname" => {
            io.out_line(if args.iter().any(|a| a.contains('a')) {
                format!(
                    "Linux {} 6.1.0-28-cloud-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22) x86_64 GNU/Linux",
                    ctx.s.target.pod.1
                )
            } else if args.iter().any(|a| a.contains('r')) {
                "6.1.0-28-cloud-amd64".into()
            } else {
                "Linux".into()
            });
            0
        }
        "nproc" => {
            let cpus = (ctx.m.host(&ctx.s.target.pod).1 / 1000).max(1);
            io.out_line(cpus.to_string());
            0
        }
        "date" => date(ctx, args, io),
        "seq" => seq(args, io),
        "yes" => {
            let word = args.first().map_or("y", String::as_str);
            let line = format!("{word}\n");
            let n = ctx.s.limits.output_bytes / line.len().max(1) + 1;
            io.out.extend(line.as_bytes().repeat(n));
            // The reader stopped reading (or the session's output limit did).
            141
        }
        "timeout" => {
            let rest: Vec<String> = args
                .iter()
                .skip_while(|a| a.starts_with('-'))
                .skip(1)
                .cloned()
                .collect();
            if rest.is_empty() {
                io.err_line("timeout: missing operand");
                return 125;
            }
            command(ctx, &rest, stdin, io).code_of()
        }
        "ps" | "pgrep" | "top" => ps(ctx, name, args, io),
        "kill" => 0,
        "df" => df(ctx, args, io),
        "free" => free(ctx, args, io),
        "uptime" => {
            io.out_line(" 08:15:02 up 1 day,  2:03,  0 users,  load average: 0.42, 0.38, 0.35");
            0
        }
        "mount" => {
            let mut lines = vec!["overlay on / type overlay (rw,relatime)".to_string()];
            if let Some(p) = ctx.m.world.pods.get(&ctx.s.target.pod)
                && let Some(c) = p.container(ctx.s.target.slot)
            {
                for vm in &c.volume_mounts {
                    lines.push(format!(
                        "/dev/vda1 on {} type ext4 ({},relatime)",
                        vm.mount_path,
                        if vm.read_only { "ro" } else { "rw" }
                    ));
                }
            }
            for l in lines {
                io.out_line(l);
            }
            0
        }
        "netstat" | "ss" => sockets(ctx, name, io),
        "ip" | "ifconfig" => interfaces(ctx, name, args, io),
        "touch" | "mkdir" | "rm" | "cp" | "mv" => files(ctx, name, args, io),
        "basename" | "dirname" | "readlink" => paths(ctx, name, args, io),
        "find" => find(ctx, args, io),
        other => {
            io.err_line(format!(
                "{other}: invalid option -- '{}'",
                args.first().map_or("", |a| a.trim_start_matches('-'))
            ));
            1
        }
    }
}

trait CodeOf {
    fn code_of(self) -> i32;
}

impl CodeOf for super::run::Flow {
    fn code_of(self) -> i32 {
        match self {
            super::run::Flow::Status(c) | super::run::Flow::Exit(c) => c,
        }
    }
}

/// The error prefix of a tool's messages.
fn fail(io: &mut Io, tool: &str, path: &str, e: fs::FsError, busybox: bool) {
    if busybox || tool != "ls" {
        io.err_line(format!("{tool}: {path}: {}", e.text()));
    } else {
        io.err_line(format!("{tool}: cannot access '{path}': {}", e.text()));
    }
}

/// The bytes a filter reads: its file operands, or stdin.
fn inputs(
    ctx: &mut Ctx,
    tool: &str,
    files: &[&String],
    stdin: &[u8],
    io: &mut Io,
) -> (Vec<u8>, i32) {
    if files.is_empty() || files.iter().all(|f| *f == "-") {
        return (stdin.to_vec(), 0);
    }
    let mut data = vec![];
    let mut code = 0;
    for f in files {
        match fs::read(ctx.s, ctx.m, f) {
            Ok(d) => data.extend(d),
            Err(e) => {
                fail(io, tool, f, e, true);
                code = 1;
            }
        }
    }
    (data, code)
}

fn operands(args: &[String]) -> Vec<&String> {
    args.iter()
        .filter(|a| !a.starts_with('-') || *a == "-")
        .collect()
}

fn cat(ctx: &mut Ctx, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    let files = operands(args);
    let (data, code) = inputs(ctx, "cat", &files, stdin, io);
    io.out.extend(data);
    code
}

fn ls(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let flags: String = args
        .iter()
        .filter(|a| a.starts_with('-'))
        .flat_map(|a| a.chars().skip(1))
        .collect();
    let (long, all) = (
        flags.contains('l'),
        flags.contains('a') || flags.contains('A'),
    );
    let mut targets: Vec<String> = operands(args).into_iter().cloned().collect();
    if targets.is_empty() {
        targets.push(".".into());
    }
    let busybox = toolbox(&ctx.s.target.image).busybox();
    let many = targets.len() > 1;
    let mut code = 0;
    for (i, t) in targets.iter().enumerate() {
        let entries = match fs::list(ctx.s, ctx.m, t) {
            Ok(e) => e,
            Err(e) => {
                fail(io, "ls", t, e, busybox);
                code = 2;
                continue;
            }
        };
        if many {
            if i > 0 {
                io.out_line("");
            }
            io.out_line(format!("{t}:"));
        }
        for (name, node) in entries {
            if name.starts_with('.') && !all {
                continue;
            }
            if !long {
                io.out_line(name);
                continue;
            }
            let (mode, size, suffix) = match &node {
                Node::Dir => ("drwxr-xr-x", 4096, String::new()),
                Node::File(d) => ("-rw-r--r--", d.len(), String::new()),
                Node::Link(to) => ("lrwxrwxrwx", to.len(), format!(" -> {to}")),
            };
            io.out_line(format!(
                "{mode}    1 root     root     {size:>8} Nov 20 08:15 {name}{suffix}"
            ));
        }
    }
    code
}

fn env(ctx: &mut Ctx, name: &str, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    if name == "printenv"
        && let Some(var) = args.first()
    {
        return match ctx.s.vars.get(var) {
            Some(v) => {
                io.out_line(v);
                0
            }
            None => 1,
        };
    }
    // `env A=b cmd`: run a command with more variables.
    let assigns: Vec<&String> = args.iter().take_while(|a| a.contains('=')).collect();
    let rest: Vec<String> = args[assigns.len()..].to_vec();
    if !rest.is_empty() {
        let saved = ctx.s.vars.clone();
        for a in &assigns {
            if let Some((k, v)) = a.split_once('=') {
                ctx.s.vars.insert(k.into(), v.into());
            }
        }
        let flow = command(ctx, &rest, stdin, io);
        ctx.s.vars = saved;
        return flow.code_of();
    }
    let vars: Vec<String> = ctx.s.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for v in vars {
        io.out_line(v);
    }
    0
}

/// Lines of a byte buffer, keeping a last line without its newline.
fn lines(data: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    if data.ends_with(b"\n") || data.is_empty() {
        v.pop();
    }
    v
}

fn push_lines(io: &mut Io, ls: &[&[u8]]) {
    for l in ls {
        io.out.extend_from_slice(l);
        io.out.push(b'\n');
    }
}

/// `-n N`, `-N` or `-nN`, and `-c N` for bytes.
fn count_option(args: &[String]) -> (Option<usize>, Option<usize>, bool, Vec<&String>) {
    let (mut n, mut c, mut from_start) = (None, None, false);
    let mut files = vec![];
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let num = |s: &str| -> Option<usize> { s.trim_start_matches('+').parse().ok() };
        if a == "-n" || a == "-c" {
            let v = args.get(i + 1).map(String::as_str).unwrap_or("10");
            from_start |= v.starts_with('+');
            if a == "-n" {
                n = num(v);
            } else {
                c = num(v);
            }
            i += 2;
            continue;
        }
        if let Some(v) = a.strip_prefix("-n") {
            from_start |= v.starts_with('+');
            n = num(v);
        } else if let Some(v) = a
            .strip_prefix('-')
            .filter(|v| v.chars().all(|c| c.is_ascii_digit()) && !v.is_empty())
        {
            n = num(v);
        } else if !a.starts_with('-') || a == "-" {
            files.push(a);
        }
        i += 1;
    }
    (n, c, from_start, files)
}

fn head_tail(ctx: &mut Ctx, name: &str, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    let (n, c, from_start, files) = count_option(args);
    let (data, code) = inputs(ctx, name, &files, stdin, io);
    if let Some(c) = c {
        let c = c.min(data.len());
        io.out.extend_from_slice(if name == "head" {
            &data[..c]
        } else {
            &data[data.len() - c..]
        });
        return code;
    }
    let all = lines(&data);
    let n = n.unwrap_or(10);
    let picked: &[&[u8]] = match (name, from_start) {
        ("head", _) => &all[..n.min(all.len())],
        (_, true) => &all[n.saturating_sub(1).min(all.len())..],
        _ => &all[all.len().saturating_sub(n)..],
    };
    push_lines(io, picked);
    code
}

fn grep(ctx: &mut Ctx, name: &str, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    let mut flags = String::new();
    let mut rest = vec![];
    let mut pattern: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "-e" {
            pattern = args.get(i + 1).cloned();
            i += 2;
            continue;
        }
        if a.starts_with('-') && a.len() > 1 && !a.starts_with("--") {
            flags.push_str(&a[1..]);
        } else if a.starts_with("--") {
            if a == "--ignore-case" {
                flags.push('i');
            }
        } else if pattern.is_none() {
            pattern = Some(a.clone());
        } else {
            rest.push(a);
        }
        i += 1;
    }
    let Some(pattern) = pattern else {
        io.err_line("Usage: grep [OPTION]... PATTERNS [FILE]...");
        return 2;
    };
    let extended = name == "egrep" || flags.contains('E');
    let fixed = flags.contains('F');
    let source = if fixed {
        regex::escape(&pattern)
    } else if extended {
        pattern.clone()
    } else {
        basic_to_extended(&pattern)
    };
    let re = regex::RegexBuilder::new(&source)
        .case_insensitive(flags.contains('i'))
        .size_limit(1 << 20)
        .build();
    let Ok(re) = re else {
        io.err_line(format!("grep: Invalid regular expression: {pattern}"));
        return 2;
    };
    let (data, code) = inputs(ctx, "grep", &rest, stdin, io);
    let invert = flags.contains('v');
    let mut count = 0;
    for (n, l) in lines(&data).into_iter().enumerate() {
        let text = String::from_utf8_lossy(l);
        if re.is_match(&text) == invert {
            continue;
        }
        count += 1;
        if flags.contains('q') || flags.contains('c') || flags.contains('l') {
            continue;
        }
        if flags.contains('o') {
            for m in re.find_iter(&text) {
                io.out_line(m.as_str());
            }
        } else if flags.contains('n') {
            io.out_line(format!("{}:{text}", n + 1));
        } else {
            io.out_line(text);
        }
    }
    if flags.contains('c') {
        io.out_line(count.to_string());
    }
    if code != 0 {
        return 2;
    }
    i32::from(count == 0)
}

/// A POSIX basic regular expression in the regex crate's (extended) syntax: `\|`, `\+`, `\?`,
/// `\(`, `\)` are the operators there; the bare characters are literals.
fn basic_to_extended(p: &str) -> String {
    let mut out = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('|' | '+' | '?' | '(' | ')' | '{' | '}')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            },
            '|' | '+' | '?' | '(' | ')' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

fn wc(ctx: &mut Ctx, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    let files = operands(args);
    let (data, code) = inputs(ctx, "wc", &files, stdin, io);
    let l = data.iter().filter(|b| **b == b'\n').count();
    let w = String::from_utf8_lossy(&data).split_whitespace().count();
    let c = data.len();
    let flags: String = args
        .iter()
        .filter(|a| a.starts_with('-'))
        .flat_map(|a| a.chars())
        .collect();
    let mut cols = vec![];
    if flags.contains('l') {
        cols.push(l);
    }
    if flags.contains('w') {
        cols.push(w);
    }
    if flags.contains('c') || flags.contains('m') {
        cols.push(c);
    }
    if cols.is_empty() {
        cols = vec![l, w, c];
    }
    let text: Vec<String> = cols.iter().map(|n| n.to_string()).collect();
    io.out_line(text.join(" "));
    code
}

/// The text filters that take a whole input: sort, uniq, cut, tr, sed, awk, tee, xargs.
fn filter(ctx: &mut Ctx, name: &str, args: &[String], stdin: &[u8], io: &mut Io) -> i32 {
    // File operands: what is left after the options (and their values) and, for sed and awk,
    // the script.
    let mut files = vec![];
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if matches!(a.as_str(), "-d" | "-f" | "-F" | "-e" | "-k" | "-t") {
            i += 2;
            continue;
        }
        if !a.starts_with('-') || a == "-" {
            files.push(a);
        }
        i += 1;
    }
    if matches!(name, "sed" | "awk") && !files.is_empty() {
        files.remove(0);
    }
    if matches!(name, "tr" | "tee" | "xargs") {
        files.clear();
    }
    let (data, code) = inputs(ctx, name, &files, stdin, io);
    if code != 0 {
        return code;
    }
    let text = String::from_utf8_lossy(&data).into_owned();
    let input: Vec<&str> = text.lines().collect();
    match name {
        "sort" => {
            let flags: String = args
                .iter()
                .filter(|a| a.starts_with('-'))
                .map(String::as_str)
                .collect();
            let mut v: Vec<&str> = input;
            if flags.contains('n') {
                v.sort_by(|a, b| {
                    let num = |s: &str| {
                        s.split_whitespace()
                            .next()
                            .and_then(|x| x.parse::<f64>().ok())
                            .unwrap_or(0.0)
                    };
                    num(a).total_cmp(&num(b))
                });
            } else {
                v.sort_unstable();
            }
            if flags.contains('r') {
                v.reverse();
            }
            if flags.contains('u') {
                v.dedup();
            }
            for l in v {
                io.out_line(l);
            }
            0
        }
        "uniq" => {
            let count = args.iter().any(|a| a == "-c");
            let mut i = 0;
            while i < input.len() {
                let run = input[i..].iter().take_while(|l| **l == input[i]).count();
                if count {
                    io.out_line(format!("{run:>7} {}", input[i]));
                } else {
                    io.out_line(input[i]);
                }
                i += run;
            }
            0
        }
        "cut" => cut(args, &input, io),
        "tr" => tr(args, &text, io),
        "sed" => sed(args, &input, io),
        "awk" => awk(args, &input, io),
        "tee" => {
            for f in operands(args) {
                let path = fs::absolute(&ctx.s.cwd, f);
                ctx.s.files.insert(path, stdin.to_vec());
            }
            io.out.extend_from_slice(stdin);
            0
        }
        _ => {
            // xargs: the input's words appended to the command.
            let mut argv: Vec<String> = if args.is_empty() {
                vec!["echo".into()]
            } else {
                args.to_vec()
            };
            argv.extend(text.split_whitespace().map(str::to_string));
            command(ctx, &argv, b"", io).code_of()
        }
    }
}

fn option_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(flag)
        }
    })
}

fn cut(args: &[String], input: &[&str], io: &mut Io) -> i32 {
    let delim = option_value(args, "-d").unwrap_or("\t");
    let Some(fields) = option_value(args, "-f") else {
        io.err_line("cut: you must specify a list of bytes, characters, or fields");
        return 1;
    };
    let wanted: Vec<usize> = fields.split(',').filter_map(|f| f.parse().ok()).collect();
    for l in input {
        let parts: Vec<&str> = l.split(delim).collect();
        let picked: Vec<&str> = wanted
            .iter()
            .filter_map(|i| parts.get(i.wrapping_sub(1)).copied())
            .collect();
        io.out_line(picked.join(delim));
    }
    0
}

fn tr(args: &[String], text: &str, io: &mut Io) -> i32 {
    let ops = operands(args);
    let expand = |s: &str| -> Vec<char> {
        match s {
            "[:upper:]" | "A-Z" => ('A'..='Z').collect(),
            "[:lower:]" | "a-z" => ('a'..='z').collect(),
            s => s.replace("\\n", "\n").chars().collect(),
        }
    };
    let out: String = if args.iter().any(|a| a == "-d") {
        let del = expand(ops.first().map_or("", |s| s.as_str()));
        text.chars().filter(|c| !del.contains(c)).collect()
    } else {
        let (from, to) = (
            expand(ops.first().map_or("", |s| s.as_str())),
            expand(ops.get(1).map_or("", |s| s.as_str())),
        );
        text.chars()
            .map(|c| match from.iter().position(|f| *f == c) {
                Some(i) => *to.get(i).or(to.last()).unwrap_or(&c),
                None => c,
            })
            .collect()
    };
    io.out.extend(out.into_bytes());
    0
}

/// `sed -n 'Np'`, `sed 's/a/b/[g]'`, `sed 'Nd'`, `sed -n '/re/p'`.
fn sed(args: &[String], input: &[&str], io: &mut Io) -> i32 {
    let quiet = args.iter().any(|a| a == "-n");
    let Some(expr) = args.iter().find(|a| !a.starts_with('-')) else {
        io.err_line("Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...");
        return 1;
    };
    if let Some(body) = expr.strip_prefix('s')
        && body.len() > 1
    {
        let sep = body.chars().next().unwrap_or('/');
        let parts: Vec<&str> = body[sep.len_utf8()..].split(sep).collect();
        let (Some(pat), Some(rep)) = (parts.first(), parts.get(1)) else {
            io.err_line(format!(
                "sed: -e expression #1, char {}: unterminated `s' command",
                expr.len()
            ));
            return 1;
        };
        let Ok(re) = regex::Regex::new(&basic_to_extended(pat)) else {
            io.err_line("sed: -e expression #1: invalid regular expression");
            return 1;
        };
        let global = parts.get(2).is_some_and(|f| f.contains('g'));
        let rep = rep.replace('&', "$0");
        for l in input {
            let out = if global {
                re.replace_all(l, rep.as_str())
            } else {
                re.replace(l, rep.as_str())
            };
            if !quiet {
                io.out_line(out);
            }
        }
        return 0;
    }
    let (addr, cmd) = expr.split_at(expr.len().saturating_sub(1));
    let selected = |i: usize, l: &str| -> bool {
        if let Ok(n) = addr.parse::<usize>() {
            return i + 1 == n;
        }
        if let Some((a, b)) = addr.split_once(',') {
            let (a, b) = (a.parse().unwrap_or(1), b.parse().unwrap_or(usize::MAX));
            return (a..=b).contains(&(i + 1));
        }
        let re = addr.trim_matches('/');
        regex::Regex::new(&basic_to_extended(re)).is_ok_and(|r| r.is_match(l))
    };
    for (i, l) in input.iter().enumerate() {
        let hit = selected(i, l);
        match cmd {
            "p" if hit => io.out_line(l),
            "d" if hit => continue,
            _ => {}
        }
        if !(quiet || cmd == "d" && hit) {
            io.out_line(l);
        }
    }
    0
}

/// `awk '{print $N, $M}'` with `-F`.
fn awk(args: &[String], input: &[&str], io: &mut Io) -> i32 {
    let sep = option_value(args, "-F");
    let Some(prog) = args.iter().rev().find(|a| a.contains('{')) else {
        io.err_line("awk: usage: awk [-F fs] 'program' [file ...]");
        return 2;
    };
    let fields: Vec<String> = prog
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim()
        .trim_start_matches("print")
        .split(',')
        .map(|f| f.trim().to_string())
        .collect();
    for l in input {
        let parts: Vec<&str> = match sep {
            Some(s) => l.split(s).collect(),
            None => l.split_whitespace().collect(),
        };
        let out: Vec<String> = fields
            .iter()
            .map(
                |f| match f.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                    Some(0) => l.to_string(),
                    Some(n) => parts.get(n - 1).map_or(String::new(), |s| s.to_string()),
                    None if f == "NF" => parts.len().to_string(),
                    None => f.trim_matches('"').to_string(),
                },
            )
            .collect();
        io.out_line(out.join(" "));
    }
    0
}

fn seq(args: &[String], io: &mut Io) -> i32 {
    let nums: Vec<i64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let (first, step, last) = match nums.as_slice() {
        [l] => (1, 1, *l),
        [f, l] => (*f, 1, *l),
        [f, s, l] => (*f, *s, *l),
        _ => {
            io.err_line("seq: missing operand");
            return 1;
        }
    };
    if step == 0 {
        io.err_line("seq: invalid Zero increment value: '0'");
        return 1;
    }
    let mut v = first;
    let mut n = 0;
    while (step > 0 && v <= last) || (step < 0 && v >= last) {
        io.out_line(v.to_string());
        v += step;
        n += 1;
        if n > 1_000_000 {
            break;
        }
    }
    0
}

/// `echo` with `-n` and `-e`.
pub fn echo(args: &[String], io: &mut Io) -> i32 {
    let mut newline = true;
    let mut escapes = false;
    let mut words = args;
    while let Some(first) = words.first() {
        match first.as_str() {
            "-n" => newline = false,
            "-e" => escapes = true,
            "-ne" | "-en" => {
                newline = false;
                escapes = true;
            }
            _ => break,
        }
        words = &words[1..];
    }
    let mut text = words.join(" ");
    if escapes {
        text = text.replace("\\n", "\n").replace("\\t", "\t");
    }
    io.out.extend(text.into_bytes());
    if newline {
        io.out.push(b'\n');
    }
    0
}

/// `printf FORMAT ARGS`: `%s`, `%d` and escapes.
pub fn printf(args: &[String], io: &mut Io) -> i32 {
    let Some(fmt) = args.first() else {
        io.err_line("printf: usage: printf format [arguments]");
        return 2;
    };
    let mut rest = args[1..].iter();
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '%' => match chars.next() {
                Some('s' | 'd' | 'i' | 'f' | 'x') => {
                    out.push_str(rest.next().map_or("", |s| s.as_str()));
                }
                Some('%') => out.push('%'),
                Some(o) => {
                    out.push('%');
                    out.push(o);
                }
                None => out.push('%'),
            },
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    io.out.extend(out.into_bytes());
    0
}

/// `test` / `[`: files, strings and integers.
pub fn test(ctx: &mut Ctx, argv: &[String], io: &mut Io) -> i32 {
    let mut args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    if argv[0] == "[" {
        if args.last() != Some(&"]") {
            io.err_line("sh: [: missing ]");
            return 2;
        }
        args.pop();
    }
    let negate = args.first() == Some(&"!");
    if negate {
        args.remove(0);
    }
    let truth = match args.as_slice() {
        [] => false,
        [s] => !s.is_empty(),
        ["-n", s] => !s.is_empty(),
        ["-z", s] => s.is_empty(),
        [op @ ("-e" | "-f" | "-d" | "-r" | "-s" | "-x"), path] => {
            let t = fs::tree(ctx.s, ctx.m);
            match fs::resolve(&t, &fs::absolute(&ctx.s.cwd, path)) {
                Ok((_, Node::Dir)) => matches!(*op, "-e" | "-d" | "-r" | "-x"),
                Ok((_, Node::File(d))) => *op != "-d" && (*op != "-s" || !d.is_empty()),
                _ => false,
            }
        }
        [a, "=" | "==", b] => a == b,
        [a, "!=", b] => a != b,
        [a, op, b] => {
            let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) else {
                io.err_line(format!("sh: {a}: bad number"));
                return 2;
            };
            match *op {
                "-eq" => x == y,
                "-ne" => x != y,
                "-lt" => x < y,
                "-le" => x <= y,
                "-gt" => x > y,
                "-ge" => x >= y,
                _ => {
                    io.err_line(format!("sh: {op}: unknown operand"));
                    return 2;
                }
            }
        }
        _ => false,
    };
    i32::from(truth == negate)
}

/// Paths matching a glob in its last component (`/etc/config/*`, `*.json`).
pub fn glob(ctx: &mut Ctx, pattern: &str) -> Vec<String> {
    let (dir, leaf) = match pattern.rsplit_once('/') {
        Some((d, l)) => (if d.is_empty() { "/" } else { d }, l),
        None => (".", pattern),
    };
    if dir.contains('*') || dir.contains('?') {
        return vec![];
    }
    let re = format!(
        "^{}$",
        regex::escape(leaf).replace("\\*", ".*").replace("\\?", ".")
    );
    let Ok(re) = regex::Regex::new(&re) else {
        return vec![];
    };
    let Ok(entries) = fs::list(ctx.s, ctx.m, dir) else {
        return vec![];
    };
    let prefix = match pattern.rsplit_once('/') {
        Some((d, _)) => format!("{d}/"),
        None => String::new(),
    };
    entries
        .into_iter()
        .filter(|(n, _)| !n.starts_with('.') && re.is_match(n))
        .map(|(n, _)| format!("{prefix}{n}"))
        .collect()
}

fn ps(ctx: &mut Ctx, name: &str, args: &[String], io: &mut Io) -> i32 {
    let Some(pod) = ctx.m.world.pods.get(&ctx.s.target.pod) else {
        return 1;
    };
    // A debugger started with `--target` sees the target's processes beside its own.
    let own = ctx.s.target.slot;
    let seen = pod.process_namespace(own);
    let Some(c) = pod.container(seen) else {
        return 1;
    };
    let argv = fs::main_argv(ctx.m, c).join(" ");
    let status = pod.status(seen);
    let rss_kb = status.map_or(0.0, |s| s.working_set / 1024.0) as i64;
    let cpu_s = status.map_or(0.0, |s| s.cpu_seconds) as i64;
    let time = format!("{}:{:02}", cpu_s / 60, cpu_s % 60);
    let running = status.is_some_and(|s| matches!(s.state, CState::Running { .. }));
    let mut procs = vec![(1, argv.clone(), rss_kb, time.clone())];
    if let Some(debugger) = pod.container(own).filter(|_| seen != own) {
        procs.push((
            7,
            fs::main_argv(ctx.m, debugger).join(" "),
            1024,
            "0:00".into(),
        ));
    }
    procs.push((97, name.to_string(), 1024, "0:00".into()));
    if name == "pgrep" {
        let pat = args
            .iter()
            .find(|a| !a.starts_with('-'))
            .cloned()
            .unwrap_or_default();
        let hits: Vec<_> = procs
            .iter()
            .filter(|p| running && p.1.contains(&pat))
            .collect();
        for p in &hits {
            io.out_line(p.0.to_string());
        }
        return i32::from(hits.is_empty());
    }
    if toolbox(&ctx.s.target.image).busybox() {
        io.out_line("PID   USER     TIME  COMMAND");
        for (pid, cmd, _, t) in &procs {
            io.out_line(format!("{pid:>5} root      {t:>4} {cmd}"));
        }
    } else {
        io.out_line("USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND");
        for (pid, cmd, rss, t) in &procs {
            io.out_line(format!(
                "root     {pid:>7}  0.3  0.5 {:>6} {rss:>5} ?        Ssl  08:15   {t} {cmd}",
                rss * 3
            ));
        }
    }
    let _ = programs::identify;
    0
}

/// `date [-u] [+FORMAT]`: the container's clock is the node's, in UTC.
fn date(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    use std::fmt::Write;
    let t = chrono::DateTime::from_timestamp_nanos(ctx.m.world.now);
    let mut format = "%a %b %e %H:%M:%S UTC %Y";
    for a in args {
        match a.strip_prefix('+') {
            Some(f) => format = f,
            None if a == "-u" || a == "--utc" => {}
            None => {
                io.err_line(format!("date: invalid date '{a}'"));
                return 1;
            }
        }
    }
    let mut out = String::new();
    // An unknown conversion is an error to the formatter, not a panic.
    if write!(out, "{}", t.format(format)).is_err() {
        io.err_line(format!("date: invalid format '+{format}'"));
        return 1;
    }
    io.out_line(out);
    0
}

fn df(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let human = args.iter().any(|a| a.contains('h'));
    io.out_line(if human {
        "Filesystem      Size  Used Avail Use% Mounted on"
    } else {
        "Filesystem     1K-blocks     Used Available Use% Mounted on"
    });
    let row = |fs: &str, mnt: &str| {
        if human {
            format!("{fs:<15} 97G   31G   62G  34% {mnt}")
        } else {
            format!("{fs:<15} 101430960 32345188  64349904  34% {mnt}")
        }
    };
    io.out_line(row("overlay", "/"));
    io.out_line(if human {
        "tmpfs            64M     0   64M   0% /dev".to_string()
    } else {
        "tmpfs              65536        0     65536   0% /dev".to_string()
    });
    if let Some(p) = ctx.m.world.pods.get(&ctx.s.target.pod)
        && let Some(c) = p.container(ctx.s.target.slot)
    {
        for vm in &c.volume_mounts {
            io.out_line(row("/dev/vda1", &vm.mount_path));
        }
    }
    0
}

fn free(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let node_mem = ctx.m.host(&ctx.s.target.pod).0;
    let div = if args.iter().any(|a| a == "-m") {
        1 << 20
    } else {
        1 << 10
    };
    let total = node_mem / div;
    let used = total * 2 / 5;
    io.out_line("               total        used        free      shared  buff/cache   available");
    io.out_line(format!(
        "Mem:    {total:>12} {used:>11} {:>11} {:>11} {:>11} {:>11}",
        total / 5,
        total / 100,
        total * 2 / 5,
        total / 2
    ));
    io.out_line(format!("Swap:   {:>12} {:>11} {:>11}", 0, 0, 0));
    0
}

/// Listening sockets of the container's process (`netstat -tln`, `ss -tln`).
fn sockets(ctx: &mut Ctx, name: &str, io: &mut Io) -> i32 {
    let Some(pod) = ctx.m.world.pods.get(&ctx.s.target.pod) else {
        return 1;
    };
    let Some(c) = pod.container(pod.process_namespace(ctx.s.target.slot)) else {
        return 1;
    };
    let prog = programs::identify(ctx.m.app, c);
    let ports = programs::listen_ports(c, prog.as_ref());
    if name == "ss" {
        io.out_line("State  Recv-Q Send-Q Local Address:Port Peer Address:PortProcess");
        for p in ports {
            io.out_line(format!(
                "LISTEN 0      4096               *:{p}            *:*"
            ));
        }
    } else {
        io.out_line("Active Internet connections (only servers)");
        io.out_line("Proto Recv-Q Send-Q Local Address           Foreign Address         State");
        for p in ports {
            io.out_line(format!(
                "tcp        0      0 :::{p:<20} :::*                    LISTEN"
            ));
        }
    }
    0
}

fn interfaces(ctx: &mut Ctx, name: &str, args: &[String], io: &mut Io) -> i32 {
    let ip = ctx
        .m
        .world
        .pods
        .get(&ctx.s.target.pod)
        .and_then(|p| p.pod_ip.clone())
        .unwrap_or_default();
    if name == "ip" && args.first().is_some_and(|a| a.starts_with('r')) {
        io.out_line("default via 169.254.1.1 dev eth0");
        return 0;
    }
    io.out_line("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN qlen 1000");
    io.out_line("    inet 127.0.0.1/8 scope host lo");
    io.out_line(
        "2: eth0@if12: <BROADCAST,MULTICAST,UP,LOWER_UP,M-DOWN> mtu 1450 qdisc noqueue state UP",
    );
    io.out_line(format!("    inet {ip}/24 brd 0.0.0.0 scope global eth0"));
    0
}

/// The session's writable layer.
fn files(ctx: &mut Ctx, name: &str, args: &[String], io: &mut Io) -> i32 {
    let ops = operands(args);
    match name {
        "touch" => {
            for f in ops {
                let p = fs::absolute(&ctx.s.cwd, f);
                ctx.s.files.entry(p).or_default();
            }
        }
        "rm" => {
            for f in ops {
                let p = fs::absolute(&ctx.s.cwd, f);
                if ctx.s.files.remove(&p).is_none() {
                    let t = fs::tree(ctx.s, ctx.m);
                    if t.contains_key(&p) {
                        io.err_line(format!("rm: cannot remove '{f}': Read-only file system"));
                    } else if !args.iter().any(|a| a.contains('f')) {
                        io.err_line(format!(
                            "rm: cannot remove '{f}': No such file or directory"
                        ));
                    }
                    return 1;
                }
            }
        }
        "cp" | "mv" => {
            let (Some(from), Some(to)) = (ops.first(), ops.get(1)) else {
                io.err_line(format!("{name}: missing file operand"));
                return 1;
            };
            match fs::read(ctx.s, ctx.m, from) {
                Ok(d) => {
                    let p = fs::absolute(&ctx.s.cwd, to);
                    ctx.s.files.insert(p, d);
                }
                Err(e) => {
                    io.err_line(format!("{name}: cannot stat '{from}': {}", e.text()));
                    return 1;
                }
            }
        }
        _ => {}
    }
    0
}

fn paths(ctx: &mut Ctx, name: &str, args: &[String], io: &mut Io) -> i32 {
    let Some(p) = operands(args).first().map(|s| s.to_string()) else {
        io.err_line(format!("{name}: missing operand"));
        return 1;
    };
    let out = match name {
        "basename" => p
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string(),
        "dirname" => match p.trim_end_matches('/').rsplit_once('/') {
            Some(("", _)) => "/".into(),
            Some((d, _)) => d.into(),
            None => ".".into(),
        },
        _ => {
            let t = fs::tree(ctx.s, ctx.m);
            match t.get(&fs::absolute(&ctx.s.cwd, &p)) {
                Some(Node::Link(to)) => to.clone(),
                _ => return 1,
            }
        }
    };
    io.out_line(out);
    0
}

/// `find DIR [-name PATTERN] [-type f|d]`.
fn find(ctx: &mut Ctx, args: &[String], io: &mut Io) -> i32 {
    let root = args
        .first()
        .filter(|a| !a.starts_with('-'))
        .cloned()
        .unwrap_or(".".into());
    let name = option_value(args, "-name").map(|n| {
        regex::Regex::new(&format!(
            "^{}$",
            regex::escape(n).replace("\\*", ".*").replace("\\?", ".")
        ))
    });
    let kind = option_value(args, "-type");
    let abs = fs::absolute(&ctx.s.cwd, &root);
    let t = fs::tree(ctx.s, ctx.m);
    if !t.contains_key(&abs) {
        io.err_line(format!("find: '{root}': No such file or directory"));
        return 1;
    }
    let prefix = if abs == "/" {
        "/".to_string()
    } else {
        format!("{abs}/")
    };
    for (p, n) in t
        .iter()
        .filter(|(p, _)| **p == abs || p.starts_with(&prefix))
    {
        let leaf = p.rsplit('/').next().unwrap_or("");
        let kind_ok = match kind {
            Some("f") => matches!(n, Node::File(_)),
            Some("d") => matches!(n, Node::Dir),
            Some("l") => matches!(n, Node::Link(_)),
            _ => true,
        };
        let name_ok = match &name {
            Some(Ok(re)) => re.is_match(leaf),
            Some(Err(_)) => false,
            None => true,
        };
        if kind_ok && name_ok {
            let shown = if root.starts_with('/') {
                p.clone()
            } else {
                format!("{}{}", root.trim_end_matches('/'), &p[abs.len()..])
            };
            io.out_line(shown);
        }
    }
    0
}
