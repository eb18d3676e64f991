//! [`LabelSelector`]: Kubernetes label selector strings (`apimachinery/pkg/labels/selector.go`,
//! `Parse`), matched against an object's labels.

use std::collections::BTreeMap;
use std::fmt;

/// Longest selector string accepted, bytes (selectors come from configuration, but a bound
/// keeps a bad one from costing much).
pub const MAX_SELECTOR_LEN: usize = 64 * 1024;

/// A parsed label selector: requirements joined by `,`, all of which must hold.
///
/// Grammar (as `labels.Parse`): `key`, `!key`, `key=value`, `key==value`, `key!=value`,
/// `key in (v1,v2)`, `key notin (v1,v2)`; the empty string selects everything. As upstream,
/// `key!=value` and `notin` also match objects without the key.
///
/// # Examples
/// ```
/// use std::collections::BTreeMap;
/// use informer::informer::LabelSelector;
///
/// let sel: LabelSelector = "app=web,tier in (front,edge),!legacy".parse().unwrap();
/// let labels = BTreeMap::from([("app".to_owned(), "web".to_owned()), ("tier".to_owned(), "edge".to_owned())]);
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
    /// A requirement that does not follow the grammar.
    #[error("invalid label selector requirement {requirement:?}: {reason}")]
    Invalid {
        /// The offending requirement.
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
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

fn invalid(requirement: &str, reason: &'static str) -> SelectorError {
    SelectorError::Invalid {
        requirement: requirement.to_owned(),
        reason,
    }
}

fn check_token(tok: &str, whole: &str, what: &'static str) -> Result<String, SelectorError> {
    let ok = (!tok.is_empty() || what == "bad value")
        && tok
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if !ok {
        return Err(invalid(whole, what));
    }
    Ok(tok.to_owned())
}

/// Splits at commas outside parentheses.
fn split_requirements(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, SelectorError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| invalid(whole, "a set must be written (v1,v2)"))?;
    inner
        .split(',')
        .map(|v| check_token(v.trim(), whole, "bad value in set"))
        .collect()
}

fn parse_requirement(req: &str) -> Result<Requirement, SelectorError> {
    let r = req.trim();
    if r.is_empty() {
        return Err(invalid(req, "empty requirement"));
    }
    let key_value =
        |op: &str| -> Option<(&str, &str)> { r.split_once(op).map(|(k, v)| (k.trim(), v.trim())) };
    if let Some((k, v)) = key_value("!=") {
        let key = check_token(k, req, "bad key")?;
        return Ok(Requirement::NotIn(
            key,
            vec![check_token(v, req, "bad value")?],
        ));
    }
    if let Some((k, v)) = key_value("==").or_else(|| key_value("=")) {
        let key = check_token(k, req, "bad key")?;
        return Ok(Requirement::In(
            key,
            vec![check_token(v, req, "bad value")?],
        ));
    }
    if let Some(k) = r.strip_prefix('!') {
        return Ok(Requirement::NotExists(check_token(
            k.trim(),
            req,
            "bad key",
        )?));
    }
    let mut words = r.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    let rest = words.next().unwrap_or_default().trim_start();
    if rest.is_empty() {
        return Ok(Requirement::Exists(check_token(key, req, "bad key")?));
    }
    let key = check_token(key, req, "bad key")?;
    if let Some(set) = rest.strip_prefix("notin") {
        Ok(Requirement::NotIn(key, parse_set(set, req)?))
    } else if let Some(set) = rest.strip_prefix("in") {
        Ok(Requirement::In(key, parse_set(set, req)?))
    } else {
        Err(invalid(req, "expected =, ==, !=, in or notin"))
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, SelectorError> {
        if s.len() > MAX_SELECTOR_LEN {
            return Err(SelectorError::TooLong { len: s.len() });
        }
        if s.trim().is_empty() {
            return Ok(LabelSelector::everything());
        }
        let requirements = split_requirements(s)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<_, _>>()?;
        Ok(LabelSelector { requirements })
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
            }
        }
        Ok(())
    }
}
