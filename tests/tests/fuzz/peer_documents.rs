//! Targets: the other texts a peer writes that tidewire parses: `WWW-Authenticate` challenges,
//! protected-resource metadata, `SKILL.md` frontmatter, and the duplicate-member check every
//! JSON-RPC message passes.

use tidewire::auth::{Challenge, ProtectedResourceMetadata, parse_challenges};
use tidewire_core::jsonrpc::value_from_slice;
use tidewire_server::skill::frontmatter;

use super::*;

/// Pieces a `WWW-Authenticate` value is made of, well-formed or not.
const CHALLENGE_PIECES: &[&str] = &[
    "Bearer",
    "Basic",
    "DPoP",
    " ",
    ", ",
    ",",
    "=",
    "\"",
    "\\",
    "realm=\"x\"",
    "error=",
    "scope=\"a b\"",
    "resource_metadata=\"http://h/.well-known/x\"",
    "abc123==",
    "é",
    "\t",
    "\"\\\"",
];

/// A JSON value of bounded depth, objects with members named twice or not.
fn json_text() -> BoxedStrategy<(String, bool)> {
    let leaf = prop_oneof![
        Just(("1".to_owned(), false)),
        Just(("\"s\"".to_owned(), false)),
        Just(("null".to_owned(), false)),
        Just(("[true,-2.5e3]".to_owned(), false)),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(|items| {
                let dup = items.iter().any(|(_, d)| *d);
                let body: Vec<String> = items.into_iter().map(|(t, _)| t).collect();
                (format!("[{}]", body.join(",")), dup)
            }),
            (vec(("[a-c]{1,2}", inner), 0..5)).prop_map(|members| {
                let mut names = HashSet::new();
                let mut dup = false;
                let body: Vec<String> = members
                    .into_iter()
                    .map(|(name, (text, inner_dup))| {
                        dup |= inner_dup || !names.insert(name.clone());
                        format!("{}:{text}", json!(name))
                    })
                    .collect();
                (format!("{{{}}}", body.join(",")), dup)
            }),
        ]
    })
    .boxed()
}

#[derive(Debug, Clone)]
pub(crate) struct DocumentCase {
    challenge: Vec<&'static str>,
    raw: String,
    json: (String, bool),
    frontmatter: String,
}

fn document_case() -> impl Strategy<Value = DocumentCase> {
    (
        vec(select(CHALLENGE_PIECES), 0..12),
        any::<String>(),
        json_text(),
        regex("(---\\n)?([a-z]{0,6}: ?(\"[^\"]{0,6}\"|[a-z0-9 ]{0,6}|\\[[a-z, ]{0,8}\\]|\\{[a-z: ,]{0,8}\\}|&a|\\*a|!!str|\\|)\\n){0,5}(---\\n)?[^\\x00]{0,20}"),
    )
        .prop_map(|(challenge, raw, json, frontmatter)| DocumentCase {
            challenge,
            raw,
            json,
            frontmatter,
        })
}

fn check_documents(case: &DocumentCase) -> Result<(), TestCaseError> {
    // Challenges: anything parses without a panic, and what tidewire writes reads back.
    let header = case.challenge.concat();
    for text in [header.as_str(), case.raw.as_str()] {
        for challenge in parse_challenges(text) {
            let again = parse_challenges(&challenge.to_string());
            prop_assert_eq!(again.len(), 1, "{} from {:?}", challenge, text);
        }
    }
    let written = Challenge::bearer()
        .with("error", case.raw.clone())
        .with("scope", header.clone());
    let read = parse_challenges(&written.to_string());
    prop_assert_eq!(read.len(), 1);
    let kept = |value: &str| {
        value
            .chars()
            .filter(|c| !c.is_control())
            .collect::<String>()
    };
    let (error, scope) = (kept(&case.raw), kept(&header));
    prop_assert_eq!(read[0].param("error"), Some(error.as_str()));
    prop_assert_eq!(read[0].param("scope"), Some(scope.as_str()));

    // Duplicate members: refused exactly when an object names one twice, and otherwise read
    // as serde_json reads it.
    let (text, duplicated) = &case.json;
    match value_from_slice(text.as_bytes()) {
        Ok(strict) => {
            prop_assert!(!duplicated, "a duplicate was let through: {}", text);
            let plain: Value =
                serde_json::from_slice(text.as_bytes()).map_err(|e| fail(e.to_string()))?;
            prop_assert_eq!(strict, plain);
        }
        Err(error) => {
            prop_assert!(*duplicated, "{} refused: {}", text, error);
            prop_assert!(error.to_string().contains("appears twice"), "{}", error);
        }
    }
    let _ = value_from_slice(case.raw.as_bytes());

    // Metadata documents and frontmatter: any text is read or refused, never a panic.
    for text in [text.as_str(), case.raw.as_str()] {
        let _ = serde_json::from_str::<ProtectedResourceMetadata>(text);
    }
    let _ = frontmatter::parse(&case.frontmatter);
    let _ = frontmatter::parse(&case.raw);
    let _ = frontmatter::parse_yaml(&case.frontmatter);
    Ok(())
}

#[test]
fn peer_documents() {
    fuzz::run("peer_documents", document_case(), |case| {
        check_documents(&case)
    });
}
