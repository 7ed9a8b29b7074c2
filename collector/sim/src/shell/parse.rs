//! The POSIX shell grammar a container's `sh -c` takes, as far as agents use it: words with
//! quoting, `$VAR`, `${VAR}`, `${VAR:-default}`, `$(...)` and backquotes; lists with `;`, `&&`,
//! `||`, `&` and newlines; pipelines; redirections (`>`, `>>`, `<`, `2>&1`); `if`, `for` and
//! `while`. Parsing is IO-free and bounded: input length and nesting depth are capped so that a
//! hostile script cannot exhaust the server.

use std::fmt;

/// Longest script taken (a command line agents write is far shorter).
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// Deepest nesting of compound commands and substitutions.
pub const MAX_DEPTH: usize = 32;

/// A list of commands run one after the other.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Script(pub Vec<AndOr>);

/// Pipelines joined by `&&` and `||`.
#[derive(Debug, Clone, PartialEq)]
pub struct AndOr {
    pub first: Pipeline,
    pub rest: Vec<(Join, Pipeline)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    And,
    Or,
}

/// Commands joined by `|`; `!` negates the status.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    pub negate: bool,
    pub commands: Vec<Command>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Simple(Simple),
    If {
        /// (condition, body) for `if` and each `elif`.
        branches: Vec<(Script, Script)>,
        otherwise: Option<Script>,
    },
    For {
        var: String,
        words: Vec<Word>,
        body: Script,
    },
    While {
        until: bool,
        condition: Script,
        body: Script,
    },
    /// `( list )` or `{ list; }`.
    Group(Script),
}

/// `NAME=value ... word ... redirections`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Simple {
    pub assigns: Vec<(String, Word)>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

/// A word before expansion.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Word(pub Vec<Part>);

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Text, and whether it was quoted (quoted text is never split or globbed).
    Text(String, bool),
    /// `$NAME` / `${NAME}` / `${NAME:-default}`, and whether it was inside double quotes.
    Var {
        name: String,
        default: Option<Word>,
        quoted: bool,
    },
    /// `$(...)` or backquotes, and whether it was inside double quotes.
    Subst(Script, bool),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Redirect {
    /// The descriptor redirected (1 for `>`, 0 for `<`).
    pub fd: u8,
    pub op: RedirectOp,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RedirectOp {
    Write(Word),
    Append(Word),
    Read(Word),
    /// `2>&1`: `fd` goes where the other descriptor goes.
    Dup(u8),
}

/// Why a script does not parse, in the words `sh` uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError(pub String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "syntax error: {}", self.0)
    }
}

impl Word {
    pub fn literal(s: &str) -> Word {
        Word(vec![Part::Text(s.to_string(), false)])
    }

    /// The word's text when it has no expansions and no quoting (keywords, assignments).
    fn plain(&self) -> Option<&str> {
        match self.0.as_slice() {
            [Part::Text(t, false)] => Some(t),
            _ => None,
        }
    }
}

/// Parses a whole script.
pub fn parse(src: &str) -> Result<Script, SyntaxError> {
    if src.len() > MAX_SCRIPT_BYTES {
        return Err(SyntaxError(format!(
            "script longer than {MAX_SCRIPT_BYTES} bytes"
        )));
    }
    let tokens = lex(src, 0)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let script = p.list(&[])?;
    match p.peek() {
        None => Ok(script),
        Some(t) => Err(SyntaxError(format!("unexpected \"{t}\""))),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(Word),
    /// `;`, `&`, `&&`, `||`, `|`, newline, `(`, `)`.
    Op(&'static str),
    Redirect(u8, &'static str),
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) => write!(f, "{}", w.plain().unwrap_or("word")),
            Token::Op("\n") => write!(f, "newline"),
            Token::Op(o) => write!(f, "{o}"),
            Token::Redirect(_, o) => write!(f, "{o}"),
        }
    }
}

/// Splits a script into tokens; `depth` counts enclosing substitutions.
fn lex(src: &str, depth: usize) -> Result<Vec<Token>, SyntaxError> {
    if depth > MAX_DEPTH {
        return Err(SyntaxError("nesting too deep".into()));
    }
    let chars: Vec<char> = src.chars().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' => i += 1,
            '\\' if chars.get(i + 1) == Some(&'\n') => i += 2,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\n' => {
                out.push(Token::Op("\n"));
                i += 1;
            }
            ';' | '(' | ')' => {
                out.push(Token::Op(match c {
                    ';' => ";",
                    '(' => "(",
                    _ => ")",
                }));
                i += 1;
            }
            '&' | '|' => {
                let double = chars.get(i + 1) == Some(&c);
                out.push(Token::Op(match (c, double) {
                    ('&', true) => "&&",
                    ('&', false) => "&",
                    ('|', true) => "||",
                    _ => "|",
                }));
                i += if double { 2 } else { 1 };
            }
            '<' | '>' => {
                let (fd, op, len) = redirect_op(&chars, i, None);
                out.push(Token::Redirect(fd, op));
                i += len;
            }
            d if d.is_ascii_digit()
                && matches!(chars.get(i + 1), Some('<' | '>'))
                && starts_word(&out, &chars, i) =>
            {
                let (fd, op, len) = redirect_op(&chars, i + 1, Some(d as u8 - b'0'));
                out.push(Token::Redirect(fd, op));
                i += 1 + len;
            }
            _ => {
                let (word, next) = lex_word(&chars, i, depth)?;
                out.push(Token::Word(word));
                i = next;
            }
        }
    }
    Ok(out)
}

/// A digit starts a redirection only at the start of a word (`2>`, not `a2>`).
fn starts_word(_out: &[Token], chars: &[char], i: usize) -> bool {
    i == 0
        || matches!(
            chars[i - 1],
            ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')'
        )
}

/// The redirection operator at `i`: (descriptor, operator, length).
fn redirect_op(chars: &[char], i: usize, fd: Option<u8>) -> (u8, &'static str, usize) {
    let next = chars.get(i + 1).copied();
    match (chars[i], next) {
        ('>', Some('>')) => (fd.unwrap_or(1), ">>", 2),
        ('>', Some('&')) => (fd.unwrap_or(1), ">&", 2),
        ('>', Some('|')) => (fd.unwrap_or(1), ">", 2),
        ('>', _) => (fd.unwrap_or(1), ">", 1),
        ('<', Some('&')) => (fd.unwrap_or(0), "<&", 2),
        _ => (fd.unwrap_or(0), "<", 1),
    }
}

fn is_break(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>'
    )
}

/// One word starting at `i`; returns it and the index after it.
fn lex_word(chars: &[char], mut i: usize, depth: usize) -> Result<(Word, usize), SyntaxError> {
    let mut parts: Vec<Part> = vec![];
    let mut text = String::new();
    let flush = |text: &mut String, parts: &mut Vec<Part>, quoted: bool| {
        if !text.is_empty() || quoted {
            parts.push(Part::Text(std::mem::take(text), quoted));
        }
    };
    while i < chars.len() && !is_break(chars[i]) {
        match chars[i] {
            '\\' => {
                if let Some(&n) = chars.get(i + 1) {
                    flush(&mut text, &mut parts, false);
                    parts.push(Part::Text(n.to_string(), true));
                }
                i += 2;
            }
            '\'' => {
                flush(&mut text, &mut parts, false);
                let end = chars[i + 1..]
                    .iter()
                    .position(|&c| c == '\'')
                    .ok_or_else(|| SyntaxError("unterminated quoted string".into()))?;
                let s: String = chars[i + 1..i + 1 + end].iter().collect();
                parts.push(Part::Text(s, true));
                i += end + 2;
            }
            '"' => {
                flush(&mut text, &mut parts, false);
                i = lex_double_quoted(chars, i + 1, depth, &mut parts)?;
            }
            '$' | '`' => {
                flush(&mut text, &mut parts, false);
                let (part, next) = lex_dollar(chars, i, false, depth)?;
                match part {
                    Some(p) => parts.push(p),
                    None => text.push('$'),
                }
                i = next;
            }
            c => {
                text.push(c);
                i += 1;
            }
        }
    }
    flush(&mut text, &mut parts, false);
    Ok((Word(parts), i))
}

/// The inside of `"..."` from `i`; returns the index after the closing quote.
fn lex_double_quoted(
    chars: &[char],
    mut i: usize,
    depth: usize,
    parts: &mut Vec<Part>,
) -> Result<usize, SyntaxError> {
    let mut text = String::new();
    loop {
        let Some(&c) = chars.get(i) else {
            return Err(SyntaxError("unterminated quoted string".into()));
        };
        match c {
            '"' => {
                parts.push(Part::Text(text, true));
                return Ok(i + 1);
            }
            '\\' if matches!(chars.get(i + 1), Some('$' | '`' | '"' | '\\' | '\n')) => {
                if chars[i + 1] != '\n' {
                    text.push(chars[i + 1]);
                }
                i += 2;
            }
            '$' | '`' => {
                let (part, next) = lex_dollar(chars, i, true, depth)?;
                match part {
                    Some(p) => {
                        parts.push(Part::Text(std::mem::take(&mut text), true));
                        parts.push(p);
                    }
                    None => text.push('$'),
                }
                i = next;
            }
            c => {
                text.push(c);
                i += 1;
            }
        }
    }
}

/// An expansion at `i` (`$NAME`, `${...}`, `$(...)`, backquotes); `None` for a lone `$`.
fn lex_dollar(
    chars: &[char],
    i: usize,
    quoted: bool,
    depth: usize,
) -> Result<(Option<Part>, usize), SyntaxError> {
    if chars[i] == '`' {
        let end = chars[i + 1..]
            .iter()
            .position(|&c| c == '`')
            .ok_or_else(|| SyntaxError("unterminated `".into()))?;
        let inner: String = chars[i + 1..i + 1 + end].iter().collect();
        let script = parse_nested(&inner, depth)?;
        return Ok((Some(Part::Subst(script, quoted)), i + end + 2));
    }
    match chars.get(i + 1) {
        Some('(') => {
            let end = matching_paren(chars, i + 1)?;
            let inner: String = chars[i + 2..end].iter().collect();
            let script = parse_nested(&inner, depth)?;
            Ok((Some(Part::Subst(script, quoted)), end + 1))
        }
        Some('{') => {
            let end = chars[i + 2..]
                .iter()
                .position(|&c| c == '}')
                .ok_or_else(|| SyntaxError("missing }".into()))?;
            let inner: String = chars[i + 2..i + 2 + end].iter().collect();
            let (name, default) = match inner.split_once(":-").or(inner.split_once('-')) {
                Some((n, d)) => (n.to_string(), Some(lex_word_text(d, depth)?)),
                None => (inner, None),
            };
            if !valid_name(&name) && !is_special(&name) {
                return Err(SyntaxError(format!("bad substitution: ${{{name}}}")));
            }
            Ok((
                Some(Part::Var {
                    name,
                    default,
                    quoted,
                }),
                i + end + 3,
            ))
        }
        Some(&c) if c == '?' || c == '$' || c == '#' || c == '@' || c.is_ascii_digit() => Ok((
            Some(Part::Var {
                name: c.to_string(),
                default: None,
                quoted,
            }),
            i + 2,
        )),
        Some(&c) if c == '_' || c.is_ascii_alphabetic() => {
            let len = chars[i + 1..]
                .iter()
                .take_while(|c| **c == '_' || c.is_ascii_alphanumeric())
                .count();
            let name: String = chars[i + 1..i + 1 + len].iter().collect();
            Ok((
                Some(Part::Var {
                    name,
                    default: None,
                    quoted,
                }),
                i + 1 + len,
            ))
        }
        _ => Ok((None, i + 1)),
    }
}

fn is_special(name: &str) -> bool {
    matches!(name, "?" | "$" | "#" | "@") || name.chars().all(|c| c.is_ascii_digit())
}

/// A name a variable can have.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The default of `${X:-default}`, lexed as a word.
fn lex_word_text(s: &str, depth: usize) -> Result<Word, SyntaxError> {
    let chars: Vec<char> = s.chars().collect();
    let mut parts = vec![];
    let mut i = 0;
    while i < chars.len() {
        // Spaces are part of a default (`${X:-a b}`).
        let (w, next) = lex_word(&chars, i, depth + 1)?;
        parts.extend(w.0);
        if next < chars.len() {
            parts.push(Part::Text(chars[next].to_string(), true));
        }
        i = next + 1;
    }
    Ok(Word(parts))
}

/// The index of the `)` closing the `(` at `open`, skipping quotes and nested parentheses.
fn matching_paren(chars: &[char], open: usize) -> Result<usize, SyntaxError> {
    let mut level = 0usize;
    let mut i = open;
    while i < chars.len() {
        match chars[i] {
            '(' => level += 1,
            ')' => {
                level -= 1;
                if level == 0 {
                    return Ok(i);
                }
            }
            '\'' => {
                i += chars[i + 1..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map_or(chars.len(), |p| p + 1);
            }
            '"' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != '"' {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                i = j;
            }
            '\\' => i += 1,
            _ => {}
        }
        i += 1;
    }
    Err(SyntaxError("unterminated $(".into()))
}

fn parse_nested(src: &str, depth: usize) -> Result<Script, SyntaxError> {
    let tokens = lex(src, depth + 1)?;
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: depth + 1,
    };
    let script = p.list(&[])?;
    match p.peek() {
        None => Ok(script),
        Some(t) => Err(SyntaxError(format!("unexpected \"{t}\""))),
    }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    /// The keyword at the current position, if the token is one.
    fn keyword(&self) -> Option<&str> {
        match self.peek() {
            Some(Token::Word(w)) => w.plain(),
            _ => None,
        }
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Some(Token::Op("\n" | ";"))) {
            self.pos += 1;
        }
    }

    fn expect_keyword(&mut self, kw: &str) -> Result<(), SyntaxError> {
        self.skip_newlines();
        if self.keyword() == Some(kw) {
            self.pos += 1;
            Ok(())
        } else {
            Err(SyntaxError(match self.peek() {
                Some(t) => format!("unexpected \"{t}\" (expecting \"{kw}\")"),
                None => format!("unexpected end of file (expecting \"{kw}\")"),
            }))
        }
    }

    /// Commands until one of the `stops` keywords (or `)`), or the end.
    fn list(&mut self, stops: &[&str]) -> Result<Script, SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SyntaxError("nesting too deep".into()));
        }
        let mut out = vec![];
        loop {
            self.skip_newlines();
            match self.peek() {
                None | Some(Token::Op(")")) => break,
                _ if self.keyword().is_some_and(|k| stops.contains(&k)) => break,
                _ => {}
            }
            out.push(self.and_or()?);
            if let Some(Token::Op(";" | "\n" | "&")) = self.peek() {
                self.pos += 1;
            }
        }
        self.depth -= 1;
        Ok(Script(out))
    }

    fn and_or(&mut self) -> Result<AndOr, SyntaxError> {
        let first = self.pipeline()?;
        let mut rest = vec![];
        loop {
            let join = match self.peek() {
                Some(Token::Op("&&")) => Join::And,
                Some(Token::Op("||")) => Join::Or,
                _ => break,
            };
            self.pos += 1;
            while matches!(self.peek(), Some(Token::Op("\n"))) {
                self.pos += 1;
            }
            rest.push((join, self.pipeline()?));
        }
        Ok(AndOr { first, rest })
    }

    fn pipeline(&mut self) -> Result<Pipeline, SyntaxError> {
        let negate = self.keyword() == Some("!");
        if negate {
            self.pos += 1;
        }
        let mut commands = vec![self.command()?];
        while matches!(self.peek(), Some(Token::Op("|"))) {
            self.pos += 1;
            while matches!(self.peek(), Some(Token::Op("\n"))) {
                self.pos += 1;
            }
            commands.push(self.command()?);
        }
        Ok(Pipeline { negate, commands })
    }

    fn command(&mut self) -> Result<Command, SyntaxError> {
        match self.keyword() {
            Some("if") => {
                self.pos += 1;
                self.if_rest()
            }
            Some("for") => {
                self.pos += 1;
                self.for_rest()
            }
            Some(kw @ ("while" | "until")) => {
                let until = kw == "until";
                self.pos += 1;
                let condition = self.list(&["do"])?;
                self.expect_keyword("do")?;
                let body = self.list(&["done"])?;
                self.expect_keyword("done")?;
                Ok(Command::While {
                    until,
                    condition,
                    body,
                })
            }
            Some("{") => {
                self.pos += 1;
                let body = self.list(&["}"])?;
                self.expect_keyword("}")?;
                Ok(Command::Group(body))
            }
            _ if matches!(self.peek(), Some(Token::Op("("))) => {
                self.pos += 1;
                let body = self.list(&[])?;
                match self.peek() {
                    Some(Token::Op(")")) => self.pos += 1,
                    _ => return Err(SyntaxError("missing )".into())),
                }
                Ok(Command::Group(body))
            }
            _ => self.simple().map(Command::Simple),
        }
    }

    fn if_rest(&mut self) -> Result<Command, SyntaxError> {
        let mut branches = vec![];
        let mut otherwise = None;
        loop {
            let condition = self.list(&["then"])?;
            self.expect_keyword("then")?;
            let body = self.list(&["elif", "else", "fi"])?;
            branches.push((condition, body));
            self.skip_newlines();
            match self.keyword() {
                Some("elif") => self.pos += 1,
                Some("else") => {
                    self.pos += 1;
                    otherwise = Some(self.list(&["fi"])?);
                    self.expect_keyword("fi")?;
                    break;
                }
                _ => {
                    self.expect_keyword("fi")?;
                    break;
                }
            }
        }
        Ok(Command::If {
            branches,
            otherwise,
        })
    }

    fn for_rest(&mut self) -> Result<Command, SyntaxError> {
        let var = match self.peek() {
            Some(Token::Word(w)) if w.plain().is_some_and(valid_name) => {
                w.plain().unwrap_or_default().to_string()
            }
            _ => return Err(SyntaxError("bad for loop variable".into())),
        };
        self.pos += 1;
        let mut words = vec![];
        if self.keyword() == Some("in") {
            self.pos += 1;
            while let Some(Token::Word(w)) = self.peek() {
                words.push(w.clone());
                self.pos += 1;
            }
        } else {
            words.push(Word(vec![Part::Var {
                name: "@".into(),
                default: None,
                quoted: true,
            }]));
        }
        self.expect_keyword("do")?;
        let body = self.list(&["done"])?;
        self.expect_keyword("done")?;
        Ok(Command::For { var, words, body })
    }

    fn simple(&mut self) -> Result<Simple, SyntaxError> {
        let mut s = Simple::default();
        loop {
            match self.peek().cloned() {
                Some(Token::Word(w)) => {
                    self.pos += 1;
                    if s.words.is_empty()
                        && let Some((name, value)) = assignment(&w)
                    {
                        s.assigns.push((name, value));
                    } else {
                        s.words.push(w);
                    }
                }
                Some(Token::Redirect(fd, op)) => {
                    self.pos += 1;
                    let target = match self.peek().cloned() {
                        Some(Token::Word(w)) => {
                            self.pos += 1;
                            w
                        }
                        other => {
                            return Err(SyntaxError(match other {
                                Some(t) => format!("unexpected \"{t}\""),
                                None => "unexpected end of file".into(),
                            }));
                        }
                    };
                    s.redirects.push(redirect(fd, op, target)?);
                }
                _ => break,
            }
        }
        if s.words.is_empty() && s.assigns.is_empty() && s.redirects.is_empty() {
            return Err(SyntaxError(match self.peek() {
                Some(t) => format!("unexpected \"{t}\""),
                None => "unexpected end of file".into(),
            }));
        }
        Ok(s)
    }
}

fn redirect(fd: u8, op: &str, target: Word) -> Result<Redirect, SyntaxError> {
    let op = match op {
        ">>" => RedirectOp::Append(target),
        "<" => RedirectOp::Read(target),
        ">&" | "<&" => match target.plain().and_then(|t| t.parse::<u8>().ok()) {
            Some(n) if n <= 2 => RedirectOp::Dup(n),
            _ => return Err(SyntaxError("bad fd number".into())),
        },
        _ => RedirectOp::Write(target),
    };
    Ok(Redirect { fd, op })
}

/// `NAME=value` at the start of a simple command.
fn assignment(w: &Word) -> Option<(String, Word)> {
    let Some(Part::Text(first, false)) = w.0.first() else {
        return None;
    };
    let (name, value) = first.split_once('=')?;
    if !valid_name(name) {
        return None;
    }
    let mut parts = vec![Part::Text(value.to_string(), false)];
    parts.extend(w.0[1..].iter().cloned());
    Some((name.to_string(), Word(parts)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &Simple) -> Vec<String> {
        s.words
            .iter()
            .map(|w| {
                w.0.iter()
                    .map(|p| match p {
                        Part::Text(t, _) => t.clone(),
                        Part::Var { name, .. } => format!("${name}"),
                        Part::Subst(..) => "$(..)".into(),
                    })
                    .collect()
            })
            .collect()
    }

    fn first_simple(src: &str) -> Simple {
        match &parse(src).unwrap().0[0].first.commands[0] {
            Command::Simple(s) => s.clone(),
            c => panic!("not simple: {c:?}"),
        }
    }

    #[test]
    fn quoting_keeps_words_together() {
        let s = first_simple(r#"echo 'a b' "c $HOME d" e\ f"#);
        assert_eq!(words(&s), ["echo", "a b", "c $HOME d", "e f"]);
    }

    #[test]
    fn lists_pipes_and_redirections() {
        let script =
            parse("curl -s http://geo:8083/ 2>&1 | head -n 3 && echo ok || echo no; ls >/dev/null")
                .unwrap();
        assert_eq!(script.0.len(), 2);
        let first = &script.0[0];
        assert_eq!(first.first.commands.len(), 2);
        assert_eq!(first.rest.len(), 2);
        let Command::Simple(curl) = &first.first.commands[0] else {
            panic!()
        };
        assert_eq!(
            curl.redirects,
            [Redirect {
                fd: 2,
                op: RedirectOp::Dup(1)
            }]
        );
    }

    #[test]
    fn compound_commands() {
        let script =
            parse("for s in geo rate; do nslookup $s; done\nif true; then echo y; else echo n; fi")
                .unwrap();
        assert!(
            matches!(script.0[0].first.commands[0], Command::For { ref var, ref words, .. } if var == "s" && words.len() == 2)
        );
        assert!(
            matches!(script.0[1].first.commands[0], Command::If { ref otherwise, .. } if otherwise.is_some())
        );
        assert!(parse("while false; do echo; done").is_ok());
    }

    #[test]
    fn substitutions_and_defaults() {
        let s = first_simple("echo $(hostname) `id -u` ${PORT:-8080} $?");
        assert_eq!(words(&s), ["echo", "$(..)", "$(..)", "$PORT", "$?"]);
        let s = first_simple("A=1 B=\"x y\" env");
        assert_eq!(s.assigns.len(), 2);
        assert_eq!(words(&s), ["env"]);
    }

    #[test]
    fn errors_are_syntax_errors_never_panics() {
        for bad in [
            "echo 'open",
            "echo \"open",
            "if true; then echo",
            "for 1x in a; do :; done",
            "| ls",
            "echo $(ls",
            "ls >",
            "echo ${",
            "ls 2>&x",
            "( echo",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let deep = "$(".repeat(100) + &")".repeat(100);
        assert!(parse(&format!("echo {deep}")).is_err());
        let groups = "(".repeat(1000) + &")".repeat(1000);
        assert!(parse(&groups).is_err());
        assert!(parse(&"x".repeat(MAX_SCRIPT_BYTES + 1)).is_err());
    }
}
