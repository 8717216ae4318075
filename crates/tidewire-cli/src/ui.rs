//! What the user sees on stderr while a command runs: progress bars on a terminal, plain
//! progress lines elsewhere (CI, pipes), nothing with `--quiet`; and notes (server logs, the
//! server's stderr) printed above the bar.
//!
//! Text from the server reaches stderr only escaped (see `sanitize.rs`): the progress message
//! here, the notes by their callers, who add styling around the escaped text.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tidewire_client::Progress;

use crate::sanitize;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// indicatif bars and spinners on a terminal.
    Bars,
    /// One plain line per progress report.
    Plain,
    /// Nothing but errors.
    Quiet,
}

/// The stderr side of a command. Cheap to clone (an `Arc` inside).
#[derive(Debug, Clone)]
pub(crate) struct Ui {
    mode: Mode,
    /// The bar on screen, if any, so notes print above it.
    bar: Arc<Mutex<Option<ProgressBar>>>,
}

impl Ui {
    /// Bars when stderr is a terminal, plain lines otherwise, nothing with `quiet`.
    pub(crate) fn new(quiet: bool) -> Self {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Bars
        } else {
            Mode::Plain
        };
        Self {
            mode,
            bar: Arc::default(),
        }
    }

    fn current_bar(&self) -> Option<ProgressBar> {
        self.bar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// True when progress shows as bars on a terminal.
    pub(crate) fn is_interactive(&self) -> bool {
        self.mode == Mode::Bars
    }

    /// Prints a line on stderr, above the bar if one is showing. Always printed.
    pub(crate) fn line(&self, text: &str) {
        match self.current_bar() {
            Some(bar) => bar.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }

    /// Prints a note (a server log, the server's stderr), unless quiet.
    pub(crate) fn note(&self, text: &str) {
        if self.mode != Mode::Quiet {
            self.line(text);
        }
    }

    /// Prints a note dimmed (on a terminal), unless quiet.
    pub(crate) fn dim_note(&self, text: &str) {
        self.note(&dim(text));
    }

    /// Starts showing the progress of one operation, labelled `label` (padded to `width` on a
    /// terminal, so bars one above the other line up).
    pub(crate) fn progress(&self, label: &str, width: usize) -> ProgressView {
        let bar = (self.mode == Mode::Bars).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(spinner_style(false));
            bar.set_prefix(format!("{label:<width$}"));
            bar.set_message("waiting for progress");
            bar.enable_steady_tick(Duration::from_millis(100));
            *self.bar.lock().unwrap_or_else(PoisonError::into_inner) = Some(bar.clone());
            bar
        });
        ProgressView {
            ui: self.clone(),
            bar,
            label: label.to_owned(),
            last: None,
            scale: 1.0,
        }
    }
}

/// `text` dimmed when stderr shows colours.
pub(crate) fn dim(text: &str) -> String {
    console::style(text).for_stderr().dim().to_string()
}

/// `text` in bold when stderr shows colours.
pub(crate) fn bold(text: &str) -> String {
    console::style(text).for_stderr().bold().to_string()
}

/// A spinner, with the progress number once the server has reported one.
fn spinner_style(with_position: bool) -> ProgressStyle {
    let template = if with_position {
        "{spinner:.cyan} {prefix:.bold} {pos} {msg}"
    } else {
        "{spinner:.cyan} {prefix:.bold} {msg}"
    };
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn bar_style(integral: bool) -> ProgressStyle {
    let template = if integral {
        "{spinner:.cyan} {prefix:.bold} [{bar:30.cyan/blue}] {pos}/{len} ETA {eta} {msg}"
    } else {
        "{spinner:.cyan} {prefix:.bold} [{bar:30.cyan/blue}] {percent:>3}% ETA {eta} {msg}"
    };
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// The progress of one operation, as shown.
#[derive(Debug)]
pub(crate) struct ProgressView {
    ui: Ui,
    bar: Option<ProgressBar>,
    label: String,
    last: Option<Progress>,
    /// Bar units per progress unit (1 for whole numbers, more for fractions).
    scale: f64,
}

impl ProgressView {
    /// Shows a progress report. Its message is the server's text: shown on one line, its
    /// control characters escaped.
    pub(crate) fn update(&mut self, progress: &Progress) {
        let message = sanitize::line(progress.message.as_deref().unwrap_or_default());
        if let Some(bar) = &self.bar {
            match progress.total {
                Some(total) if total > 0.0 => {
                    let integral = total.fract() == 0.0 && progress.progress.fract() == 0.0;
                    self.scale = if integral { 1.0 } else { 1000.0 / total };
                    if bar.length().is_none() {
                        bar.set_style(bar_style(integral));
                    }
                    bar.set_length(to_units(total, self.scale));
                    bar.set_position(to_units(progress.progress, self.scale));
                }
                _ => {
                    if self.last.is_none() {
                        bar.set_style(spinner_style(true));
                    }
                    bar.set_position(to_units(progress.progress, 1.0));
                }
            }
            bar.set_message(fit(&message, self.label.chars().count()));
        } else if self.ui.mode == Mode::Plain {
            eprintln!(
                "{}: progress {} {}",
                self.label,
                fraction(progress),
                message
            );
        }
        self.last = Some(progress.clone());
    }

    /// Where the progress stands, like `3/10` or `3`; `None` before any report.
    pub(crate) fn position(&self) -> Option<String> {
        self.last.as_ref().map(fraction)
    }

    /// After Ctrl-C: the terminal echoed `^C` past the end of the bar's full-width line, onto a
    /// line of its own; put the bar back where it was before it is finished.
    pub(crate) fn interrupted(&self) {
        if let Some(bar) = &self.bar {
            bar.suspend(|| eprint!("\x1b[1A\r\x1b[2K"));
        }
    }

    /// Leaves the bar on screen with a closing message.
    pub(crate) fn finish(&mut self, message: &str) {
        if let Some(bar) = self.bar.take() {
            if bar.length().is_some() {
                let style = ProgressStyle::with_template(
                    "  {prefix:.bold} [{bar:30.cyan/blue}] {pos}/{len} {msg}",
                );
                if let Ok(style) = style {
                    bar.set_style(style.progress_chars("=> "));
                }
            }
            bar.abandon_with_message(message.to_owned());
            self.forget();
        }
    }

    /// Removes the bar from the screen.
    pub(crate) fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            self.forget();
        }
    }

    /// One bar shows at a time: once it is gone, notes print plainly again.
    fn forget(&self) {
        *self.ui.bar.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl Drop for ProgressView {
    fn drop(&mut self) {
        self.clear();
    }
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "progress values are small non-negative numbers; out-of-range ones saturate"
)]
fn to_units(value: f64, scale: f64) -> u64 {
    (value * scale).round().max(0.0) as u64
}

/// The message cut to what is left of the terminal's width beside the bar, so the line never
/// wraps (a wrapped bar leaves copies of itself behind when something else writes, like the
/// terminal echoing `^C`).
fn fit(message: &str, label_width: usize) -> String {
    // Spinner, label, `[bar]`, `pos/len`, `ETA 10s` and the spaces between.
    const BESIDE_THE_BAR: usize = 56;
    let width = usize::from(console::Term::stderr().size().1);
    let room = width.saturating_sub(label_width + BESIDE_THE_BAR);
    crate::output::cut(message, room)
}

/// `3/10`, or `3` without a total.
pub(crate) fn fraction(progress: &Progress) -> String {
    match progress.total {
        Some(total) => format!("{}/{}", number(progress.progress), number(total)),
        None => number(progress.progress),
    }
}

/// A progress number without a needless `.0`.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_read_naturally() {
        let mut p = Progress::new(3.0);
        assert_eq!(fraction(&p), "3");
        p.total = Some(10.0);
        assert_eq!(fraction(&p), "3/10");
        p.progress = 0.5;
        p.total = Some(1.0);
        assert_eq!(fraction(&p), "0.5/1");
    }
}
