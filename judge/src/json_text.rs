//! JSON inside text written by models and agents: fenced blocks, prose around the JSON, and the small
//! syntax slips ITBench's loader also repairs (trailing commas, missing commas between values,
//! unclosed strings, brackets and braces).

use serde_json::Value;

/// Parses `text` as JSON, or failing that the JSON found inside it, repaired if needed.
pub fn parse_lenient(text: &str) -> Result<Value, String> {
    if let Ok(v) = serde_json::from_str(text) {
        return Ok(v);
    }
    let candidate =
        extract(text).ok_or_else(|| "no JSON object or array in the text".to_string())?;
    serde_json::from_str(candidate)
        .or_else(|first| {
            let repaired = repair(candidate);
            serde_json::from_str(&repaired).map_err(|_| first)
        })
        .map_err(|e| format!("invalid JSON even after repair: {e}"))
}

/// The JSON part of a text: the body of a ```json fence if there is one, else from the first `{` or
/// `[` to the last matching closer (or to the end, when the text was cut off).
pub fn extract(text: &str) -> Option<&str> {
    let body = fenced(text).unwrap_or(text);
    let start = body.find(['{', '['])?;
    let closer = if body[start..].starts_with('{') {
        '}'
    } else {
        ']'
    };
    let end = body
        .rfind(closer)
        .filter(|&e| e > start)
        .map_or(body.len(), |e| e + 1);
    Some(body[start..end].trim())
}

fn fenced(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    let body_start = after.find('\n').map_or(0, |i| i + 1);
    let body = &after[body_start..];
    let close = body.find("```").unwrap_or(body.len());
    Some(&body[..close])
}

/// Repairs common slips, tracking strings so commas and brackets inside them are left alone.
pub fn repair(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut stack: Vec<char> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                insert_missing_comma(&mut out, &stack);
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                insert_missing_comma(&mut out, &stack);
                stack.push(if c == '{' { '}' } else { ']' });
                out.push(c);
            }
            '}' | ']' => {
                drop_trailing_comma(&mut out);
                // A closer that does not match closes what is open up to its partner.
                while let Some(&open) = stack.last() {
                    stack.pop();
                    if open == c {
                        break;
                    }
                    out.push(open);
                }
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    if in_string {
        out.push('"');
    }
    drop_trailing_comma(&mut out);
    while let Some(close) = stack.pop() {
        drop_trailing_comma(&mut out);
        out.push(close);
    }
    out
}

fn last_significant(out: &str) -> Option<char> {
    out.chars().rev().find(|c| !c.is_whitespace())
}

/// Between two values in an array or object (`} {`, `" "`, `] [`) a comma is missing; a colon or
/// an opening bracket before the new value means it is in place.
fn insert_missing_comma(out: &mut String, stack: &[char]) {
    if stack.is_empty() {
        return;
    }
    if let Some(prev) = last_significant(out)
        && matches!(prev, '}' | ']' | '"')
    {
        // A string right after a string is a key after a value or a value after a value; both need
        // a comma, except a value after its key, which a colon separates.
        out.push(',');
    }
}

fn drop_trailing_comma(out: &mut String) {
    let trimmed = out.trim_end().len();
    if out[..trimmed].ends_with(',') {
        out.truncate(trimmed - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repairs_what_models_get_wrong() {
        for (broken, want) in [
            (r#"{"a": [1, 2,], }"#, json!({"a": [1, 2]})),
            (
                r#"[{"id": "x"} {"id": "y"}]"#,
                json!([{"id": "x"}, {"id": "y"}]),
            ),
            (r#"{"a": "b" "c": "d"}"#, json!({"a": "b", "c": "d"})),
            (r#"{"a": [{"b": "c, d"}"#, json!({"a": [{"b": "c, d"}]})),
            (r#"{"a": "unterminated"#, json!({"a": "unterminated"})),
        ] {
            assert_eq!(parse_lenient(broken).unwrap(), want, "{broken}");
        }
    }

    #[test]
    fn finds_json_in_prose_and_fences() {
        let t = "Let me think.\n```json\n{\"answers\": []}\n```\nDone.";
        assert_eq!(parse_lenient(t).unwrap(), json!({"answers": []}));
        let t = "Answer: {\"x\": 1} as requested";
        assert_eq!(parse_lenient(t).unwrap(), json!({"x": 1}));
        assert!(parse_lenient("nothing here").is_err());
    }
}
