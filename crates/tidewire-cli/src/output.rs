//! Printing results on stdout: text plainly, structured content as pretty JSON, binary content
//! saved to files (their paths printed), or the raw JSON with `--json`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use base64::Engine as _;
use serde_json::Value;
use tidewire_client::schema::{ContentBlock, ResourceContents};

use crate::error::CliError;

/// Writes `text` and a newline on stdout. A closed stdout (`| head`) is not an error.
pub(crate) fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
}

/// Prints a value as pretty JSON.
pub(crate) fn json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::new(format!("cannot write the result as JSON: {e}")))?;
    out(&text);
    Ok(())
}

/// Where binary content goes.
#[derive(Debug)]
pub(crate) struct Saver {
    dir: PathBuf,
    stem: String,
}

static SAVED: AtomicU32 = AtomicU32::new(0);

impl Saver {
    /// Saves into `dir`, naming files after `stem`.
    pub(crate) fn new(dir: Option<PathBuf>, stem: &str) -> Self {
        let stem = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Self {
            dir: dir.unwrap_or_else(std::env::temp_dir),
            stem,
        }
    }

    /// Decodes base64 `data` and writes it to a new file; returns its path.
    pub(crate) fn save(&self, data: &str, mime: Option<&str>) -> Result<PathBuf, CliError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| {
                CliError::new(format!(
                    "the server sent binary content that is not base64: {e}"
                ))
            })?;
        let n = SAVED.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!(
            "tidewire-{}-{}-{n}.{}",
            self.stem,
            std::process::id(),
            extension(mime.unwrap_or_default())
        );
        let path = self.dir.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| CliError::new(format!("cannot save {}: {e}", path.display())))?;
        Ok(path)
    }
}

/// A file extension for a MIME type.
fn extension(mime: &str) -> &'static str {
    let base = mime.split(';').next().unwrap_or_default().trim();
    match base {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "audio/flac" => "flac",
        "application/pdf" => "pdf",
        "application/json" => "json",
        _ if base.starts_with("text/") => "txt",
        _ => "bin",
    }
}

/// Prints content blocks; `structured` is printed as pretty JSON, and a text block that only
/// repeats it is left out.
pub(crate) fn content(
    blocks: &[ContentBlock],
    structured: Option<&Value>,
    saver: &Saver,
) -> Result<(), CliError> {
    for block in blocks {
        match block {
            ContentBlock::Text(text) => {
                let repeats = structured.is_some_and(|s| {
                    serde_json::from_str::<Value>(&text.text).is_ok_and(|v| &v == s)
                });
                if !repeats {
                    out(&text.text);
                }
            }
            ContentBlock::Image(image) => {
                let path = saver.save(&image.data, Some(&image.mime_type))?;
                out(&format!(
                    "[image {} saved to {}]",
                    image.mime_type,
                    path.display()
                ));
            }
            ContentBlock::Audio(audio) => {
                let path = saver.save(&audio.data, Some(&audio.mime_type))?;
                out(&format!(
                    "[audio {} saved to {}]",
                    audio.mime_type,
                    path.display()
                ));
            }
            ContentBlock::ResourceLink(link) => {
                out(&format!("[link {} ({})]", link.uri, link.name));
            }
            ContentBlock::Resource(embedded) => resource(&embedded.resource, saver)?,
            other @ ContentBlock::Unknown(_) => out(&format!(
                "[content of a kind this version does not know: {}]",
                serde_json::to_string(other).unwrap_or_default()
            )),
        }
    }
    if let Some(structured) = structured {
        json(structured)?;
    }
    Ok(())
}

/// Prints the contents of a resource: text plainly, binary saved to a file.
pub(crate) fn resource(contents: &ResourceContents, saver: &Saver) -> Result<(), CliError> {
    match contents {
        ResourceContents::Text(text) => out(&text.text),
        ResourceContents::Blob(blob) => {
            let path = saver.save(&blob.blob, blob.mime_type.as_deref())?;
            out(&format!(
                "[{} {} saved to {}]",
                blob.uri,
                blob.mime_type.as_deref().unwrap_or("binary"),
                path.display()
            ));
        }
    }
    Ok(())
}

/// A plain-text table: a header row, then rows, columns padded to their widest cell. The last
/// column is cut to fit `width` characters when the output is a terminal.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>], width: Option<usize>) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let render = |cells: Vec<String>, text: &mut String| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        let line = line.trim_end();
        text.push_str(&match width {
            Some(w) if line.chars().count() > w => cut(line, w),
            _ => line.to_owned(),
        });
        text.push('\n');
    };
    render(header.iter().map(|h| (*h).to_owned()).collect(), &mut text);
    for row in rows {
        render(row.clone(), &mut text);
    }
    text
}

/// `text` cut to `width` characters, with `…` when cut.
pub(crate) fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The first line of a description, without its trailing space.
pub(crate) fn first_line(text: Option<&str>) -> String {
    text.unwrap_or_default()
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The width of stdout when it is a terminal.
pub(crate) fn terminal_width() -> Option<usize> {
    let term = console::Term::stdout();
    term.is_term().then(|| usize::from(term.size().1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_line_up_and_cut_to_width() {
        let rows = vec![
            vec!["echo".to_owned(), "Echoes text".to_owned()],
            vec!["crawl".to_owned(), "Crawls URLs slowly".to_owned()],
        ];
        let text = table(&["NAME", "DESCRIPTION"], &rows, None);
        assert_eq!(
            text,
            "NAME   DESCRIPTION\necho   Echoes text\ncrawl  Crawls URLs slowly\n"
        );
        let text = table(&["NAME", "DESCRIPTION"], &rows, Some(12));
        assert!(text.lines().all(|l| l.chars().count() <= 12), "{text}");
        assert!(text.contains("crawl  Craw…"), "{text}");
    }

    #[test]
    fn extensions_follow_the_mime_type() {
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("audio/wav"), "wav");
        assert_eq!(extension("text/plain; charset=utf-8"), "txt");
        assert_eq!(extension(""), "bin");
    }
}
