//! Target: URI templates.

use super::*;

/// A part of a generated template.
#[derive(Debug, Clone)]
pub(crate) enum Piece {
    /// Literal text, without braces.
    Text(String),
    /// `{name}`: a simple variable.
    Var(String),
    /// An expression the implementation reads as literal text (operators, empty, nested).
    Expr(&'static str),
}

#[derive(Debug, Clone)]
pub(crate) enum RawPiece {
    Text(String),
    Var(&'static str),
    Expr(&'static str),
}

pub(crate) const VAR_PREFIXES: &[&str] = &["id", "name", "x", "a.b", "_", "Zz9"];
pub(crate) const EXPRESSIONS: &[&str] = &[
    "{+path}", "{#frag}", "{/seg}", "{?a,b}", "{&c}", "{list*}", "{}", "{a-b}", "{a b}", "{a{b}",
    "{{x}}", "{é}", "{x:3}",
];
pub(crate) const RAW_TEMPLATE_CHARS: &[char] = &[
    '{', '}', 'a', 'b', '+', '/', '?', '*', ',', '.', '_', 'é', '😀', '%',
];

#[derive(Debug, Clone)]
pub(crate) struct UriCase {
    pieces: Vec<Piece>,
    /// An unclosed `{…` at the very end.
    tail: Option<String>,
    /// The values of the variables, in order: from an alphabet that shares no character with
    /// the literal parts, never empty, never with `/`.
    values: Vec<String>,
    /// Other values: anything, empty and `/` included.
    loose: Vec<String>,
    /// URIs unrelated to the template.
    wild: Vec<String>,
    /// A brace-heavy template of no particular form.
    raw: String,
}

impl UriCase {
    fn names(&self) -> Vec<&str> {
        self.pieces
            .iter()
            .filter_map(|piece| match piece {
                Piece::Var(name) => Some(name.as_str()),
                Piece::Text(_) | Piece::Expr(_) => None,
            })
            .collect()
    }

    fn template(&self) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Var(name) => {
                    out.push('{');
                    out.push_str(name);
                    out.push('}');
                }
                Piece::Expr(expr) => out.push_str(expr),
            }
        }
        out.push_str(self.tail.as_deref().unwrap_or_default());
        out
    }

    /// The template with each variable replaced by its value in `vars`.
    fn expand(&self, vars: &HashMap<String, String>) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Var(name) => out.push_str(vars.get(name).map_or("", String::as_str)),
                Piece::Expr(expr) => out.push_str(expr),
            }
        }
        out.push_str(self.tail.as_deref().unwrap_or_default());
        out
    }

    fn assign(&self, values: &[String]) -> HashMap<String, String> {
        self.names()
            .into_iter()
            .zip(values)
            .map(|(name, value)| (name.to_owned(), value.clone()))
            .collect()
    }
}

/// Merges adjacent texts and names the variables (distinct names).
pub(crate) fn pieces_of(raw: Vec<RawPiece>) -> Vec<Piece> {
    let mut pieces: Vec<Piece> = Vec::new();
    let mut vars = 0;
    for piece in raw {
        match piece {
            RawPiece::Text(text) => match pieces.last_mut() {
                Some(Piece::Text(previous)) => previous.push_str(&text),
                _ => pieces.push(Piece::Text(text)),
            },
            RawPiece::Var(prefix) => {
                pieces.push(Piece::Var(format!("{prefix}{vars}")));
                vars += 1;
            }
            RawPiece::Expr(expr) => pieces.push(Piece::Expr(expr)),
        }
    }
    pieces
}

pub(crate) fn uri_case() -> impl Strategy<Value = UriCase> {
    let piece = prop_oneof![
        3 => regex("[a-j:/.~?=&#-]{1,6}").prop_map(RawPiece::Text),
        3 => select(VAR_PREFIXES).prop_map(RawPiece::Var),
        1 => select(EXPRESSIONS).prop_map(RawPiece::Expr),
    ];
    let value = prop_oneof![
        3 => regex("[0-9A-Z_%]{1,8}"),
        1 => regex("[éΩ😀0-9]{1,4}"),
    ];
    let wild = prop_oneof![
        3 => regex("[a-j0-9A-Z/{}:.?#=&%-]{0,24}"),
        1 => any::<String>(),
    ];
    let raw = vec(select(RAW_TEMPLATE_CHARS), 0..40).prop_map(String::from_iter);
    (
        vec(piece, 0..7),
        option::weighted(0.15, regex("\\{[a-z]{0,4}")),
        vec(value, 8),
        vec(regex("[a-z0-9/{}%é:.?]{0,6}"), 8),
        vec(wild, 0..4),
        raw,
    )
        .prop_map(|(raw_pieces, tail, values, loose, wild, raw)| UriCase {
            pieces: pieces_of(raw_pieces),
            tail,
            values,
            loose,
            wild,
            raw,
        })
}

/// What a match promises (module docs of `uri_template`): every variable of the template, each
/// one or more characters without `/`, and the template filled with them is the URI.
pub(crate) fn check_match(
    template: &UriTemplate,
    case: &UriCase,
    uri: &str,
) -> Result<(), TestCaseError> {
    let Some(vars) = template.matches(uri) else {
        return Ok(());
    };
    let names: HashSet<&str> = case.names().into_iter().collect();
    let found: HashSet<&str> = vars.keys().map(String::as_str).collect();
    prop_assert_eq!(found, names, "the variables of a match of {:?}", uri);
    for value in vars.values() {
        prop_assert!(
            !value.is_empty() && !value.contains('/'),
            "the value {value:?} in a match of {uri:?}"
        );
    }
    prop_assert_eq!(case.expand(&vars), uri);
    Ok(())
}

pub(crate) fn check_uri_template(case: &UriCase) -> Result<(), TestCaseError> {
    let text = case.template();
    let template = UriTemplate::new(&text);
    prop_assert_eq!(template.as_str(), text.as_str());

    // Filled with values that cannot be mistaken for the literal parts, the template matches
    // and gives them back, unless two variables touch (nothing separates them).
    let assigned = case.assign(&case.values);
    let uri = case.expand(&assigned);
    let adjacent = case
        .pieces
        .windows(2)
        .any(|pair| matches!(pair, [Piece::Var(_), Piece::Var(_)]));
    if !adjacent {
        prop_assert_eq!(template.matches(&uri), Some(assigned), "{:?}", uri);
    }
    check_match(&template, case, &uri)?;
    let loose = case.expand(&case.assign(&case.loose));
    check_match(&template, case, &loose)?;
    check_match(&template, case, &text)?;
    for wild in &case.wild {
        check_match(&template, case, wild)?;
    }

    // Any template: no panic, and a match never holds an empty value or a `/`.
    let raw = UriTemplate::new(&case.raw);
    prop_assert_eq!(raw.as_str(), case.raw.as_str());
    for candidate in case.wild.iter().chain([&case.raw, &uri, &text]) {
        if let Some(vars) = raw.matches(candidate) {
            prop_assert!(
                vars.values().all(|v| !v.is_empty() && !v.contains('/')),
                "{vars:?} from {candidate:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn uri_template() {
    fuzz::run("uri_template", uri_case(), |case| check_uri_template(&case));
}
