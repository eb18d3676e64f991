//! [`LabelSelector`]: Kubernetes label selector strings (`apimachinery/pkg/labels/selector.go`,
//! `Parse`), matched against an object's labels.

use std::fmt;

use crate::object::StrMapRef;

/// Longest selector string accepted, bytes (selectors come from configuration, but a bound
/// keeps a bad one from costing much).
pub const MAX_SELECTOR_LEN: usize = 64 * 1024;

/// A parsed label selector: requirements joined by `,`, all of which must hold.
///
/// Grammar and validation as upstream `labels.Parse`: `key`, `!key`, `key=value`,
/// `key==value`, `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`, `key>n`, `key<n`
/// (`n` a signed 64-bit integer); the empty string (or only whitespace) selects everything.
/// Empty values are allowed (`key=`, `key in ()`, `key in (a,)`). Keys are qualified names
/// (an optional DNS-subdomain prefix of at most 253 bytes and `/`, then a name of at most 63
/// bytes of `[A-Za-z0-9._-]` starting and ending alphanumeric); values are empty or follow
/// the name rule. As upstream, `key!=value` and `notin` also match objects without the key,
/// and `>`/`<` match only objects whose value is an integer.
///
/// # Examples
/// ```
/// use informer::object::StrMap;
/// use informer::LabelSelector;
///
/// let sel: LabelSelector = "app=web,tier in (front,edge),!legacy".parse().unwrap();
/// let labels: StrMap = [("app", "web"), ("tier", "edge")].into_iter().collect();
/// assert!(sel.matches(&labels));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// Why a selector string does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// Longer than [`MAX_SELECTOR_LEN`].
    #[error("label selector of {len} bytes is longer than {MAX_SELECTOR_LEN}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// A requirement that does not follow the grammar, or a key or value that is not valid.
    #[error("invalid label selector requirement {requirement:?}: {reason}")]
    Invalid {
        /// The offending requirement, from its start to where parsing stopped.
        requirement: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// `true` when it has no requirement.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches<'a>(&self, labels: impl Into<StrMapRef<'a>>) -> bool {
        let labels = labels.into();
        self.requirements.iter().all(|r| match r {
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.iter().any(|x| v == x)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.iter().any(|x| v == x)),
            Requirement::GreaterThan(k, n) => int_label(labels, k).is_some_and(|v| v > *n),
            Requirement::LessThan(k, n) => int_label(labels, k).is_some_and(|v| v < *n),
        })
    }
}

fn int_label(labels: StrMapRef<'_>, key: &str) -> Option<i64> {
    labels.get(key).and_then(|v| v.parse().ok())
}

/// Longest label name and value (apimachinery `validation.LabelValueMaxLength`,
/// `qualifiedNameMaxLength`).
const MAX_NAME_LEN: usize = 63;
/// Longest key prefix (a DNS subdomain, `validation.DNS1123SubdomainMaxLength`).
const MAX_PREFIX_LEN: usize = 253;

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 bytes (upstream `IsQualifiedName`'s
/// name part and `IsValidLabelValue` for non-empty values).
fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_LEN
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Lower-case RFC 1123 subdomain of at most 253 bytes (upstream `IsDNS1123Subdomain`).
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= MAX_PREFIX_LEN
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_lowercase() | b[0].is_ascii_digit()
                && b[b.len() - 1].is_ascii_lowercase() | b[b.len() - 1].is_ascii_digit()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// A label key: `[prefix/]name` (upstream `IsQualifiedName`, used by `validateLabelKey`).
pub(crate) fn is_label_key(s: &str) -> bool {
    match s.split_once('/') {
        None => is_name(s),
        Some((prefix, name)) => !prefix.is_empty() && is_dns_subdomain(prefix) && is_name(name),
    }
}

/// A label value: empty, or a name of at most 63 bytes (upstream `IsValidLabelValue`).
pub(crate) fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name(s)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Ident(&'a str),
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
    End,
}

/// Splits a selector into tokens as upstream's lexer does: whitespace is ` `, `\t`, `\r`,
/// `\n`; `= ! ( ) , > <` are operators (`!=` and `==` as one); any other run of bytes is an
/// identifier (validated later as a key or value). `in` and `notin` are identifiers here and
/// operators only where an operator is expected.
struct Lexer<'a> {
    s: &'a str,
    pos: usize,
    /// Where the last token returned starts.
    tok_start: usize,
}

impl<'a> Lexer<'a> {
    fn is_special(c: u8) -> bool {
        matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
    }

    /// The next token.
    fn next(&mut self) -> Tok<'a> {
        let b = self.s.as_bytes();
        while self.pos < b.len() && matches!(b[self.pos], b' ' | b'\t' | b'\r' | b'\n') {
            self.pos += 1;
        }
        self.tok_start = self.pos;
        let Some(&c) = b.get(self.pos) else {
            return Tok::End;
        };
        let next = b.get(self.pos + 1).copied();
        let (tok, len) = match (c, next) {
            (b'!', Some(b'=')) => (Tok::NotEq, 2),
            (b'=', Some(b'=')) => (Tok::DoubleEq, 2),
            (b'!', _) => (Tok::Not, 1),
            (b'=', _) => (Tok::Eq, 1),
            (b'>', _) => (Tok::Gt, 1),
            (b'<', _) => (Tok::Lt, 1),
            (b'(', _) => (Tok::Open, 1),
            (b')', _) => (Tok::Close, 1),
            (b',', _) => (Tok::Comma, 1),
            _ => {
                let start = self.pos;
                let mut end = start;
                while end < b.len()
                    && !Self::is_special(b[end])
                    && !matches!(b[end], b' ' | b'\t' | b'\r' | b'\n')
                {
                    end += 1;
                }
                self.pos = end;
                return Tok::Ident(&self.s[start..end]);
            }
        };
        self.pos += len;
        tok
    }
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    peeked: Option<Tok<'a>>,
    /// Where the requirement being parsed starts (for error messages).
    req_start: usize,
}

impl<'a> Parser<'a> {
    fn peek(&mut self) -> Tok<'a> {
        match self.peeked {
            Some(t) => t,
            None => {
                let t = self.lexer.next();
                self.peeked = Some(t);
                t
            }
        }
    }

    fn bump(&mut self) -> Tok<'a> {
        let t = self.peek();
        self.peeked = None;
        t
    }

    fn err(&self, reason: &'static str) -> SelectorError {
        let s = self.lexer.s;
        let end = self.lexer.pos.min(s.len());
        SelectorError::Invalid {
            requirement: s[self.req_start.min(end)..end].trim().to_owned(),
            reason,
        }
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        match self.bump() {
            Tok::Ident(k) if is_label_key(k) => Ok(k.to_owned()),
            Tok::Ident(_) => Err(self.err("invalid label key")),
            _ => Err(self.err("expected a label key")),
        }
    }

    fn value(&self, v: &str) -> Result<String, SelectorError> {
        if is_label_value(v) {
            Ok(v.to_owned())
        } else {
            Err(self.err("invalid label value"))
        }
    }

    /// The value after `=`, `==` or `!=`: empty when the requirement ends there.
    fn exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        match self.peek() {
            Tok::End | Tok::Comma => Ok(vec![String::new()]),
            Tok::Ident(v) => {
                self.bump();
                Ok(vec![self.value(v)?])
            }
            _ => Err(self.err("expected a value")),
        }
    }

    fn integer(&mut self) -> Result<i64, SelectorError> {
        match self.bump() {
            Tok::Ident(v) => {
                self.value(v)?;
                v.parse()
                    .map_err(|_| self.err("'>' and '<' need an integer value"))
            }
            _ => Err(self.err("'>' and '<' need an integer value")),
        }
    }

    /// `( v1, v2, ... )`; empty entries are the empty value, `()` is the empty value alone.
    fn set(&mut self) -> Result<Vec<String>, SelectorError> {
        if self.bump() != Tok::Open {
            return Err(self.err("a set must be written (v1,v2)"));
        }
        let mut values: Vec<String> = Vec::new();
        let mut push = |v: String| {
            if !values.contains(&v) {
                values.push(v);
            }
        };
        // Whether the last token was a value (so the next must be ',' or ')').
        let mut after_value = false;
        loop {
            match self.bump() {
                Tok::Close => {
                    if !after_value {
                        push(String::new());
                    }
                    return Ok(values);
                }
                Tok::Comma => {
                    if !after_value {
                        push(String::new());
                    }
                    after_value = false;
                }
                Tok::Ident(v) if !after_value => {
                    push(self.value(v)?);
                    after_value = true;
                }
                Tok::Ident(_) => return Err(self.err("expected ',' or ')' between values")),
                _ => return Err(self.err("expected a value, ',' or ')'")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        self.peek();
        self.req_start = self.lexer.tok_start;
        if self.peek() == Tok::Not {
            self.bump();
            let key = self.key()?;
            return match self.peek() {
                Tok::End | Tok::Comma => Ok(Requirement::NotExists(key)),
                _ => Err(self.err("'!key' takes no operator")),
            };
        }
        let key = self.key()?;
        if matches!(self.peek(), Tok::End | Tok::Comma) {
            return Ok(Requirement::Exists(key));
        }
        Ok(match self.bump() {
            Tok::Eq | Tok::DoubleEq => Requirement::In(key, self.exact_value()?),
            Tok::NotEq => Requirement::NotIn(key, self.exact_value()?),
            Tok::Gt => Requirement::GreaterThan(key, self.integer()?),
            Tok::Lt => Requirement::LessThan(key, self.integer()?),
            Tok::Ident("in") => Requirement::In(key, self.set()?),
            Tok::Ident("notin") => Requirement::NotIn(key, self.set()?),
            _ => return Err(self.err("expected =, ==, !=, in, notin, > or <")),
        })
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, SelectorError> {
        if s.len() > MAX_SELECTOR_LEN {
            return Err(SelectorError::TooLong { len: s.len() });
        }
        let mut p = Parser {
            lexer: Lexer {
                s,
                pos: 0,
                tok_start: 0,
            },
            peeked: None,
            req_start: 0,
        };
        let mut requirements = Vec::new();
        if p.peek() == Tok::End {
            return Ok(LabelSelector::everything());
        }
        loop {
            requirements.push(p.requirement()?);
            match p.bump() {
                Tok::End => return Ok(LabelSelector { requirements }),
                Tok::Comma if p.peek() != Tok::End => {}
                Tok::Comma => return Err(p.err("expected a requirement after ','")),
                _ => return Err(p.err("expected ',' or the end after a requirement")),
            }
        }
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Requirement::Exists(k) => write!(f, "{k}")?,
                Requirement::NotExists(k) => write!(f, "!{k}")?,
                Requirement::In(k, vs) if vs.len() == 1 => write!(f, "{k}={}", vs[0])?,
                Requirement::NotIn(k, vs) if vs.len() == 1 => write!(f, "{k}!={}", vs[0])?,
                Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(","))?,
                Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(","))?,
                Requirement::GreaterThan(k, n) => write!(f, "{k}>{n}")?,
                Requirement::LessThan(k, n) => write!(f, "{k}<{n}")?,
            }
        }
        Ok(())
    }
}
