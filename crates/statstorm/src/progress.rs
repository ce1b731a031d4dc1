//! Progress on stderr: when stderr is a terminal (never in pipes, CI logs
//! or tests unless asked), a byte counter for reading inputs and a spinner
//! naming the stage of a multi-stage command with its elapsed time; when
//! asked (`--progress`) with stderr not a terminal, a periodic one-line
//! status instead ([`Watch`]); and, whatever stderr is, a warning when an
//! input that is a pipe or a device gives no new event for a long time
//! (the stall guard of [`Watch`]).

use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a command reading an input publishes for its [`Watch`].
pub use statstorm_trace::input::Counters;

/// SECONDS of a flag as a duration: `None` for 0, a negative number or
/// one that is not finite.
pub fn secs(s: f64) -> Option<std::time::Duration> {
    (s.is_finite() && s > 0.0).then(|| std::time::Duration::from_secs_f64(s.min(1e9)))
}

/// Whether `path` (`-`: stdin) is a pipe, a device, a socket or a
/// terminal rather than a regular file: an input that may never end.
pub fn is_stream(path: &std::path::Path) -> bool {
    let meta = if path.as_os_str() == "-" {
        use std::os::fd::AsFd;
        std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .and_then(|fd| std::fs::File::from(fd).metadata())
    } else {
        std::fs::metadata(path)
    };
    meta.map(|m| !m.is_file()).unwrap_or(false)
}

/// When a [`Watch`] speaks.
#[derive(Clone, Copy, Debug, Default)]
pub struct WatchOptions {
    /// A status line this often (`--progress` with stderr not a terminal).
    pub status_every: Option<Duration>,
    /// Warn once when no new event came for this long (the input is a
    /// pipe or a device, which may never end).
    pub stall_after: Option<Duration>,
}

/// A thread that watches the [`Counters`] of one input being read and
/// writes to stderr: status lines and the stall warning of
/// [`WatchOptions`]. Stopped (and joined) when dropped.
pub struct Watch {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    /// `None` when `opts` asks for nothing. `total`: the input's size,
    /// when known. Lines go through `bar` when there is one (so it is
    /// redrawn below them), else straight to stderr.
    pub fn start(
        name: &str,
        total: Option<u64>,
        counters: Arc<Counters>,
        opts: WatchOptions,
        bar: Option<indicatif::ProgressBar>,
    ) -> Option<Watch> {
        if opts.status_every.is_none() && opts.stall_after.is_none() {
            return None;
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let name = name.to_string();
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("watch".into())
            .spawn(move || watch(&name, total, &counters, opts, bar, &stop2))
            .ok()?;
        Some(Watch {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let (m, cv) = &*self.stop;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A command over traces (predict, diagnose) run with its reading
/// watched: status lines every `progress` seconds when asked and stderr
/// is not a terminal, the stall warning after `stall` seconds when a
/// trace is a pipe or a device; the watch stops at the first stage after
/// `reading`. Its stages named on stderr ([`Stages::with_lines`]).
pub fn watched<T>(
    command: &str,
    traces: &[std::path::PathBuf],
    progress: Option<f64>,
    stall: f64,
    counters: &Arc<Counters>,
    reading: &str,
    run: impl FnOnce(&mut dyn FnMut(&'static str)) -> T,
) -> T {
    let opts = WatchOptions {
        status_every: progress
            .and_then(secs)
            .filter(|_| !std::io::stderr().is_terminal()),
        stall_after: secs(stall).filter(|_| traces.iter().any(|p| is_stream(p))),
    };
    let stages = Stages::with_lines(command, progress.is_some());
    let mut watch = Watch::start("traces", None, Arc::clone(counters), opts, None);
    let out = run(&mut |s| {
        if s != reading {
            watch = None;
        }
        stages.stage(s)
    });
    drop(watch);
    out
}

/// The status line of an input: bytes (of the total), events, rate.
pub fn status_line(name: &str, bytes: u64, total: Option<u64>, events: u64, secs: f64) -> String {
    let of = match total {
        Some(t) if t > 0 => format!(
            " of {} ({:.0}%)",
            indicatif::HumanBytes(t),
            100.0 * bytes as f64 / t as f64
        ),
        _ => String::new(),
    };
    let rate = if secs > 0.0 { bytes as f64 / secs } else { 0.0 };
    format!(
        "statstorm: {name}: {} read{of}, {events} events, {:.0} s, {}/s",
        indicatif::HumanBytes(bytes),
        secs,
        indicatif::HumanBytes(rate as u64)
    )
}

/// The stall warning.
pub fn stall_line(name: &str, idle: Duration, bytes: u64, events: u64) -> String {
    format!(
        "statstorm: warning: {name}: no new strace event for {} s ({} read, {events} events so far); \
         the input is a pipe or a device and has not ended: still reading (Ctrl-C stops)",
        idle.as_secs(),
        indicatif::HumanBytes(bytes)
    )
}

fn watch(
    name: &str,
    total: Option<u64>,
    c: &Counters,
    opts: WatchOptions,
    bar: Option<indicatif::ProgressBar>,
    stop: &(Mutex<bool>, Condvar),
) {
    let say = |line: String| match &bar {
        Some(b) => b.println(line),
        None => errln!("{line}"),
    };
    let begin = Instant::now();
    // Wake often enough for either.
    let tick = [opts.status_every, opts.stall_after]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(Duration::from_secs(1))
        .min(Duration::from_millis(500));
    let mut next_status = opts.status_every.map(|d| begin + d);
    let (mut last_events, mut last_change, mut warned) = (0u64, begin, false);
    let (m, cv) = stop;
    let mut stopped = m.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if *stopped {
            return;
        }
        stopped = cv
            .wait_timeout(stopped, tick)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if *stopped {
            return;
        }
        let now = Instant::now();
        let (bytes, events) = (
            c.bytes.load(Ordering::Relaxed),
            c.events.load(Ordering::Relaxed),
        );
        if events != last_events {
            (last_events, last_change, warned) = (events, now, false);
        } else if let Some(after) = opts.stall_after {
            if !warned && now - last_change >= after {
                say(stall_line(name, now - last_change, bytes, events));
                warned = true;
            }
        }
        if let (Some(at), Some(every)) = (next_status, opts.status_every) {
            if now >= at {
                say(status_line(
                    name,
                    bytes,
                    total,
                    events,
                    (now - begin).as_secs_f64(),
                ));
                next_status = Some(at + every.max(Duration::from_millis(1)));
            }
        }
    }
}

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

/// The line of a stage entered `after` the command's start.
pub fn stage_line(command: &str, what: &str, after: Duration) -> String {
    format!("{command}: {what} (after {:.1} s)", after.as_secs_f64())
}

/// The stage a command is in (`reading traces`, `lifting`, ...), shown
/// with a spinner and the time spent so far; cleared when dropped.
pub struct Stages {
    bar: Option<indicatif::ProgressBar>,
    /// With stderr not a terminal and `--progress` given: one line per
    /// stage (`predict: lifting to PHP operations (after 4.2 s)`), the
    /// time from the command's start.
    lines: Option<(String, Instant)>,
}

impl Stages {
    /// Shown only when stderr is a terminal.
    pub fn new(command: &str) -> Self {
        Self::shown(command, std::io::stderr().is_terminal())
    }

    /// As [`Stages::new`]; with stderr not a terminal and `lines` true
    /// (the command's `--progress`), each stage is written as a line.
    pub fn with_lines(command: &str, lines: bool) -> Self {
        let mut s = Self::new(command);
        if s.bar.is_none() && lines {
            s.lines = Some((command.to_string(), Instant::now()));
        }
        s
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
        Stages { bar, lines: None }
    }

    /// Enters a stage.
    pub fn stage(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
        if let Some((command, begin)) = &self.lines {
            eprintln!("{}", stage_line(command, what, begin.elapsed()));
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
        if let Some((command, begin)) = &self.lines {
            eprintln!("{}", stage_line(command, "done", begin.elapsed()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_line_names_the_command_the_stage_and_the_time() {
        assert_eq!(
            stage_line(
                "predict",
                "lifting to PHP operations",
                Duration::from_millis(4240)
            ),
            "predict: lifting to PHP operations (after 4.2 s)"
        );
        // asked for on a terminal: the spinner, no lines
        let s = Stages::shown("predict", true);
        assert!(s.lines.is_none());
    }

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
