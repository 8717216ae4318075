//! The YAML frontmatter of a `SKILL.md`, as the JSON object the extension carries.
//!
//! A `SKILL.md` starts with a line `---`, then YAML, then a line `---` (trailing spaces or tabs
//! allowed, CRLF too, and one leading byte-order mark). The YAML must be one mapping; its
//! scalars follow YAML 1.2's core schema (`yes` and `2024-01-01` stay strings, `010` is 10,
//! `~` is null), quoted and block scalars are strings. Anchors, aliases and tags outside the
//! core schema are refused: an alias can make a small text expand without bound, and a custom
//! tag has no JSON form. So are values JSON cannot hold (`.inf`, `.nan`), keys that are not
//! scalars, duplicate keys, nesting deeper than 32 levels and more than
//! [`MAX_FRONTMATTER_BYTES`] of YAML.

use serde_json::{Map, Number, Value};
use tidewire_core::schema::JsonObject;
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

use crate::limits::MAX_FRONTMATTER_BYTES;

/// Nesting deeper than this is refused.
const MAX_DEPTH: usize = 32;

/// The frontmatter of a `SKILL.md` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FrontmatterError(String);

impl FrontmatterError {
    fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }
}

/// A `SKILL.md` split at its frontmatter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split<'a> {
    /// The YAML between the two `---` lines.
    pub yaml: &'a str,
    /// Everything after the closing `---` line: the instructions.
    pub body: &'a str,
}

/// Splits a `SKILL.md` into its frontmatter and its body.
///
/// # Errors
/// When the text does not start with a `---` line, or no closing `---` line follows.
pub fn split(text: &str) -> Result<Split<'_>, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let after_open = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| FrontmatterError::new("a SKILL.md must start with a `---` line"))?;
    let mut offset = 0;
    for line in after_open.split_inclusive('\n') {
        let bare = line.trim_end_matches('\n').trim_end_matches('\r');
        if bare.trim_end_matches([' ', '\t']) == "---" {
            let yaml = after_open[..offset]
                .strip_suffix('\n')
                .map(|y| y.strip_suffix('\r').unwrap_or(y))
                .unwrap_or(&after_open[..offset]);
            return Ok(Split {
                yaml,
                body: &after_open[offset + line.len()..],
            });
        }
        offset += line.len();
    }
    Err(FrontmatterError::new(
        "the frontmatter has no closing `---` line",
    ))
}

/// The frontmatter of the `SKILL.md` `text`, as a JSON object.
///
/// # Errors
/// When [`split`] fails, or the YAML is not a mapping this module can carry as JSON (see the
/// module docs).
pub fn parse(text: &str) -> Result<JsonObject, FrontmatterError> {
    parse_yaml(split(text)?.yaml)
}

/// The YAML of a frontmatter block (without its `---` lines), as a JSON object.
///
/// # Errors
/// As [`parse`].
pub fn parse_yaml(yaml: &str) -> Result<JsonObject, FrontmatterError> {
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(FrontmatterError::new(format!(
            "the frontmatter is longer than {MAX_FRONTMATTER_BYTES} bytes"
        )));
    }
    let mut parser = Parser::new_from_str(yaml);
    let mut builder = Builder::default();
    loop {
        let (event, mark) = parser.next_token().map_err(|e| {
            FrontmatterError::new(format!("the frontmatter is not valid YAML: {e}"))
        })?;
        let at = |reason: String| FrontmatterError::new(format!("line {}: {reason}", mark.line()));
        match builder.take(event).map_err(at)? {
            Step::More => {}
            Step::Done(value) => return into_object(value),
        }
    }
}

fn into_object(value: Option<Value>) -> Result<JsonObject, FrontmatterError> {
    match value {
        Some(Value::Object(map)) => Ok(map),
        None | Some(Value::Null) => Err(FrontmatterError::new("the frontmatter is empty")),
        Some(_) => Err(FrontmatterError::new(
            "the frontmatter must be a mapping of keys to values",
        )),
    }
}

enum Step {
    More,
    Done(Option<Value>),
}

/// An open collection while the events come in.
enum Frame {
    Seq(Vec<Value>),
    /// A mapping, and the key waiting for its value.
    Map(Map<String, Value>, Option<String>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Value>,
    documents: usize,
}

impl Builder {
    fn take(&mut self, event: Event) -> Result<Step, String> {
        match event {
            Event::StreamStart | Event::Nothing | Event::DocumentEnd => {}
            Event::DocumentStart => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err("the frontmatter holds more than one YAML document".to_owned());
                }
            }
            Event::StreamEnd => return Ok(Step::Done(self.root.take())),
            Event::Alias(_) => {
                return Err("aliases (`*name`) are not supported in frontmatter".to_owned());
            }
            Event::Scalar(text, style, anchor, tag) => {
                no_anchor(anchor)?;
                if let Some(Frame::Map(_, key @ None)) = self.stack.last_mut() {
                    // A scalar where a key is due: keys are strings in JSON.
                    *key = Some(text);
                    return Ok(Step::More);
                }
                let value = scalar(text, style, tag.as_ref())?;
                self.insert(value)?;
            }
            Event::SequenceStart(anchor, tag) => {
                no_anchor(anchor)?;
                collection_tag(tag.as_ref(), "seq")?;
                self.open(Frame::Seq(Vec::new()))?;
            }
            Event::MappingStart(anchor, tag) => {
                no_anchor(anchor)?;
                collection_tag(tag.as_ref(), "map")?;
                self.open(Frame::Map(Map::new(), None))?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let value = match self.stack.pop() {
                    Some(Frame::Seq(items)) => Value::Array(items),
                    Some(Frame::Map(map, None)) => Value::Object(map),
                    Some(Frame::Map(_, Some(key))) => {
                        return Err(format!("the key {key:?} has no value"));
                    }
                    None => return Err("a collection ends that never began".to_owned()),
                };
                self.insert(value)?;
            }
        }
        Ok(Step::More)
    }

    fn open(&mut self, frame: Frame) -> Result<(), String> {
        if let Some(Frame::Map(_, None)) = self.stack.last() {
            return Err("keys must be scalars, not sequences or mappings".to_owned());
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(format!(
                "the frontmatter nests deeper than {MAX_DEPTH} levels"
            ));
        }
        self.stack.push(frame);
        Ok(())
    }

    fn insert(&mut self, value: Value) -> Result<(), String> {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq(items)) => items.push(value),
            Some(Frame::Map(map, key)) => {
                let key = key
                    .take()
                    .ok_or_else(|| "keys must be scalars, not sequences or mappings".to_owned())?;
                if map.contains_key(&key) {
                    return Err(format!("the key {key:?} appears twice"));
                }
                map.insert(key, value);
            }
        }
        Ok(())
    }
}

fn no_anchor(anchor: usize) -> Result<(), String> {
    if anchor == 0 {
        Ok(())
    } else {
        Err("anchors (`&name`) are not supported in frontmatter".to_owned())
    }
}

/// The YAML core schema's tag namespace.
const CORE: &str = "tag:yaml.org,2002:";

fn collection_tag(tag: Option<&Tag>, expected: &str) -> Result<(), String> {
    match tag {
        None => Ok(()),
        Some(tag) if tag.handle == CORE && tag.suffix == expected => Ok(()),
        Some(tag) => Err(format!("the tag {} is not supported", show(tag))),
    }
}

fn show(tag: &Tag) -> String {
    format!("!<{}{}>", tag.handle, tag.suffix)
}

/// A scalar's JSON value: quoted and block scalars are strings; a plain one is resolved by the
/// core schema; an explicit core tag is honoured.
fn scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let kind = match tag {
        None if style != TScalarStyle::Plain => return Ok(Value::String(text)),
        None => None,
        Some(tag) if tag.handle == CORE => Some(tag.suffix.as_str()),
        // A local tag such as `!thing` has no JSON form.
        Some(tag) => return Err(format!("the tag {} is not supported", show(tag))),
    };
    let bad = |what: &str| format!("{text:?} is not a valid {what}");
    match kind {
        Some("str") => Ok(Value::String(text)),
        Some("null") => match text.as_str() {
            "" | "~" | "null" | "Null" | "NULL" => Ok(Value::Null),
            _ => Err(bad("null")),
        },
        Some("bool") => boolean(&text)
            .map(Value::Bool)
            .ok_or_else(|| bad("boolean")),
        Some("int") => integer(&text)
            .map(Value::from)
            .ok_or_else(|| bad("integer")),
        Some("float") => float(&text)?.ok_or_else(|| bad("float")),
        Some(other) => Err(format!("the tag !!{other} is not supported")),
        None => plain(text),
    }
}

/// A plain scalar by the core schema: null, a boolean, an integer, a float, or else a string.
fn plain(text: String) -> Result<Value, String> {
    if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL") {
        return Ok(Value::Null);
    }
    if let Some(b) = boolean(&text) {
        return Ok(Value::Bool(b));
    }
    if let Some(i) = integer(&text) {
        return Ok(Value::from(i));
    }
    if let Some(number) = float(&text)? {
        return Ok(number);
    }
    Ok(Value::String(text))
}

fn boolean(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// Core-schema integers: decimal with an optional sign, `0o` octal, `0x` hex.
fn integer(text: &str) -> Option<i64> {
    if let Some(hex) = text.strip_prefix("0x") {
        return hex_or_octal(hex, 16);
    }
    if let Some(octal) = text.strip_prefix("0o") {
        return hex_or_octal(octal, 8);
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok()
}

fn hex_or_octal(digits: &str, radix: u32) -> Option<i64> {
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    i64::from_str_radix(digits, radix).ok()
}

/// Core-schema floats; infinities and NaN are refused, since JSON has no form for them.
fn float(text: &str) -> Result<Option<Value>, String> {
    let lower = text.to_ascii_lowercase();
    if matches!(lower.as_str(), ".inf" | "+.inf" | "-.inf" | ".nan") {
        return Err(format!("{text:?} has no JSON form"));
    }
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let looks_numeric = body.bytes().any(|b| b.is_ascii_digit())
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && body.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if !looks_numeric {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(Number::from_f64(f).map(Value::Number)),
        Ok(_) => Err(format!("{text:?} has no JSON form")),
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn yaml(text: &str) -> Result<Value, FrontmatterError> {
        parse_yaml(text).map(Value::Object)
    }

    #[test]
    fn splits_at_the_two_marker_lines_with_crlf_bom_and_trailing_blanks() {
        let s = split("---\nname: a\n---\n\nbody\n").expect("split");
        assert_eq!((s.yaml, s.body), ("name: a", "\nbody\n"));
        let s = split("\u{feff}---\r\nname: a\r\n--- \t\r\nbody").expect("split");
        assert_eq!((s.yaml, s.body), ("name: a", "body"));
        let s = split("---\nname: a\n---").expect("split at the end");
        assert_eq!((s.yaml, s.body), ("name: a", ""));
        assert!(split("name: a\n---\n").is_err());
        assert!(split("---\nname: a\n").is_err());
        // `----` and `--- x` do not close the block.
        assert!(split("---\nname: a\n----\n--- x\n").is_err());
    }

    #[test]
    fn scalars_follow_the_yaml_1_2_core_schema() {
        let got = yaml(
            "a: yes\nb: 2024-01-01\nc: 010\nd: 0x1F\ne: 1.5\nf: ~\ng:\nh: true\ni: \"true\"\n\
             j: 'it''s'\nk: |\n  line\nl: -7\nm: 0o17\nn: 1e3\no: !!str 12\np: +3\n",
        )
        .expect("yaml");
        assert_eq!(
            got,
            json!({"a": "yes", "b": "2024-01-01", "c": 10, "d": 31, "e": 1.5, "f": null,
                   "g": null, "h": true, "i": "true", "j": "it's", "k": "line\n", "l": -7,
                   "m": 15, "n": 1000.0, "o": "12", "p": 3})
        );
    }

    #[test]
    fn nested_maps_and_lists_keep_their_shape() {
        let got = parse("---\nname: pdf\nmetadata:\n  version: \"2.1.0\"\n  tags: [a, b]\n---\n")
            .expect("frontmatter");
        assert_eq!(
            Value::Object(got),
            json!({"name": "pdf", "metadata": {"version": "2.1.0", "tags": ["a", "b"]}})
        );
    }

    #[test]
    fn what_json_cannot_carry_or_could_blow_up_is_refused() {
        for (text, why) in [
            ("a: &x [1]\nb: *x\n", "anchors"),
            ("a: *x\n", "YAML"),
            ("a: .inf\n", "JSON form"),
            ("a: !thing x\n", "tag"),
            ("? [a]\n: b\n", "scalars"),
            ("a: 1\na: 2\n", "twice"),
            ("- a\n- b\n", "mapping"),
            ("", "empty"),
            ("a: [", "YAML"),
        ] {
            let error = yaml(text).expect_err(text).to_string();
            assert!(error.contains(why), "{text:?}: {error}");
        }
        let deep = format!("a: {}{}", "[".repeat(40), "]".repeat(40));
        assert!(
            yaml(&deep)
                .expect_err("deep")
                .to_string()
                .contains("deeper")
        );
        let long = format!("a: \"{}\"", "x".repeat(MAX_FRONTMATTER_BYTES));
        assert!(
            yaml(&long)
                .expect_err("long")
                .to_string()
                .contains("longer")
        );
    }
}
