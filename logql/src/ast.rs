//! The LogQL syntax tree: stream selectors, log pipelines and metric queries.

use regex::Regex;

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
    pub(crate) fn new(name: String, op: MatchOp, value: String) -> Result<Self, String> {
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
