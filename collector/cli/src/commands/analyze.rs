//! `collector analyze TOOL DATASET`: one SRE analysis tool (ITBench's names and arguments, plus
//! faultline's additions) over a dataset, as a table or as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Map, Value};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  collector analyze --list\n  collector analyze alert_summary out/geo/dataset\n  collector analyze get_trace_error_tree out/geo/dataset -p pivot_time=2026-01-01T00:05:00Z -p delta_time=5m\n  collector analyze event_analysis out/geo/dataset -p group_by=reason -p 'filters={\"event_kind\":\"Warning\"}' --json\n  collector analyze metric_analysis out/geo/dataset --args '{\"object_pattern\":\"pod/*\",\"metric_names\":[\"container_memory_working_set_bytes\"],\"group_by\":\"deployment\",\"agg\":\"max\"}'\n  collector analyze build_topology out/geo/dataset -p output_file=topology.json\n\nArguments are ITBench's (file and directory arguments are accepted and ignored: the data is the dataset's).\nExit status: 0 answered, 2 bad arguments, 1 the data could not be read."
)]
pub struct Args {
    /// The tool (see --list).
    #[arg(required_unless_present = "list")]
    pub tool: Option<String>,
    /// The dataset directory (the one holding manifest.json).
    #[arg(required_unless_present = "list")]
    pub dataset: Option<PathBuf>,
    /// One argument, NAME=VALUE; VALUE is read as JSON when it is JSON, else as text. Repeatable.
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    /// Every argument as one JSON object (NAME=VALUE arguments are added to it).
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
    /// List the tools with their arguments.
    #[arg(long)]
    pub list: bool,
}

/// The arguments as one JSON object.
fn arguments(args: &Args) -> anyhow::Result<Value> {
    let mut map: Map<String, Value> = match &args.args {
        Some(text) => match serde_json::from_str(text).context("--args: not JSON")? {
            Value::Object(m) => m,
            _ => anyhow::bail!("--args: expected a JSON object"),
        },
        None => Map::new(),
    };
    for p in &args.params {
        let (name, value) = p
            .split_once('=')
            .with_context(|| format!("--param `{p}`: expected NAME=VALUE"))?;
        let value =
            serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
        map.insert(name.trim().to_string(), value);
    }
    Ok(Value::Object(map))
}

fn list(json: bool) -> anyhow::Result<ExitCode> {
    if json {
        let tools: Vec<Value> = analysis::TOOLS
            .iter()
            .map(|t| serde_json::json!({"name": t.name, "itbench": t.itbench, "description": t.description, "arguments": t.schema()}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&tools)?);
        return Ok(ExitCode::SUCCESS);
    }
    for t in analysis::TOOLS {
        let origin = if t.itbench { "ITBench" } else { "faultline" };
        println!("{}  ({origin})", t.name);
        println!("    {}", t.description);
        if let Some(props) = t.schema().get("properties").and_then(Value::as_object) {
            let names: Vec<&String> = props.keys().collect();
            println!(
                "    arguments: {}",
                names
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.list {
        return list(args.json);
    }
    let (Some(tool), Some(dataset)) = (&args.tool, &args.dataset) else {
        anyhow::bail!("a tool and a dataset are needed (or --list)");
    };
    let arguments = arguments(&args)?;
    let source = analysis::Source::dataset(dataset)?;
    let output_file = (tool == "build_topology")
        .then(|| {
            arguments
                .get("output_file")
                .and_then(Value::as_str)
                .map(PathBuf::from)
        })
        .flatten();
    let answer = match analysis::run(&source, tool, arguments) {
        Ok(a) => a,
        Err(analysis::Error::Param(msg)) => {
            eprintln!("error: {msg}");
            return Ok(ExitCode::from(crate::EXIT_USAGE));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(path) = output_file {
        let topology = analysis::topology::topology(&source)?;
        datasets::write_atomically(&path, serde_json::to_string_pretty(&topology)?.as_bytes())?;
        eprintln!("wrote the topology to {}", path.display());
    }
    let text = if args.json {
        serde_json::to_string_pretty(&answer)? + "\n"
    } else {
        render(&answer)
    };
    // A reader that stops early (`| head`) is not an error.
    match std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// A cell as one short line.
fn cell(v: &Value) -> String {
    let s = match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let s = s.replace('\n', " ");
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(59).collect::<String>())
    } else {
        s
    }
}

/// Rows of flat objects as an aligned table.
fn table(rows: &[Value]) -> Option<String> {
    let first = rows.first()?.as_object()?;
    let columns: Vec<&String> = first.keys().collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| columns.iter().map(|c| cell(&r[c.as_str()])).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .max(c.len())
        })
        .collect();
    let line = |values: Vec<String>| {
        values
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
            + "\n"
    };
    let mut out = line(columns.iter().map(|c| c.to_string()).collect());
    for r in cells {
        out.push_str(&line(r));
    }
    Some(out)
}

/// A readable rendering: a list of records as a table, a paged answer's scalars then its rows,
/// anything else as indented JSON.
pub fn render(answer: &Value) -> String {
    match answer {
        Value::Array(rows) if rows.is_empty() => "(nothing)\n".into(),
        Value::Array(rows) => table(rows).unwrap_or_else(|| format!("{answer:#}\n")),
        Value::Object(m) if m.get("data").is_some_and(Value::is_array) => {
            let mut out = String::new();
            for (k, v) in m.iter().filter(|(k, _)| *k != "data") {
                out.push_str(&format!("{k}: {}\n", cell(v)));
            }
            let rows = m["data"].as_array().expect("checked");
            out.push_str(&table(rows).unwrap_or_else(|| "(no rows)\n".into()));
            out
        }
        other => format!("{other:#}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_render_as_a_table() {
        let v = serde_json::json!([{"a": "x", "n": 1}, {"a": "longer", "n": null}]);
        assert_eq!(render(&v), "a       n\nx       1\nlonger\n");
        let paged = serde_json::json!({"total_count": 1, "data": [{"k": "v"}]});
        assert_eq!(render(&paged), "total_count: 1\nk\nv\n");
    }
}
