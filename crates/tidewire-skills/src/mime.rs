//! The MIME type of a skill file, from its name (and, failing that, whether it is text).

/// The MIME type of the file named `name` with contents `bytes`.
pub(crate) fn guess(name: &str, bytes: &[u8]) -> &'static str {
    let extension = name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    let known = match extension.as_str() {
        "md" | "markdown" => Some("text/markdown"),
        "txt" => Some("text/plain"),
        "json" => Some("application/json"),
        "yaml" | "yml" => Some("application/yaml"),
        "toml" => Some("application/toml"),
        "csv" => Some("text/csv"),
        "html" | "htm" => Some("text/html"),
        "css" => Some("text/css"),
        "xml" => Some("application/xml"),
        "js" | "mjs" => Some("text/javascript"),
        "ts" => Some("text/x-typescript"),
        "py" => Some("text/x-python"),
        "rs" => Some("text/x-rust"),
        "sh" => Some("application/x-sh"),
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "svg" => Some("image/svg+xml"),
        "pdf" => Some("application/pdf"),
        _ => None,
    };
    known.unwrap_or(if std::str::from_utf8(bytes).is_ok() {
        "text/plain"
    } else {
        "application/octet-stream"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_decide_and_text_is_the_fallback() {
        assert_eq!(guess("SKILL.md", b""), "text/markdown");
        assert_eq!(guess("run.PY", b""), "text/x-python");
        assert_eq!(guess("notes", b"plain words"), "text/plain");
        assert_eq!(
            guess("blob", &[0xff, 0xfe, 0x00]),
            "application/octet-stream"
        );
    }
}
