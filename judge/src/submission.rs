//! Agent outputs in: free text, SREGym submissions (`{"solution": "..."}`), ITBench
//! `agent_output.json` in either generation, faultline agent outputs, and the damaged forms real agents
//! produce (a JSON string wrapping a fenced block, trailing commas, missing commas, unclosed braces).

use schemas::AgentOutput;
use serde_json::Value;

use crate::json_text;

/// Why an output could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct UnreadableOutput(pub String);

/// Parses the text of an output file. `json_expected` is false for `.txt`/`.md` files, whose whole
/// text is the diagnosis.
pub fn parse(text: &str, json_expected: bool) -> Result<AgentOutput, UnreadableOutput> {
    if !json_expected {
        return Ok(AgentOutput::from_text(text.trim()));
    }
    let value = json_text::parse_lenient(text).map_err(UnreadableOutput)?;
    from_value(value)
}

/// Reads a parsed JSON value of any accepted shape.
pub fn from_value(value: Value) -> Result<AgentOutput, UnreadableOutput> {
    match value {
        // An agent that wrote its JSON as a string (often with a ```json fence inside).
        Value::String(inner) => match json_text::parse_lenient(&inner) {
            Ok(v @ Value::Object(_)) => from_value(v),
            _ => Ok(AgentOutput::from_text(inner.trim())),
        },
        Value::Object(mut map) => {
            if let Some(Value::String(solution)) = map.get("solution") {
                return Ok(AgentOutput::from_text(solution.trim()));
            }
            // Older ITBench outputs leave out arrays; the current prompt requires them.
            for key in ["entities", "propagations"] {
                if map.get(key).is_some_and(Value::is_null) {
                    map.remove(key);
                }
            }
            serde_json::from_value(Value::Object(map)).map_err(|e| {
                UnreadableOutput(format!(
                    "not an agent output (expected entities[{{name, contributing_factor}}], propagations[{{source, target}}] or diagnosis): {e}"
                ))
            })
        }
        other => Err(UnreadableOutput(format!(
            "expected a JSON object or string, found {}",
            crate::truth::kind_of(&other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_shape_agents_write() {
        let modern = r#"{"entities":[{"name":"otel-demo/ConfigMap/flagd-config","contributing_factor":true}],"propagations":[],"alerts_explained":[]}"#;
        let o = parse(modern, true).unwrap();
        assert_eq!(o.entities[0].name, "otel-demo/ConfigMap/flagd-config");

        let wrapped =
            serde_json::to_string(&format!("Here it is:\n```json\n{modern}\n```")).unwrap();
        assert_eq!(parse(&wrapped, true).unwrap(), o);

        let damaged =
            r#"{"entities":[{"name":"a/Pod/b","contributing_factor":true,},],"propagations":[]"#;
        assert_eq!(parse(damaged, true).unwrap().entities[0].name, "a/Pod/b");

        let sregym =
            r#"{"solution": "  The checkout Service targetPort is 8081 instead of 8080. "}"#;
        assert_eq!(
            parse(sregym, true).unwrap().diagnosis,
            "The checkout Service targetPort is 8081 instead of 8080."
        );

        assert_eq!(parse("free text\n", false).unwrap().diagnosis, "free text");
    }

    #[test]
    fn unreadable_outputs_say_why() {
        let e = parse("I could not find anything", true).unwrap_err();
        assert!(e.0.contains("no JSON"), "{e}");
        let e = parse(r#"{"entities": 3}"#, true).unwrap_err();
        assert!(e.0.contains("entities"), "{e}");
    }
}
