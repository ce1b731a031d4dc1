//! Progress on stderr, only when stderr is a terminal (never in pipes, CI
//! logs or tests): a byte counter for reading inputs, and a spinner naming
//! the stage of a multi-stage command with its elapsed time.

use std::io::IsTerminal;
use std::time::Duration;

/// A spinner counting bytes, for reading one input; `None` when stderr is
/// not a terminal.
pub fn bytes(name: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let b = indicatif::ProgressBar::new_spinner();
    b.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {bytes} ({bytes_per_sec})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    b.set_message(name.to_string());
    Some(b)
}

/// The stage a command is in (`reading traces`, `lifting`, ...), shown
/// with a spinner and the time spent so far; cleared when dropped.
pub struct Stages {
    bar: Option<indicatif::ProgressBar>,
}

impl Stages {
    /// Shown only when stderr is a terminal.
    pub fn new(command: &str) -> Self {
        Self::shown(command, std::io::stderr().is_terminal())
    }

    fn shown(command: &str, show: bool) -> Self {
        let bar = show.then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            b.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {prefix}: {msg} [{elapsed}]")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            b.set_prefix(command.to_string());
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
        Stages { bar }
    }

    /// Enters a stage.
    pub fn stage(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
    }

    /// The stage shown now (`None` when hidden).
    #[cfg(test)]
    fn current(&self) -> Option<String> {
        self.bar.as_ref().map(|b| b.message())
    }
}

impl Drop for Stages {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_stages_show_nothing_and_shown_ones_follow_the_stage() {
        let hidden = Stages::shown("predict", false);
        hidden.stage("lifting");
        assert_eq!(hidden.current(), None);
        // drawn to a hidden target here, but kept and followed
        let shown = Stages::shown("predict", true);
        if let Some(b) = &shown.bar {
            b.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        shown.stage("reading traces");
        assert_eq!(shown.current().as_deref(), Some("reading traces"));
        shown.stage("lifting");
        assert_eq!(shown.current().as_deref(), Some("lifting"));
    }
}
