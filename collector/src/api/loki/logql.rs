//! LogQL: the syntax tree and a recursive-descent parser for the part of the language the replay
//! evaluates. Valid LogQL outside that part is refused with an error naming the construct, so
//! nobody gets a silently different answer. (The one LogQL crate that parses the whole language
//! is AGPL-licensed, which this Apache-2.0 project cannot take.)

use regex::Regex;

use crate::api::duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    Eq,
    Neq,
    Re,
    Nre,
}

/// A stream selector matcher (`name op "value"`); regexes are anchored as in Prometheus.
#[derive(Debug, Clone)]
pub struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
    re: Option<Regex>,
}

impl Matcher {
    fn new(name: String, op: MatchOp, value: String) -> Result<Self, String> {
        let re = match op {
            MatchOp::Re | MatchOp::Nre => Some(
                Regex::new(&format!("^(?s:{value})$"))
                    .map_err(|e| format!("invalid regular expression \"{value}\": {e}"))?,
            ),
            _ => None,
        };
        Ok(Matcher {
            name,
            op,
            value,
            re,
        })
    }

    pub fn matches(&self, v: &str) -> bool {
        match self.op {
            MatchOp::Eq => v == self.value,
            MatchOp::Neq => v != self.value,
            MatchOp::Re => self.re.as_ref().is_some_and(|r| r.is_match(v)),
            MatchOp::Nre => !self.re.as_ref().is_some_and(|r| r.is_match(v)),
        }
    }
}

/// `|= "a"`, `!= "a"`, `|~ "re"`, `!~ "re"`, each with `or` alternatives.
#[derive(Debug, Clone)]
pub struct LineFilter {
    pub negate: bool,
    pub values: Vec<String>,
    /// Unanchored regexes for `|~`/`!~`; empty for substring filters.
    pub regexes: Vec<Regex>,
}

impl LineFilter {
    pub fn keeps(&self, line: &str) -> bool {
        let hit = if self.regexes.is_empty() {
            self.values.iter().any(|v| line.contains(v.as_str()))
        } else {
            self.regexes.iter().any(|r| r.is_match(line))
        };
        hit != self.negate
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Neq,
    Re,
    Nre,
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone)]
pub enum CmpValue {
    /// A string matcher (`=`, `!=`, `=~`, `!~` with a quoted value).
    Str(Matcher),
    Number(f64),
    /// Nanoseconds.
    Duration(i64),
    Bytes(u64),
}

#[derive(Debug, Clone)]
pub enum LabelExpr {
    /// All must hold (kept flat, so long chains do not nest).
    And(Vec<LabelExpr>),
    Or(Vec<LabelExpr>),
    Cmp {
        name: String,
        op: CmpOp,
        value: CmpValue,
    },
}

/// One piece of a JSON path: a field or an array index.
#[derive(Debug, Clone, PartialEq)]
pub enum PathPart {
    Field(String),
    Index(usize),
}

/// A `line_format` template: literal text and `{{ .label }}` references.
#[derive(Debug, Clone, PartialEq)]
pub enum TemplatePart {
    Text(String),
    Label(String),
}

#[derive(Debug, Clone)]
pub enum Stage {
    Line(LineFilter),
    /// `| json` (every field) or `| json a="path", b` (the named ones).
    Json(Vec<(String, Vec<PathPart>)>),
    Logfmt {
        strict: bool,
        keep_empty: bool,
        /// (label, key); empty means every key.
        params: Vec<(String, String)>,
    },
    Filter(LabelExpr),
    LineFormat(Vec<TemplatePart>),
    Drop(Vec<String>),
    Keep(Vec<String>),
    /// `| regexp "..."`: named capture groups become labels.
    Regexp(Regex),
    /// `| pattern "<a> - <_> <b>"`.
    Pattern(Vec<PatternPart>),
    /// `| label_format dst=src, dst="{{.x}}"`.
    LabelFormat(Vec<(String, LabelFormat)>),
}

/// A `pattern` expression: literals searched in order, captures take what lies between.
#[derive(Debug, Clone, PartialEq)]
pub enum PatternPart {
    Literal(String),
    /// `None` for `<_>`.
    Capture(Option<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum LabelFormat {
    /// `dst=src`: the label moves.
    Rename(String),
    Template(Vec<TemplatePart>),
}

#[derive(Debug, Clone)]
pub struct LogExpr {
    pub selector: Vec<Matcher>,
    pub stages: Vec<Stage>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeFn {
    CountOverTime,
    Rate,
    BytesOverTime,
    BytesRate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggOp {
    Sum,
    Avg,
    Min,
    Max,
    Count,
    Topk,
    Bottomk,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Grouping {
    By(Vec<String>),
    Without(Vec<String>),
}

#[derive(Debug, Clone)]
pub enum MetricExpr {
    Range {
        func: RangeFn,
        log: LogExpr,
        range_ns: i64,
        offset_ns: i64,
    },
    Agg {
        op: AggOp,
        grouping: Option<Grouping>,
        /// k of topk/bottomk.
        param: Option<usize>,
        inner: Box<MetricExpr>,
    },
    /// A number literal.
    Scalar(f64),
    /// A vector and a scalar (either side) combined point by point.
    Binary {
        op: BinOp,
        /// `bool`: comparisons give 1 or 0 instead of filtering.
        keep_bool: bool,
        lhs: Box<MetricExpr>,
        rhs: Box<MetricExpr>,
    },
}

impl MetricExpr {
    /// Whether the expression is a constant (no log selector in it).
    pub fn is_constant(&self) -> bool {
        match self {
            MetricExpr::Scalar(_) => true,
            MetricExpr::Binary { lhs, rhs, .. } => lhs.is_constant() && rhs.is_constant(),
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Eq,
    Neq,
    Gt,
    Ge,
    Lt,
    Le,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Neq | BinOp::Gt | BinOp::Ge | BinOp::Lt | BinOp::Le
        )
    }

    /// Arithmetic gives the value; a comparison gives 1.0 when it holds, 0.0 otherwise.
    pub fn apply(self, a: f64, b: f64) -> f64 {
        let truth = |c: bool| if c { 1.0 } else { 0.0 };
        match self {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            BinOp::Div => a / b,
            BinOp::Mod => a % b,
            BinOp::Pow => a.powf(b),
            BinOp::Eq => truth(a == b),
            BinOp::Neq => truth(a != b),
            BinOp::Gt => truth(a > b),
            BinOp::Ge => truth(a >= b),
            BinOp::Lt => truth(a < b),
            BinOp::Le => truth(a <= b),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Expr {
    Log(LogExpr),
    Metric(MetricExpr),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Number(f64),
    /// A number with a duration unit; the text is kept for the error messages.
    Duration(i64, String),
    Bytes(u64, String),
    Sym(&'static str),
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Str(s) => format!("string \"{s}\""),
            Tok::Number(n) => format!("number {n}"),
            Tok::Duration(_, s) | Tok::Bytes(_, s) => format!("`{s}`"),
            Tok::Sym(s) => format!("`{s}`"),
        }
    }
}

const SYMBOLS: &[&str] = &[
    "|=", "|~", "|>", "!=", "!~", "!>", "=~", "==", ">=", "<=", "=", "|", "{", "}", "(", ")", "[",
    "]", ",", "+", "-", "*", "/", "%", "^",
];

pub(crate) fn bytes_unit(u: &str) -> Option<u64> {
    let k: u64 = 1000;
    let ki: u64 = 1024;
    Some(match u.to_ascii_lowercase().as_str() {
        "b" => 1,
        "kb" => k,
        "kib" => ki,
        "mb" => k.pow(2),
        "mib" => ki.pow(2),
        "gb" => k.pow(3),
        "gib" => ki.pow(3),
        "tb" => k.pow(4),
        "tib" => ki.pow(4),
        _ => return None,
    })
}

/// Parsing recurses into brackets; this bounds the depth a query can make it go.
const MAX_NESTING: usize = 64;

fn lex(src: &str) -> Result<Vec<(usize, Tok)>, String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let at = i;
        if c == '"' {
            let mut s = String::new();
            let mut chars = src[i + 1..].char_indices();
            let mut closed = None;
            while let Some((j, ch)) = chars.next() {
                match ch {
                    '"' => {
                        closed = Some(i + 1 + j + 1);
                        break;
                    }
                    '\\' => match chars.next().map(|(_, e)| e) {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some('r') => s.push('\r'),
                        Some(e @ ('"' | '\\' | '\'')) => s.push(e),
                        Some(e) => {
                            // Go keeps unknown escapes an error; regexes use `\\d` here.
                            return Err(format!(
                                "invalid escape `\\{e}` in string at col {}",
                                at + 1
                            ));
                        }
                        None => break,
                    },
                    ch => s.push(ch),
                }
            }
            i = closed.ok_or_else(|| format!("unterminated string at col {}", at + 1))?;
            out.push((at, Tok::Str(s)));
            continue;
        }
        if c == '`' {
            let end = src[i + 1..]
                .find('`')
                .ok_or_else(|| format!("unterminated raw string at col {}", at + 1))?;
            out.push((at, Tok::Str(src[i + 1..i + 1 + end].to_string())));
            i += end + 2;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let mut j = i;
            loop {
                if j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'.') {
                    j += 1;
                } else if src[j..].starts_with('µ') {
                    j += 'µ'.len_utf8();
                } else {
                    break;
                }
            }
            let text = &src[i..j];
            let num_end = text
                .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
                .unwrap_or(text.len());
            let tok = if num_end == text.len() {
                Tok::Number(
                    text.parse()
                        .map_err(|_| format!("invalid number `{text}`"))?,
                )
            } else if let Some(unit) = bytes_unit(&text[num_end..]) {
                let n: f64 = text[..num_end]
                    .parse()
                    .map_err(|_| format!("invalid number `{text}`"))?;
                Tok::Bytes((n * unit as f64) as u64, text.to_string())
            } else {
                let ns =
                    duration::parse_prom(text).map_err(|e| format!("at col {}: {e}", at + 1))?;
                Tok::Duration(ns, text.to_string())
            };
            out.push((at, tok));
            i = j;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            out.push((at, Tok::Ident(src[i..j].to_string())));
            i = j;
            continue;
        }
        if c == '-' && src[i..].starts_with("--") {
            // logfmt flags: --strict, --keep-empty
            let mut j = i + 2;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'-') {
                j += 1;
            }
            out.push((at, Tok::Ident(src[i..j].to_string())));
            i = j;
            continue;
        }
        if c == '>' || c == '<' {
            let sym = if b.get(i + 1) == Some(&b'=') {
                if c == '>' { ">=" } else { "<=" }
            } else if c == '>' {
                ">"
            } else {
                "<"
            };
            out.push((at, Tok::Sym(sym)));
            i += sym.len();
            continue;
        }
        match SYMBOLS.iter().find(|s| src[i..].starts_with(**s)) {
            Some(s) => {
                match *s {
                    "(" | "{" | "[" => {
                        depth += 1;
                        if depth > MAX_NESTING {
                            return Err(format!(
                                "more than {MAX_NESTING} nested brackets at col {}",
                                at + 1
                            ));
                        }
                    }
                    ")" | "}" | "]" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push((at, Tok::Sym(s)));
                i += s.len();
            }
            None => {
                return Err(format!("unexpected character `{c}` at col {}", at + 1));
            }
        }
    }
    Ok(out)
}

/// A parse error as Loki words it, or a refusal of a construct the replay does not evaluate.
pub fn parse(src: &str) -> Result<Expr, String> {
    let toks = lex(src).map_err(|e| format!("parse error: {e}"))?;
    let mut p = Parser {
        toks,
        pos: 0,
        src_len: src.len(),
    };
    let e = p.expr()?;
    if let Some((at, t)) = p.toks.get(p.pos) {
        return Err(p.err_at(*at, &format!("unexpected {}", t.describe())));
    }
    Ok(e)
}

/// Parses a bare stream selector (the `query` of the label endpoints, `match[]` of series).
pub fn parse_selector(src: &str) -> Result<Vec<Matcher>, String> {
    match parse(src)? {
        Expr::Log(l) if l.stages.is_empty() => Ok(l.selector),
        _ => Err(format!("parse error: `{src}` is not a stream selector")),
    }
}

pub const UNSUPPORTED: &str = "unsupported LogQL";

fn unsupported(what: &str) -> String {
    format!("{UNSUPPORTED}: {what} is not evaluated by this replay")
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    src_len: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.toks.get(self.pos + n).map(|(_, t)| t)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(_, t)| t.clone());
        self.pos += 1;
        t
    }

    fn err_at(&self, at: usize, msg: &str) -> String {
        format!("parse error at line 1, col {}: syntax error: {msg}", at + 1)
    }

    fn err(&self, msg: &str) -> String {
        let at = self.toks.get(self.pos).map_or(self.src_len, |(a, _)| *a);
        self.err_at(at, msg)
    }

    fn unexpected(&self) -> String {
        match self.peek() {
            Some(t) => self.err(&format!("unexpected {}", t.describe())),
            None => self.err("unexpected end of query"),
        }
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Sym(x)) if *x == s)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_sym(&mut self, s: &str) -> Result<(), String> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            Err(match self.peek() {
                Some(t) => self.err(&format!("unexpected {}, expecting `{s}`", t.describe())),
                None => self.err(&format!("unexpected end of query, expecting `{s}`")),
            })
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.unexpected()),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.unexpected()),
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        // A log query, possibly in parentheses.
        let mut open = 0;
        while matches!(self.peek_at(open), Some(Tok::Sym("("))) {
            open += 1;
        }
        if matches!(self.peek_at(open), Some(Tok::Sym("{"))) {
            self.pos += open;
            let log = self.log_expr()?;
            for _ in 0..open {
                self.expect_sym(")")?;
            }
            return Ok(Expr::Log(log));
        }
        if self.peek().is_none() {
            return Err(self.unexpected());
        }
        let m = self.binary(0)?;
        if self.peek().is_some() {
            return Err(self.binary_or_unexpected());
        }
        if m.is_constant() {
            return Err(unsupported("a query without a log stream selector"));
        }
        Ok(Expr::Metric(m))
    }

    /// The binary operator ahead, with its precedence (higher binds tighter).
    fn peek_binop(&self) -> Option<(BinOp, u8)> {
        let Some(Tok::Sym(s)) = self.peek() else {
            return None;
        };
        Some(match *s {
            "==" => (BinOp::Eq, 3),
            "!=" => (BinOp::Neq, 3),
            ">" => (BinOp::Gt, 3),
            ">=" => (BinOp::Ge, 3),
            "<" => (BinOp::Lt, 3),
            "<=" => (BinOp::Le, 3),
            "+" => (BinOp::Add, 4),
            "-" => (BinOp::Sub, 4),
            "*" => (BinOp::Mul, 5),
            "/" => (BinOp::Div, 5),
            "%" => (BinOp::Mod, 5),
            "^" => (BinOp::Pow, 6),
            _ => return None,
        })
    }

    /// Precedence climbing over metric operands; `^` is right-associative.
    fn binary(&mut self, min_prec: u8) -> Result<MetricExpr, String> {
        let mut lhs = self.operand()?;
        while let Some((op, prec)) = self.peek_binop() {
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            let keep_bool = matches!(self.peek(), Some(Tok::Ident(s)) if s == "bool");
            if keep_bool {
                if !op.is_comparison() {
                    return Err(self.err("bool modifier can only be used on comparison operators"));
                }
                self.pos += 1;
            }
            if let Some(Tok::Ident(s)) = self.peek()
                && matches!(s.as_str(), "on" | "ignoring" | "group_left" | "group_right")
            {
                return Err(unsupported(&format!("vector matching with `{s}`")));
            }
            let rhs = self.binary(if op == BinOp::Pow { prec } else { prec + 1 })?;
            if !lhs.is_constant() && !rhs.is_constant() {
                return Err(unsupported("a binary operation between two vectors"));
            }
            lhs = MetricExpr::Binary {
                op,
                keep_bool,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            };
        }
        Ok(lhs)
    }

    fn operand(&mut self) -> Result<MetricExpr, String> {
        match self.peek() {
            Some(Tok::Number(n)) => {
                let n = *n;
                self.pos += 1;
                Ok(MetricExpr::Scalar(n))
            }
            Some(Tok::Sym("-")) if matches!(self.peek_at(1), Some(Tok::Number(_))) => {
                self.pos += 1;
                match self.next() {
                    Some(Tok::Number(n)) => Ok(MetricExpr::Scalar(-n)),
                    _ => Err(self.unexpected()),
                }
            }
            _ => self.metric_expr(),
        }
    }

    fn binary_or_unexpected(&self) -> String {
        match self.peek() {
            Some(Tok::Sym(s))
                if matches!(
                    *s,
                    ">" | "<" | ">=" | "<=" | "==" | "!=" | "+" | "-" | "*" | "/" | "%" | "^"
                ) =>
            {
                unsupported(&format!("the binary operator `{s}`"))
            }
            Some(Tok::Ident(s)) if matches!(s.as_str(), "and" | "or" | "unless") => {
                unsupported(&format!("the binary operator `{s}`"))
            }
            _ => self.unexpected(),
        }
    }

    fn selector(&mut self) -> Result<Vec<Matcher>, String> {
        self.expect_sym("{")?;
        let mut out = Vec::new();
        while !self.eat_sym("}") {
            if !out.is_empty() {
                self.expect_sym(",")?;
                if self.eat_sym("}") {
                    break;
                }
            }
            let name = self.ident()?;
            let op = match self.next() {
                Some(Tok::Sym("=")) => MatchOp::Eq,
                Some(Tok::Sym("!=")) => MatchOp::Neq,
                Some(Tok::Sym("=~")) => MatchOp::Re,
                Some(Tok::Sym("!~")) => MatchOp::Nre,
                _ => {
                    self.pos -= 1;
                    return Err(self.unexpected());
                }
            };
            let value = self.string()?;
            out.push(Matcher::new(name, op, value).map_err(|e| self.err(&e))?);
        }
        if out.is_empty() {
            return Err(
                self.err("queries require at least one label matcher in the stream selector")
            );
        }
        if out.iter().all(|m| m.matches("")) {
            return Err(
                "parse error : queries require at least one regexp or equality matcher that does not have an empty-compatible value. For instance, app=~\".*\" does not meet this requirement, but app=~\".+\" will".into(),
            );
        }
        Ok(out)
    }

    fn log_expr(&mut self) -> Result<LogExpr, String> {
        let selector = self.selector()?;
        let mut stages = Vec::new();
        loop {
            match self.peek() {
                Some(Tok::Sym(s @ ("|=" | "!=" | "|~" | "!~"))) => {
                    let s = *s;
                    self.pos += 1;
                    stages.push(Stage::Line(self.line_filter(s)?));
                }
                Some(Tok::Sym(s @ ("|>" | "!>"))) => {
                    return Err(unsupported(&format!("the pattern line filter `{s}`")));
                }
                Some(Tok::Sym("|")) => {
                    self.pos += 1;
                    stages.push(self.stage()?);
                }
                _ => break,
            }
        }
        Ok(LogExpr { selector, stages })
    }

    fn line_filter(&mut self, op: &str) -> Result<LineFilter, String> {
        if matches!(self.peek(), Some(Tok::Ident(s)) if s == "ip") {
            return Err(unsupported("the `ip()` line filter"));
        }
        let mut values = vec![self.string()?];
        while matches!(self.peek(), Some(Tok::Ident(s)) if s == "or")
            && matches!(self.peek_at(1), Some(Tok::Str(_)))
        {
            self.pos += 1;
            values.push(self.string()?);
        }
        let regexes = if op.ends_with('~') {
            values
                .iter()
                .map(|v| {
                    Regex::new(v)
                        .map_err(|e| self.err(&format!("invalid regular expression \"{v}\": {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        Ok(LineFilter {
            negate: op.starts_with('!'),
            values,
            regexes,
        })
    }

    fn stage(&mut self) -> Result<Stage, String> {
        let Some(Tok::Ident(name)) = self.peek().cloned() else {
            if self.is_sym("(") {
                return Ok(Stage::Filter(self.label_expr()?));
            }
            return Err(self.unexpected());
        };
        // A label filter starts with a name followed by a comparison.
        if matches!(
            self.peek_at(1),
            Some(Tok::Sym(
                "=" | "!=" | "=~" | "!~" | ">" | ">=" | "<" | "<=" | "=="
            ))
        ) {
            return Ok(Stage::Filter(self.label_expr()?));
        }
        self.pos += 1;
        match name.as_str() {
            "json" => {
                let mut params = Vec::new();
                while let Some(Tok::Ident(label)) = self.peek().cloned() {
                    self.pos += 1;
                    let path = if self.eat_sym("=") {
                        let p = self.string()?;
                        parse_json_path(&p).map_err(|e| self.err(&e))?
                    } else {
                        vec![PathPart::Field(label.clone())]
                    };
                    params.push((label, path));
                    if !self.eat_sym(",") {
                        break;
                    }
                }
                Ok(Stage::Json(params))
            }
            "logfmt" => {
                let (mut strict, mut keep_empty) = (false, false);
                let mut params = Vec::new();
                while let Some(Tok::Ident(word)) = self.peek().cloned() {
                    match word.as_str() {
                        "--strict" => strict = true,
                        "--keep-empty" => keep_empty = true,
                        w if w.starts_with("--") => {
                            return Err(self.err(&format!("unknown logfmt flag `{w}`")));
                        }
                        _ => {
                            self.pos += 1;
                            let key = if self.eat_sym("=") {
                                self.string()?
                            } else {
                                word.clone()
                            };
                            params.push((word, key));
                            if !self.eat_sym(",") {
                                break;
                            }
                            continue;
                        }
                    }
                    self.pos += 1;
                }
                Ok(Stage::Logfmt {
                    strict,
                    keep_empty,
                    params,
                })
            }
            "line_format" => {
                let t = self.string()?;
                Ok(Stage::LineFormat(parse_template(&t)?))
            }
            "drop" | "keep" => {
                let mut names = vec![self.ident()?];
                if self.is_sym("=") || self.is_sym("!=") || self.is_sym("=~") || self.is_sym("!~") {
                    return Err(unsupported(&format!("`{name}` with label matchers")));
                }
                while self.eat_sym(",") {
                    names.push(self.ident()?);
                }
                Ok(if name == "drop" {
                    Stage::Drop(names)
                } else {
                    Stage::Keep(names)
                })
            }
            "unwrap" => Err(unsupported(
                "`unwrap` (sum_over_time and the other unwrapped range aggregations)",
            )),
            "regexp" => {
                let src = self.string()?;
                let re = Regex::new(&src)
                    .map_err(|e| self.err(&format!("invalid regular expression \"{src}\": {e}")))?;
                if re.capture_names().flatten().next().is_none() {
                    return Err(self.err("at least one named capture must be supplied"));
                }
                Ok(Stage::Regexp(re))
            }
            "pattern" => {
                let src = self.string()?;
                Ok(Stage::Pattern(
                    parse_pattern(&src).map_err(|e| self.err(&e))?,
                ))
            }
            "label_format" => {
                let mut out = Vec::new();
                loop {
                    let dst = self.ident()?;
                    self.expect_sym("=")?;
                    let f = match self.next() {
                        Some(Tok::Ident(src)) => LabelFormat::Rename(src),
                        Some(Tok::Str(t)) => LabelFormat::Template(parse_template(&t)?),
                        _ => {
                            self.pos -= 1;
                            return Err(self.unexpected());
                        }
                    };
                    out.push((dst, f));
                    if !self.eat_sym(",") {
                        break;
                    }
                }
                Ok(Stage::LabelFormat(out))
            }
            "unpack" | "decolorize" | "distinct" => {
                Err(unsupported(&format!("the `{name}` stage")))
            }
            _ => {
                self.pos -= 1;
                Err(self.unexpected())
            }
        }
    }

    /// `a and b`, `a, b` and `a b` bind tighter than `a or b`.
    fn label_expr(&mut self) -> Result<LabelExpr, String> {
        let mut any = vec![self.label_and()?];
        while matches!(self.peek(), Some(Tok::Ident(s)) if s == "or") {
            self.pos += 1;
            any.push(self.label_and()?);
        }
        Ok(if any.len() == 1 {
            any.remove(0)
        } else {
            LabelExpr::Or(any)
        })
    }

    fn label_and(&mut self) -> Result<LabelExpr, String> {
        let mut all = vec![self.label_atom()?];
        loop {
            let explicit = match self.peek() {
                Some(Tok::Ident(s)) if s == "and" => true,
                Some(Tok::Sym(",")) => true,
                Some(Tok::Ident(_)) if !matches!(self.peek(), Some(Tok::Ident(s)) if s == "or") => {
                    false
                }
                Some(Tok::Sym("(")) => false,
                _ => break,
            };
            if explicit {
                self.pos += 1;
            }
            all.push(self.label_atom()?);
        }
        Ok(if all.len() == 1 {
            all.remove(0)
        } else {
            LabelExpr::And(all)
        })
    }

    fn label_atom(&mut self) -> Result<LabelExpr, String> {
        if self.eat_sym("(") {
            let e = self.label_expr()?;
            self.expect_sym(")")?;
            return Ok(e);
        }
        let name = self.ident()?;
        let op = match self.next() {
            Some(Tok::Sym("=")) => CmpOp::Eq,
            Some(Tok::Sym("==")) => CmpOp::Eq,
            Some(Tok::Sym("!=")) => CmpOp::Neq,
            Some(Tok::Sym("=~")) => CmpOp::Re,
            Some(Tok::Sym("!~")) => CmpOp::Nre,
            Some(Tok::Sym(">")) => CmpOp::Gt,
            Some(Tok::Sym(">=")) => CmpOp::Ge,
            Some(Tok::Sym("<")) => CmpOp::Lt,
            Some(Tok::Sym("<=")) => CmpOp::Le,
            _ => {
                self.pos -= 1;
                return Err(self.unexpected());
            }
        };
        let value = match self.next() {
            Some(Tok::Str(s)) => {
                let mop = match op {
                    CmpOp::Eq => MatchOp::Eq,
                    CmpOp::Neq => MatchOp::Neq,
                    CmpOp::Re => MatchOp::Re,
                    CmpOp::Nre => MatchOp::Nre,
                    _ => {
                        self.pos -= 1;
                        return Err(self.err("a string can only be compared with =, !=, =~ or !~"));
                    }
                };
                CmpValue::Str(Matcher::new(name.clone(), mop, s).map_err(|e| self.err(&e))?)
            }
            Some(Tok::Number(n)) if !matches!(op, CmpOp::Re | CmpOp::Nre) => CmpValue::Number(n),
            Some(Tok::Duration(d, _)) if !matches!(op, CmpOp::Re | CmpOp::Nre) => {
                CmpValue::Duration(d)
            }
            Some(Tok::Bytes(b, _)) if !matches!(op, CmpOp::Re | CmpOp::Nre) => CmpValue::Bytes(b),
            Some(Tok::Ident(f)) if f == "ip" => return Err(unsupported("the `ip()` label filter")),
            _ => {
                self.pos -= 1;
                return Err(self.unexpected());
            }
        };
        Ok(LabelExpr::Cmp { name, op, value })
    }

    fn grouping(&mut self) -> Result<Option<Grouping>, String> {
        let by = match self.peek() {
            Some(Tok::Ident(s)) if s == "by" => true,
            Some(Tok::Ident(s)) if s == "without" => false,
            _ => return Ok(None),
        };
        self.pos += 1;
        self.expect_sym("(")?;
        let mut names = Vec::new();
        while !self.eat_sym(")") {
            if !names.is_empty() {
                self.expect_sym(",")?;
            }
            names.push(self.ident()?);
        }
        Ok(Some(if by {
            Grouping::By(names)
        } else {
            Grouping::Without(names)
        }))
    }

    fn metric_expr(&mut self) -> Result<MetricExpr, String> {
        if self.eat_sym("(") {
            let m = self.binary(0)?;
            self.expect_sym(")")?;
            return Ok(m);
        }
        let name = self.ident()?;
        let range_fn = match name.as_str() {
            "count_over_time" => Some(RangeFn::CountOverTime),
            "rate" => Some(RangeFn::Rate),
            "bytes_over_time" => Some(RangeFn::BytesOverTime),
            "bytes_rate" => Some(RangeFn::BytesRate),
            _ => None,
        };
        if let Some(func) = range_fn {
            self.expect_sym("(")?;
            let wrapped = self.eat_sym("(");
            let log = self.log_expr()?;
            if wrapped {
                self.expect_sym(")")?;
            }
            self.expect_sym("[")?;
            let range_ns = match self.next() {
                Some(Tok::Duration(d, _)) if d > 0 => d,
                _ => {
                    self.pos -= 1;
                    return Err(self.err("a range like [5m] is expected after the log query"));
                }
            };
            self.expect_sym("]")?;
            let offset_ns = if matches!(self.peek(), Some(Tok::Ident(s)) if s == "offset") {
                self.pos += 1;
                match self.next() {
                    Some(Tok::Duration(d, _)) => d,
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected());
                    }
                }
            } else {
                0
            };
            self.expect_sym(")")?;
            if matches!(self.peek(), Some(Tok::Ident(s)) if s == "by" || s == "without") {
                return Err(unsupported(&format!(
                    "grouping on the range aggregation `{name}`"
                )));
            }
            return Ok(MetricExpr::Range {
                func,
                log,
                range_ns,
                offset_ns,
            });
        }
        let op = match name.as_str() {
            "sum" => AggOp::Sum,
            "avg" => AggOp::Avg,
            "min" => AggOp::Min,
            "max" => AggOp::Max,
            "count" => AggOp::Count,
            "topk" => AggOp::Topk,
            "bottomk" => AggOp::Bottomk,
            "sum_over_time" | "avg_over_time" | "max_over_time" | "min_over_time"
            | "first_over_time" | "last_over_time" | "stdvar_over_time" | "stddev_over_time"
            | "quantile_over_time" | "absent_over_time" | "rate_counter" | "stddev" | "stdvar"
            | "sort" | "sort_desc" | "label_replace" | "vector" | "approx_topk" => {
                return Err(unsupported(&format!("`{name}`")));
            }
            _ => {
                self.pos -= 1;
                return Err(self.unexpected());
            }
        };
        let mut grouping = self.grouping()?;
        self.expect_sym("(")?;
        let param = if matches!(op, AggOp::Topk | AggOp::Bottomk) {
            let k = match self.next() {
                Some(Tok::Number(n)) if n >= 1.0 && n.fract() == 0.0 => n as usize,
                _ => {
                    self.pos -= 1;
                    return Err(self.err(&format!(
                        "{name} needs a positive integer k as its first argument"
                    )));
                }
            };
            self.expect_sym(",")?;
            Some(k)
        } else {
            None
        };
        let inner = self.binary(0)?;
        self.expect_sym(")")?;
        if grouping.is_none() {
            grouping = self.grouping()?;
        }
        Ok(MetricExpr::Agg {
            op,
            grouping,
            param,
            inner: Box::new(inner),
        })
    }
}

/// `a.b[0]["c d"]` as path parts.
fn parse_json_path(p: &str) -> Result<Vec<PathPart>, String> {
    let mut out = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| format!("invalid JSON path \"{p}\""))?;
            let inner = r[..end].trim();
            if let Some(q) = inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
                out.push(PathPart::Field(q.to_string()));
            } else {
                out.push(PathPart::Index(
                    inner
                        .parse()
                        .map_err(|_| format!("invalid JSON path \"{p}\""))?,
                ));
            }
            rest = &r[end + 1..];
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err(format!("invalid JSON path \"{p}\""));
            }
            out.push(PathPart::Field(r[..end].to_string()));
            rest = &r[end..];
        }
    }
    if out.is_empty() {
        return Err(format!("invalid JSON path \"{p}\""));
    }
    Ok(out)
}

/// A `pattern` expression: `<name>` captures, `<_>` skips, everything else is literal.
fn parse_pattern(src: &str) -> Result<Vec<PatternPart>, String> {
    let mut out = Vec::new();
    let mut rest = src;
    while !rest.is_empty() {
        let capture = rest.strip_prefix('<').and_then(|r| {
            let end = r.find('>')?;
            let name = &r[..end];
            (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                .then_some((name, &r[end + 1..]))
        });
        match capture {
            Some((name, after)) => {
                if matches!(out.last(), Some(PatternPart::Capture(_))) {
                    return Err(format!("invalid pattern \"{src}\": consecutive captures"));
                }
                out.push(PatternPart::Capture(
                    (name != "_").then(|| name.to_string()),
                ));
                rest = after;
            }
            None => {
                let next = rest[1..].find('<').map_or(rest.len(), |i| i + 1);
                match out.last_mut() {
                    Some(PatternPart::Literal(l)) => l.push_str(&rest[..next]),
                    _ => out.push(PatternPart::Literal(rest[..next].to_string())),
                }
                rest = &rest[next..];
            }
        }
    }
    if !out
        .iter()
        .any(|p| matches!(p, PatternPart::Capture(Some(_))))
    {
        return Err(format!(
            "invalid pattern \"{src}\": at least one named capture is needed"
        ));
    }
    Ok(out)
}

/// `line_format` templates: text and `{{ .label }}`; Go template functions and pipelines are
/// refused by name.
fn parse_template(t: &str) -> Result<Vec<TemplatePart>, String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            out.push(TemplatePart::Text(rest[..open].to_string()));
        }
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or_else(|| {
            format!("parse error: unclosed action in line_format template \"{t}\"")
        })?;
        let action = after[..close].trim_matches(|c: char| c.is_whitespace() || c == '-');
        match action.strip_prefix('.') {
            Some(name)
                if !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                out.push(TemplatePart::Label(name.to_string()));
            }
            _ => {
                return Err(unsupported(&format!(
                    "the line_format template action `{{{{ {action} }}}}` (only `{{{{ .label }}}}` is)"
                )));
            }
        }
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        out.push(TemplatePart::Text(rest.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(q: &str) -> MetricExpr {
        match parse(q).unwrap() {
            Expr::Metric(m) => m,
            Expr::Log(_) => panic!("{q} parsed as a log query"),
        }
    }

    #[test]
    fn parses_log_queries_with_pipelines() {
        let Expr::Log(l) = parse(r#"{namespace="shop", pod=~"cart-.*"} |= "error" != "timeout" |~ `5\d\d` | json | status >= 500 and level="error" or took > 250ms | line_format "{{.level}}: {{ .msg }}""#).unwrap() else {
            panic!("log query expected");
        };
        assert_eq!(l.selector.len(), 2);
        assert!(l.selector[1].matches("cart-1") && !l.selector[1].matches("xcart-1"));
        assert_eq!(l.stages.len(), 6);
        assert!(matches!(&l.stages[0], Stage::Line(f) if !f.negate && f.values == ["error"]));
        assert!(matches!(&l.stages[1], Stage::Line(f) if f.negate));
        assert!(matches!(&l.stages[2], Stage::Line(f) if f.regexes.len() == 1));
        assert!(matches!(&l.stages[3], Stage::Json(p) if p.is_empty()));
        assert!(matches!(&l.stages[4], Stage::Filter(LabelExpr::Or(..))));
        assert!(matches!(&l.stages[5], Stage::LineFormat(t) if t.len() == 3));
        let Expr::Log(l) =
            parse(r#"{app="a"} | logfmt --strict level, d="duration" | json x="a.b[0]""#).unwrap()
        else {
            panic!()
        };
        assert!(
            matches!(&l.stages[0], Stage::Logfmt { strict: true, params, .. } if params.len() == 2)
        );
        assert!(
            matches!(&l.stages[1], Stage::Json(p) if p[0].1 == [PathPart::Field("a".into()), PathPart::Field("b".into()), PathPart::Index(0)])
        );
    }

    #[test]
    fn parses_metric_queries() {
        let m = metric(r#"sum by (pod) (count_over_time({namespace="x"} |= "error" [5m]))"#);
        let MetricExpr::Agg {
            op: AggOp::Sum,
            grouping: Some(Grouping::By(g)),
            inner,
            ..
        } = m
        else {
            panic!()
        };
        assert_eq!(g, ["pod"]);
        assert!(matches!(
            *inner,
            MetricExpr::Range {
                func: RangeFn::CountOverTime,
                range_ns: 300_000_000_000,
                ..
            }
        ));
        let m = metric(r#"topk(3, sum(rate({a="b"}[1m])) by (container))"#);
        assert!(matches!(
            m,
            MetricExpr::Agg {
                op: AggOp::Topk,
                param: Some(3),
                ..
            }
        ));
        let m = metric(r#"sum by (pod) (count_over_time({a="b"}[5m])) > bool 10 * 2 ^ 2 ^ 0"#);
        let MetricExpr::Binary {
            op: BinOp::Gt,
            keep_bool: true,
            rhs,
            ..
        } = m
        else {
            panic!("comparison at the top: {m:?}")
        };
        assert!(matches!(*rhs, MetricExpr::Binary { op: BinOp::Mul, .. }));
        assert!(matches!(
            metric(r#"-1 * rate({a="b"}[1m])"#),
            MetricExpr::Binary { op: BinOp::Mul, .. }
        ));
        let Expr::Log(_) = parse(r#"(({a="b"} |= "x"))"#).unwrap() else {
            panic!()
        };
        let m = metric(r#"bytes_rate({a="b"}[30s] offset 1m)"#);
        assert!(matches!(
            m,
            MetricExpr::Range {
                func: RangeFn::BytesRate,
                offset_ns: 60_000_000_000,
                ..
            }
        ));
    }

    #[test]
    fn refuses_what_it_does_not_evaluate_by_name() {
        for (q, what) in [
            (r#"sum_over_time({a="b"} | unwrap x [1m])"#, "sum_over_time"),
            (r#"count_over_time({a="b"} | unwrap x [1m])"#, "unwrap"),
            (r#"{a="b"} | unpack"#, "unpack"),
            (
                r#"sum(rate({a="b"}[1m])) / sum(rate({a="c"}[1m]))"#,
                "two vectors",
            ),
            (
                r#"sum(rate({a="b"}[1m])) and sum(rate({a="c"}[1m]))"#,
                "binary operator `and`",
            ),
            (r#"1 + 2"#, "without a log stream selector"),
            (
                r#"{a="b"} | line_format "{{ .x | upper }}""#,
                "line_format template action",
            ),
            (
                r#"quantile_over_time(0.9, {a="b"} | unwrap x [1m])"#,
                "quantile_over_time",
            ),
        ] {
            let e = parse(q).unwrap_err();
            assert!(e.starts_with(UNSUPPORTED) && e.contains(what), "{q}: {e}");
        }
    }

    #[test]
    fn parses_extraction_stages() {
        let Expr::Log(l) = parse(r#"{a="b"} | pattern `<ip> - <_> "<method> <path>"` | regexp "took=(?P<took>\\d+)" | label_format who=ip, route="{{.method}} {{.path}}""#).unwrap() else {
            panic!()
        };
        let Stage::Pattern(p) = &l.stages[0] else {
            panic!()
        };
        assert_eq!(p[0], PatternPart::Capture(Some("ip".into())));
        assert_eq!(p[1], PatternPart::Literal(" - ".into()));
        assert_eq!(p[2], PatternPart::Capture(None));
        assert_eq!(p[3], PatternPart::Literal(" \"".into()));
        assert!(matches!(&l.stages[1], Stage::Regexp(_)));
        assert!(
            matches!(&l.stages[2], Stage::LabelFormat(f) if f[0] == ("who".to_string(), LabelFormat::Rename("ip".into())))
        );
        assert!(
            parse(r#"{a="b"} | regexp "(\\d+)""#)
                .unwrap_err()
                .contains("named capture")
        );
        assert!(
            parse(r#"{a="b"} | pattern "<_> x""#)
                .unwrap_err()
                .contains("named capture")
        );
    }

    #[test]
    fn syntax_errors_name_the_position() {
        let e = parse(r#"{a="b""#).unwrap_err();
        assert!(e.starts_with("parse error at line 1, col 7"), "{e}");
        let e = parse(r#"{a=~".*"}"#).unwrap_err();
        assert!(e.contains("at least one regexp or equality matcher"), "{e}");
        assert!(
            parse(r#"count_over_time({a="b"})"#)
                .unwrap_err()
                .contains("expecting `[`")
        );
        assert!(
            parse(r#"count_over_time({a="b"}[x])"#)
                .unwrap_err()
                .contains("range like [5m]")
        );
        assert!(parse("").unwrap_err().contains("unexpected end of query"));
        let deep = format!("{}{{a=\"b\"}}{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(parse(&deep).unwrap_err().contains("nested brackets"));
        let long = format!("{{a=\"b\"}} | x=\"1\"{}", " and x=\"1\"".repeat(100_000));
        assert!(parse(&long).is_ok(), "long filter chains stay flat");
    }
}
