//! LogQL, Loki's query language: the syntax tree ([`ast`]), the lexer and a recursive-descent parser
//! for the part of the language faultline's Loki API evaluates. No IO: the evaluator lives with the
//! log store it reads (`apis::loki::eval`).
//!
//! Valid LogQL outside the evaluated part is refused with an error naming the construct, so nobody
//! gets a silently different answer. (The one LogQL crate that parses the whole language
//! is AGPL-licensed, which this Apache-2.0 project cannot take.)

pub mod ast;
mod lexer;
mod parser;

pub use ast::*;
pub use lexer::bytes_unit;

use lexer::lex;
use parser::Parser;

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

pub(crate) fn unsupported(what: &str) -> String {
    format!("{UNSUPPORTED}: {what} is not evaluated by this replay")
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
