//! `metric_analysis`'s `eval`: a derived metric such as `throttle_pct = throttled / periods * 100`,
//! parsed here (numbers, metric names, `+ - * /`, parentheses, unary minus) and handed to polars
//! as an expression over the pivoted frame. Metric names are used as ITBench sanitises them
//! (`:` `-` `.` `/` and spaces become `_`); a name written unsanitised is sanitised first.

use polars::prelude::{Expr, col, lit};

use crate::{Error, Result};

/// ITBench's sanitised metric name: `[:-./ ]` → `_`, runs of `_` squeezed, ends trimmed.
pub fn sanitize(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| if ":-./ \t".contains(c) { '_' } else { c })
        .collect();
    let mut out = String::with_capacity(replaced.len());
    for ch in replaced.chars() {
        if ch == '_' && out.ends_with('_') {
            continue;
        }
        out.push(ch);
    }
    out.trim_matches('_').to_string()
}

/// A parsed `eval`: the column it defines (`result` when unnamed) and its expression.
#[derive(Debug, Clone)]
pub struct Derived {
    pub name: String,
    pub expr: Expr,
    /// Metric columns the expression reads.
    pub inputs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(f64),
    Ident(String),
    Op(char),
}

fn tokens(text: &str) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let ch = chars[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch.is_ascii_digit()
            || (ch == '.' && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()))
        {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || chars[i] == '.'
                    || chars[i] == 'e'
                    || chars[i] == 'E'
                    || ((chars[i] == '-' || chars[i] == '+') && matches!(chars[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            let n = s
                .parse()
                .map_err(|_| Error::param(format!("eval: `{s}` is not a number")))?;
            out.push(Token::Num(n));
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if "+-*/()".contains(ch) {
            out.push(Token::Op(ch));
            i += 1;
        } else {
            return Err(Error::param(format!(
                "eval: unexpected `{ch}`; use metric names, numbers, + - * / and parentheses"
            )));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    columns: &'a [String],
    inputs: Vec<String>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn expr(&mut self) -> Result<Expr> {
        let mut left = self.term()?;
        while let Some(Token::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.at += 1;
            let right = self.term()?;
            left = if op == '+' {
                left + right
            } else {
                left - right
            };
        }
        Ok(left)
    }

    fn term(&mut self) -> Result<Expr> {
        let mut left = self.factor()?;
        while let Some(Token::Op(op @ ('*' | '/'))) = self.peek().cloned() {
            self.at += 1;
            let right = self.factor()?;
            left = if op == '*' {
                left * right
            } else {
                left / right
            };
        }
        Ok(left)
    }

    fn factor(&mut self) -> Result<Expr> {
        match self.peek().cloned() {
            Some(Token::Num(n)) => {
                self.at += 1;
                Ok(lit(n))
            }
            Some(Token::Ident(name)) => {
                self.at += 1;
                if !self.columns.contains(&name) {
                    return Err(Error::param(format!(
                        "eval: `{name}` is not a loaded metric; available (sanitised): {}",
                        self.columns.join(", ")
                    )));
                }
                if !self.inputs.contains(&name) {
                    self.inputs.push(name.clone());
                }
                Ok(col(name.as_str()))
            }
            Some(Token::Op('-')) => {
                self.at += 1;
                Ok(lit(0.0) - self.factor()?)
            }
            Some(Token::Op('(')) => {
                self.at += 1;
                let e = self.expr()?;
                match self.peek() {
                    Some(Token::Op(')')) => {
                        self.at += 1;
                        Ok(e)
                    }
                    _ => Err(Error::param("eval: a `(` is not closed")),
                }
            }
            other => Err(Error::param(format!(
                "eval: expected a number, a metric name or `(`, found {}",
                other.map_or("the end".to_string(), |t| format!("{t:?}"))
            ))),
        }
    }
}

/// Parses `name = expression` (or a bare expression) against the pivoted columns; `originals`
/// are the metric names as loaded, replaced by their sanitised forms first (longest first).
pub fn parse(text: &str, originals: &[String]) -> Result<Derived> {
    let mut text = text.to_string();
    let mut names: Vec<&String> = originals.iter().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for name in names {
        let clean = sanitize(name);
        if *name != clean {
            text = text.replace(name.as_str(), &clean);
        }
    }
    let (name, body) = match text.split_once('=') {
        Some((n, b)) => (n.trim().to_string(), b.to_string()),
        None => ("result".to_string(), text.clone()),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(Error::param(format!(
            "eval: `{name}` is not a column name (write `name = expression`)"
        )));
    }
    let toks = tokens(&body)?;
    let columns: Vec<String> = originals.iter().map(|o| sanitize(o)).collect();
    let mut p = Parser {
        tokens: &toks,
        at: 0,
        columns: &columns,
        inputs: Vec::new(),
    };
    let expr = p.expr()?;
    if p.at != toks.len() {
        return Err(Error::param(format!(
            "eval: unexpected {:?} after the expression",
            toks[p.at]
        )));
    }
    Ok(Derived {
        expr: expr.alias(name.as_str()),
        name,
        inputs: p.inputs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_as_itbench_does() {
        assert_eq!(
            sanitize("cluster:namespace:pod_memory:active:kube_pod_container_resource_limits"),
            "cluster_namespace_pod_memory_active_kube_pod_container_resource_limits"
        );
        assert_eq!(sanitize("a--b..c"), "a_b_c");
    }

    #[test]
    fn expressions_parse_and_name_their_inputs() {
        let metrics = vec!["throttled".to_string(), "a:b".to_string()];
        let d = parse("pct = throttled / a:b * 100", &metrics).unwrap();
        assert_eq!(d.name, "pct");
        assert_eq!(d.inputs, ["throttled", "a_b"]);
        let d = parse("-(throttled + 1e3) / 2", &metrics).unwrap();
        assert_eq!(d.name, "result");
        assert!(
            parse("pct = nope * 2", &metrics)
                .unwrap_err()
                .to_string()
                .contains("nope")
        );
        assert!(parse("pct = (throttled", &metrics).is_err());
        assert!(parse("pct = throttled % 2", &metrics).is_err());
    }
}
