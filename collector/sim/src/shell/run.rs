//! The evaluator: expands words, runs lists, pipelines and compound commands, applies
//! redirections, keeps the builtins a shell has, and hands every other command to the image's
//! tools. Pipelines are run stage by stage on bounded buffers (a stage's output is capped, which
//! is also what ends `yes | head`).

use super::image::{Shell, toolbox};
use super::parse::{self, AndOr, Command, Join, Part, Pipeline, RedirectOp, Script, Simple, Word};
use super::{Model, Output, Session, db, fs, net, tools};

/// What a command produced.
#[derive(Debug, Default)]
pub struct Io {
    pub out: Vec<u8>,
    pub err: Vec<u8>,
}

impl Io {
    pub fn err_line(&mut self, line: impl AsRef<str>) {
        self.err.extend_from_slice(line.as_ref().as_bytes());
        self.err.push(b'\n');
    }
    pub fn out_line(&mut self, line: impl AsRef<str>) {
        self.out.extend_from_slice(line.as_ref().as_bytes());
        self.out.push(b'\n');
    }
}

/// How a command ended: its status, or the shell is leaving (`exit`, or the session's limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Status(i32),
    Exit(i32),
}

impl Flow {
    fn code(self) -> i32 {
        match self {
            Flow::Status(c) | Flow::Exit(c) => c,
        }
    }
}

/// One evaluation: the session, the model, and the script's positional parameters.
pub struct Ctx<'s, 'm, 'w> {
    pub s: &'s mut Session,
    pub m: &'m mut Model<'w>,
    pub args: Vec<String>,
}

impl Ctx<'_, '_, '_> {
    /// The shell's name in its messages (`sh`, `bash`).
    pub fn shell_name(&self) -> &'static str {
        match toolbox(&self.s.target.image).shell {
            Some(Shell::Bash) if self.args.first().is_some_and(|a| a.ends_with("bash")) => "bash",
            _ => "sh",
        }
    }

    /// Spends simulated time; false once the session's budget is gone.
    pub fn spend(&mut self, ms: u64) -> bool {
        // Past the budget the process is killed: the time spent stops there.
        let limit = self.s.limits.wall_ms;
        self.s.spent_ms = self.s.spent_ms.saturating_add(ms).min(limit + 1);
        self.s.spent_ms <= limit
    }

    /// The next of the session's own draws in [0, 1).
    pub fn draw(&mut self) -> f64 {
        // SplitMix64: enough for picking which request of a failing route fails.
        self.s.draws = self.s.draws.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.s.draws;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as f64 / u64::MAX as f64
    }

    pub fn var(&self, name: &str) -> Option<String> {
        match name {
            "?" => Some(self.s.status.to_string()),
            "$" => Some("1".into()),
            "#" => Some(self.args.len().saturating_sub(1).to_string()),
            "@" => Some(
                self.args
                    .iter()
                    .skip(1)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            n if n.chars().all(|c| c.is_ascii_digit()) => {
                self.args.get(n.parse::<usize>().ok()?).cloned()
            }
            n => self.s.vars.get(n).cloned(),
        }
    }
}

/// An argv run as the container runtime runs it.
pub fn exec_argv(s: &mut Session, m: &mut Model, argv: &[String], stdin: &[u8]) -> Output {
    let Some(prog) = argv.first() else {
        return Output {
            exit: Some(1),
            ..Output::default()
        };
    };
    let tb = toolbox(&s.target.image);
    let name = prog.rsplit('/').next().unwrap_or(prog);
    if !tb.has(name) {
        // The runtime's words: the binary is not in the image.
        let mut out = Output {
            exit: Some(126),
            ..Output::default()
        };
        out.stdout = format!(
            "OCI runtime exec failed: exec failed: unable to start container process: exec: \"{prog}\": executable file not found in $PATH: unknown\r\n"
        )
        .into_bytes();
        return out;
    }
    if matches!(name, "sh" | "bash" | "ash") {
        return shell_argv(s, m, prog, &argv[1..], stdin);
    }
    let mut ctx = Ctx {
        s,
        m,
        args: vec!["sh".into()],
    };
    let mut io = Io::default();
    let flow = command(&mut ctx, argv, stdin, &mut io);
    let code = flow.code();
    finish(s_of(ctx), io.out, io.err, code)
}

fn s_of<'a>(ctx: Ctx<'a, '_, '_>) -> &'a mut Session {
    ctx.s
}

/// `sh [options] [-c SCRIPT [NAME ARGS...] | FILE]`: without either, commands come from stdin.
fn shell_argv(s: &mut Session, m: &mut Model, prog: &str, args: &[String], stdin: &[u8]) -> Output {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a.starts_with('-') && a.len() > 1 {
            if a.contains('c') && !a.starts_with("--") {
                let Some(src) = args.get(i + 1) else {
                    let mut out = finish(s, vec![], vec![], 2);
                    out.stderr = format!("{prog}: -c: option requires an argument\n").into_bytes();
                    return out;
                };
                let mut params = vec![prog.to_string()];
                params.extend(args[i + 2..].iter().cloned());
                if params.len() > 1 {
                    params.remove(0);
                }
                let (o, e, flow) = evaluate(s, m, src, stdin, params);
                return finish(s, o, e, flow.code());
            }
            i += 1;
            continue;
        }
        // A script file.
        let src = match fs::read(s, &*m, a) {
            Ok(d) => String::from_utf8_lossy(&d).into_owned(),
            Err(e) => {
                let err = format!("{prog}: 0: cannot open {a}: {}\n", e.text());
                let mut out = finish(s, vec![], vec![], 2);
                out.stderr = err.into_bytes();
                return out;
            }
        };
        let (o, e, flow) = evaluate(s, m, &src, stdin, args[i..].to_vec());
        return finish(s, o, e, flow.code());
    }
    let src = String::from_utf8_lossy(stdin).into_owned();
    let (o, e, flow) = evaluate(s, m, &src, b"", vec![prog.to_string()]);
    finish(s, o, e, flow.code())
}

fn finish(s: &mut Session, stdout: Vec<u8>, stderr: Vec<u8>, code: i32) -> Output {
    s.status = code;
    let spent = std::mem::take(&mut s.spent_ms);
    s.steps = 0;
    Output {
        stdout,
        stderr,
        exit: Some(code),
        elapsed_ms: spent,
    }
}

/// Runs one line of an interactive shell: `exit` is set only when the line ran `exit` (or the
/// session's limits ended it); the status is kept for `$?`.
pub fn line(s: &mut Session, m: &mut Model, src: &str) -> Output {
    let (o, e, flow) = evaluate(s, m, src, b"", vec!["sh".into()]);
    let mut out = finish(s, o, e, flow.code());
    if let Flow::Status(_) = flow {
        out.exit = None;
    }
    out
}

fn evaluate(
    s: &mut Session,
    m: &mut Model,
    src: &str,
    stdin: &[u8],
    args: Vec<String>,
) -> (Vec<u8>, Vec<u8>, Flow) {
    let mut ctx = Ctx { s, m, args };
    let script = match parse::parse(src) {
        Ok(sc) => sc,
        Err(e) => {
            let msg = match ctx.shell_name() {
                "bash" => format!("bash: -c: line 1: {e}\n"),
                _ => format!("sh: {e}\n"),
            };
            return (vec![], msg.into_bytes(), Flow::Status(2));
        }
    };
    let mut io = Io::default();
    let flow = run_script(&mut ctx, &script, stdin, &mut io);
    (io.out, io.err, flow)
}

pub fn run_script(ctx: &mut Ctx, script: &Script, stdin: &[u8], io: &mut Io) -> Flow {
    let mut last = Flow::Status(0);
    for ao in &script.0 {
        last = and_or(ctx, ao, stdin, io);
        ctx.s.status = last.code();
        if let Flow::Exit(_) = last {
            return last;
        }
    }
    last
}

fn and_or(ctx: &mut Ctx, ao: &AndOr, stdin: &[u8], io: &mut Io) -> Flow {
    let mut flow = pipeline(ctx, &ao.first, stdin, io);
    for (join, p) in &ao.rest {
        let Flow::Status(code) = flow else {
            return flow;
        };
        ctx.s.status = code;
        let run = match join {
            Join::And => code == 0,
            Join::Or => code != 0,
        };
        if run {
            flow = pipeline(ctx, p, stdin, io);
        }
    }
    flow
}

fn pipeline(ctx: &mut Ctx, p: &Pipeline, stdin: &[u8], io: &mut Io) -> Flow {
    let mut input = stdin.to_vec();
    let mut flow = Flow::Status(0);
    let last = p.commands.len() - 1;
    for (i, c) in p.commands.iter().enumerate() {
        let mut stage = Io::default();
        flow = compound(ctx, c, &input, &mut stage);
        io.err.extend_from_slice(&stage.err);
        if i == last {
            io.out.extend_from_slice(&stage.out);
        } else {
            input = stage.out;
        }
        if let Flow::Exit(_) = flow
            && last > 0
        {
            // `exit` inside a pipeline stage leaves only that stage (a subshell).
            flow = Flow::Status(flow.code());
        }
    }
    cap(ctx, &mut io.out);
    match flow {
        Flow::Status(c) if p.negate => Flow::Status(i32::from(c == 0)),
        f => f,
    }
}

/// Keeps a buffer within the session's output limit.
pub fn cap(ctx: &Ctx, buf: &mut Vec<u8>) {
    buf.truncate(ctx.s.limits.output_bytes);
}

fn compound(ctx: &mut Ctx, c: &Command, stdin: &[u8], io: &mut Io) -> Flow {
    match c {
        Command::Simple(s) => simple(ctx, s, stdin, io),
        Command::Group(body) => run_script(ctx, body, stdin, io),
        Command::If {
            branches,
            otherwise,
        } => {
            for (cond, body) in branches {
                match run_script(ctx, cond, stdin, io) {
                    Flow::Status(0) => return run_script(ctx, body, stdin, io),
                    Flow::Exit(c) => return Flow::Exit(c),
                    _ => {}
                }
            }
            match otherwise {
                Some(body) => run_script(ctx, body, stdin, io),
                None => Flow::Status(0),
            }
        }
        Command::For { var, words, body } => {
            let mut items = vec![];
            for w in words {
                items.extend(expand(ctx, w, io));
            }
            let mut flow = Flow::Status(0);
            for item in items {
                ctx.s.vars.insert(var.clone(), item);
                flow = run_script(ctx, body, stdin, io);
                if matches!(flow, Flow::Exit(_)) || over_budget(ctx) {
                    break;
                }
            }
            flow
        }
        Command::While {
            until,
            condition,
            body,
        } => {
            let mut flow = Flow::Status(0);
            loop {
                let c = run_script(ctx, condition, stdin, io);
                if let Flow::Exit(_) = c {
                    return c;
                }
                if (c.code() == 0) == *until {
                    break;
                }
                flow = run_script(ctx, body, stdin, io);
                if matches!(flow, Flow::Exit(_)) {
                    break;
                }
                if over_budget(ctx) {
                    return Flow::Exit(137);
                }
            }
            flow
        }
    }
}

/// Whether the session ran out of steps or time (the process is killed).
fn over_budget(ctx: &Ctx) -> bool {
    ctx.s.steps >= ctx.s.limits.steps || ctx.s.spent_ms > ctx.s.limits.wall_ms
}

fn simple(ctx: &mut Ctx, sc: &Simple, stdin: &[u8], io: &mut Io) -> Flow {
    ctx.s.steps += 1;
    if over_budget(ctx) {
        return Flow::Exit(137);
    }
    let mut argv = vec![];
    for w in &sc.words {
        argv.extend(expand(ctx, w, io));
    }
    let mut assigned = vec![];
    for (name, w) in &sc.assigns {
        let v = expand_joined(ctx, w, io);
        assigned.push((name.clone(), v));
    }
    if argv.is_empty() {
        for (n, v) in assigned {
            ctx.s.vars.insert(n, v);
        }
        return Flow::Status(0);
    }
    // Input redirection.
    let mut input = stdin.to_vec();
    for r in &sc.redirects {
        if let (0, RedirectOp::Read(w)) = (r.fd, &r.op) {
            let path = expand_joined(ctx, w, io);
            match fs::read(ctx.s, ctx.m, &path) {
                Ok(d) => input = d,
                Err(e) => {
                    io.err_line(format!(
                        "{}: can't open {path}: {}",
                        ctx.shell_name(),
                        e.text()
                    ));
                    return Flow::Status(1);
                }
            }
        }
    }
    let saved: Vec<(String, Option<String>)> = assigned
        .iter()
        .map(|(n, _)| (n.clone(), ctx.s.vars.get(n).cloned()))
        .collect();
    for (n, v) in assigned {
        ctx.s.vars.insert(n, v);
    }
    let mut own = Io::default();
    let flow = command(ctx, &argv, &input, &mut own);
    for (n, v) in saved {
        match v {
            Some(v) => ctx.s.vars.insert(n, v),
            None => ctx.s.vars.remove(&n),
        };
    }
    route_output(ctx, sc, own, io);
    flow
}

/// Sends a command's output where its redirections say.
fn route_output(ctx: &mut Ctx, sc: &Simple, own: Io, io: &mut Io) {
    // Where fd 1 and fd 2 go: None = inherited, Some(None) = discarded, Some(Some(path)) = file.
    let mut dest: [Option<Option<(String, bool)>>; 3] = [None, None, None];
    let mut to_out_err = [false, false, false];
    for r in &sc.redirects {
        let fd = usize::from(r.fd.min(2));
        match &r.op {
            RedirectOp::Write(w) | RedirectOp::Append(w) => {
                let path = expand_joined(ctx, w, &mut Io::default());
                let append = matches!(r.op, RedirectOp::Append(_));
                dest[fd] = Some(if path == "/dev/null" {
                    None
                } else {
                    Some((fs::absolute(&ctx.s.cwd, &path), append))
                });
                to_out_err[fd] = false;
            }
            RedirectOp::Dup(other) => {
                let other = usize::from((*other).min(2));
                dest[fd] = dest[other].clone();
                to_out_err[fd] = dest[other].is_none() && other != fd;
            }
            RedirectOp::Read(_) => {}
        }
    }
    for (fd, data) in [(1usize, own.out), (2usize, own.err)] {
        match &dest[fd] {
            None if to_out_err[fd] && fd == 2 => io.out.extend_from_slice(&data),
            None if to_out_err[fd] && fd == 1 => io.err.extend_from_slice(&data),
            None if fd == 1 => io.out.extend_from_slice(&data),
            None => io.err.extend_from_slice(&data),
            Some(None) => {}
            Some(Some((path, append))) => {
                let file = ctx.s.files.entry(path.clone()).or_default();
                if !append {
                    file.clear();
                }
                file.extend_from_slice(&data);
                file.truncate(ctx.s.limits.output_bytes);
            }
        }
    }
}

/// Runs one command by name: a builtin, or a tool of the image.
pub fn command(ctx: &mut Ctx, argv: &[String], stdin: &[u8], io: &mut Io) -> Flow {
    let name = argv[0].as_str();
    if let Some(flow) = builtin(ctx, argv, stdin, io) {
        return flow;
    }
    let tb = toolbox(&ctx.s.target.image);
    let base = name.rsplit('/').next().unwrap_or(name);
    if !tb.has(base) {
        match ctx.shell_name() {
            "bash" => io.err_line(format!("bash: {name}: command not found")),
            _ if tb.busybox() => io.err_line(format!("sh: {name}: not found")),
            _ => io.err_line(format!("sh: 1: {name}: not found")),
        }
        return Flow::Status(127);
    }
    let code = match base {
        "sh" | "bash" | "ash" => {
            let out = exec_argv(ctx.s, ctx.m, argv, stdin);
            io.out.extend(out.stdout);
            io.err.extend(out.stderr);
            ctx.spend(out.elapsed_ms);
            out.exit.unwrap_or(0)
        }
        "curl" | "wget" | "nc" | "nslookup" | "dig" | "host" | "getent" | "ping" | "telnet" => {
            net::run(ctx, base, &argv[1..], stdin, io)
        }
        "mongo" | "mongosh" | "redis-cli" | "valkey-cli" | "psql" | "pg_isready" => {
            db::run(ctx, base, &argv[1..], stdin, io)
        }
        _ => tools::run(ctx, base, &argv[1..], stdin, io),
    };
    Flow::Status(code)
}

/// The shell's own commands; `None` when `argv` names none.
fn builtin(ctx: &mut Ctx, argv: &[String], stdin: &[u8], io: &mut Io) -> Option<Flow> {
    let args = &argv[1..];
    let flow = match argv[0].as_str() {
        ":" | "true" => Flow::Status(0),
        "false" => Flow::Status(1),
        "exit" => Flow::Exit(
            args.first()
                .and_then(|a| a.parse::<i32>().ok())
                .unwrap_or(ctx.s.status)
                & 0xff,
        ),
        "cd" => {
            let target = args.first().cloned().unwrap_or_else(|| "/root".into());
            let abs = fs::absolute(&ctx.s.cwd, &target);
            let t = fs::tree(ctx.s, ctx.m);
            match fs::resolve(&t, &abs) {
                Ok((_, fs::Node::Dir)) => {
                    ctx.s.cwd = abs;
                    Flow::Status(0)
                }
                Ok(_) => {
                    io.err_line(format!("{}: cd: can't cd to {target}", ctx.shell_name()));
                    Flow::Status(2)
                }
                Err(_) => {
                    io.err_line(format!("{}: cd: can't cd to {target}", ctx.shell_name()));
                    Flow::Status(2)
                }
            }
        }
        "pwd" => {
            io.out_line(ctx.s.cwd.clone());
            Flow::Status(0)
        }
        "export" | "set" | "unset" | "readonly" | "local" => {
            for a in args {
                match a.split_once('=') {
                    Some((n, v)) if parse::valid_name(n) => {
                        ctx.s.vars.insert(n.to_string(), v.to_string());
                    }
                    _ if argv[0] == "unset" => {
                        ctx.s.vars.remove(a);
                    }
                    _ => {}
                }
            }
            Flow::Status(0)
        }
        "echo" => Flow::Status(tools::echo(args, io)),
        "printf" => Flow::Status(tools::printf(args, io)),
        "test" | "[" => Flow::Status(tools::test(ctx, argv, io)),
        "read" => {
            let line = stdin.split(|b| *b == b'\n').next().unwrap_or_default();
            if let Some(name) = args.last() {
                ctx.s
                    .vars
                    .insert(name.clone(), String::from_utf8_lossy(line).into_owned());
            }
            Flow::Status(i32::from(stdin.is_empty()))
        }
        "command" | "type" | "which" if !args.is_empty() => {
            let names: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
            let tb = toolbox(&ctx.s.target.image);
            let mut code = 0;
            for n in names {
                if tb.has(n) {
                    io.out_line(format!("/usr/bin/{n}"));
                } else {
                    code = 1;
                }
            }
            Flow::Status(code)
        }
        "sleep" => {
            let secs: f64 = args
                .first()
                .map(|a| a.trim_end_matches('s'))
                .map(|a| if a == "infinity" { "1e9" } else { a })
                .and_then(|a| a.parse().ok())
                .unwrap_or(0.0);
            if !ctx.spend((secs.max(0.0) * 1000.0).min(1e12) as u64) {
                return Some(Flow::Exit(137));
            }
            Flow::Status(0)
        }
        _ => return None,
    };
    Some(flow)
}

/// A word expanded into fields.
pub fn expand(ctx: &mut Ctx, w: &Word, io: &mut Io) -> Vec<String> {
    let mut fields: Vec<String> = vec![];
    let mut cur = String::new();
    let mut has = false;
    let mut glob = false;
    for (i, p) in w.0.iter().enumerate() {
        match p {
            Part::Text(t, quoted) => {
                let t = if i == 0 && !quoted && (t == "~" || t.starts_with("~/")) {
                    format!("/root{}", &t[1..])
                } else {
                    t.clone()
                };
                glob |= !quoted && (t.contains('*') || t.contains('?'));
                cur.push_str(&t);
                has |= *quoted || !t.is_empty();
            }
            Part::Var {
                name,
                default,
                quoted,
            } => {
                let value = match (ctx.var(name), default) {
                    (Some(v), _) if !v.is_empty() => v,
                    (_, Some(d)) => expand_joined(ctx, d, io),
                    (v, None) => v.unwrap_or_default(),
                };
                split_into(&value, *quoted, &mut cur, &mut fields, &mut has);
            }
            Part::Subst(script, quoted) => {
                let mut sub = Io::default();
                run_script(ctx, script, b"", &mut sub);
                io.err.extend(sub.err);
                let text = String::from_utf8_lossy(&sub.out)
                    .trim_end_matches('\n')
                    .to_string();
                split_into(&text, *quoted, &mut cur, &mut fields, &mut has);
            }
        }
    }
    if has {
        if glob {
            let matches = tools::glob(ctx, &cur);
            if !matches.is_empty() {
                fields.extend(matches);
                return fields;
            }
        }
        fields.push(cur);
    }
    fields
}

/// Appends an expansion's value: quoted as is, unquoted split on blanks.
fn split_into(
    value: &str,
    quoted: bool,
    cur: &mut String,
    fields: &mut Vec<String>,
    has: &mut bool,
) {
    if quoted {
        cur.push_str(value);
        *has = true;
        return;
    }
    let mut pieces = value.split_whitespace().peekable();
    let leading_blank = value.starts_with(char::is_whitespace);
    if leading_blank && *has {
        fields.push(std::mem::take(cur));
        *has = false;
    }
    while let Some(piece) = pieces.next() {
        cur.push_str(piece);
        *has = true;
        if pieces.peek().is_some() {
            fields.push(std::mem::take(cur));
        }
    }
    if value.ends_with(char::is_whitespace) && *has {
        fields.push(std::mem::take(cur));
        *has = false;
    }
}

/// A word expanded into one string (assignments, redirection targets).
pub fn expand_joined(ctx: &mut Ctx, w: &Word, io: &mut Io) -> String {
    let quoted = Word(
        w.0.iter()
            .map(|p| match p {
                Part::Text(t, _) => Part::Text(t.clone(), true),
                Part::Var { name, default, .. } => Part::Var {
                    name: name.clone(),
                    default: default.clone(),
                    quoted: true,
                },
                Part::Subst(s, _) => Part::Subst(s.clone(), true),
            })
            .collect(),
    );
    expand(ctx, &quoted, io).join(" ")
}
