//! A recursive-descent parser over the lexer's tokens.

use regex::Regex;

use crate::ast::*;
use crate::lexer::Tok;
use crate::unsupported;

pub(crate) struct Parser {
    pub(crate) toks: Vec<(usize, Tok)>,
    pub(crate) pos: usize,
    pub(crate) src_len: usize,
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

    pub(crate) fn err_at(&self, at: usize, msg: &str) -> String {
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

    pub(crate) fn expr(&mut self) -> Result<Expr, String> {
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
