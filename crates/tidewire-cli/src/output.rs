//! Printing results on stdout: text plainly, structured content as pretty JSON, binary content
//! saved to files (their paths printed, see `save.rs`), or the raw JSON with `--json`.
//!
//! The server's text goes through [`text`] and [`one_line`]: on a terminal its control
//! characters are shown as escapes (see `sanitize.rs`) unless `--raw` was given; into a pipe or
//! a file it goes as it came.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;
use tidewire_client::schema::{CallToolResult, ContentBlock, ResourceContents};

pub(crate) use crate::save::Saver;

use crate::error::{CliError, Outcome};
use crate::sanitize;

/// Whether the server's text is escaped on stdout; decided once, by [`init`].
static ESCAPE: OnceLock<bool> = OnceLock::new();

/// Decides how the server's text reaches stdout: escaped when stdout is a terminal, unless
/// `raw`. Called once, before anything is printed.
pub(crate) fn init(raw: bool) {
    let _ = ESCAPE.set(!raw && std::io::stdout().is_terminal());
}

fn escapes() -> bool {
    *ESCAPE.get_or_init(|| std::io::stdout().is_terminal())
}

/// Writes `text` and a newline on stdout. A closed stdout (`| head`) is not an error.
pub(crate) fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
}

/// Writes `block` (already laid out, newlines included) on stdout. A closed stdout is not an
/// error (`print!` would panic).
pub(crate) fn block(block: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(block.as_bytes());
    let _ = stdout.flush();
}

/// Writes the server's text, which may span lines, on stdout (see the module's note).
pub(crate) fn text(text: &str) {
    if escapes() {
        out(&sanitize::text(text));
    } else {
        out(text);
    }
}

/// A piece of the server's text for one line of stdout: a table cell, a URI, a MIME type (see
/// the module's note).
pub(crate) fn one_line(text: &str) -> Cow<'_, str> {
    if escapes() {
        sanitize::line(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// Prints a value as pretty JSON.
pub(crate) fn json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::new(format!("cannot write the result as JSON: {e}")))?;
    if escapes() {
        out(&sanitize::json(&text));
    } else {
        out(&text);
    }
    Ok(())
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
            ContentBlock::Text(block) => {
                let repeats = structured.is_some_and(|s| {
                    serde_json::from_str::<Value>(&block.text).is_ok_and(|v| &v == s)
                });
                if !repeats {
                    text(&block.text);
                }
            }
            ContentBlock::Image(image) => {
                let path = saver.save(&image.data, Some(&image.mime_type))?;
                out(&format!(
                    "[image {} saved to {}]",
                    one_line(&image.mime_type),
                    path.display()
                ));
            }
            ContentBlock::Audio(audio) => {
                let path = saver.save(&audio.data, Some(&audio.mime_type))?;
                out(&format!(
                    "[audio {} saved to {}]",
                    one_line(&audio.mime_type),
                    path.display()
                ));
            }
            ContentBlock::ResourceLink(link) => {
                out(&format!(
                    "[link {} ({})]",
                    one_line(&link.uri),
                    one_line(&link.name)
                ));
            }
            ContentBlock::Resource(embedded) => resource(&embedded.resource, saver)?,
            other @ ContentBlock::Unknown(_) => out(&format!(
                "[content of a kind this version does not know: {}]",
                one_line(&serde_json::to_string(other).unwrap_or_default())
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
        ResourceContents::Text(contents) => text(&contents.text),
        ResourceContents::Blob(blob) => {
            let path = saver.save(&blob.blob, blob.mime_type.as_deref())?;
            out(&format!(
                "[{} {} saved to {}]",
                one_line(&blob.uri),
                one_line(blob.mime_type.as_deref().unwrap_or("binary")),
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

/// Prints a tool's result (its content, or `--json`: the whole result) and says how the call
/// went: a tool error is printed all the same, and exits 1.
pub(crate) fn tool_result(
    result: &CallToolResult,
    as_json: bool,
    save_dir: Option<PathBuf>,
    tool: &str,
) -> Result<Outcome, CliError> {
    if as_json {
        json(result)?;
    } else {
        let saver = Saver::new(save_dir, tool);
        content(&result.content, result.structured_content.as_ref(), &saver)?;
    }
    if result.is_error() {
        eprintln!("tidewire: the tool `{tool}` reported an error");
        Ok(Outcome::ToolError)
    } else {
        Ok(Outcome::Success)
    }
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
}
