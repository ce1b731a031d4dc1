//! `statstorm-replay SCRIPT [--window FILE] [--speed F]`: performs a replay
//! script (`statstorm_lab::replay`) with the real syscalls
//! (`statstorm_lab::perform`), then prints how many results matched the
//! capture's and the first mismatches.
//!
//! The window file is `--window`, else `$STATSTORM_LAB_WINDOW`, else none.
//! Exit status 0 (mismatches are reported, not failures), 2 for a bad
//! script or usage, 1 when the replay could not run.

use std::path::PathBuf;

use statstorm_lab::perform::{perform, Outcome, FD_NOT_OPEN};
use statstorm_lab::replay::{self, parse_script, Script};

fn usage() -> ! {
    eprintln!("usage: statstorm-replay SCRIPT [--window FILE] [--speed F]");
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut script_path = None;
    let mut window = std::env::var("STATSTORM_LAB_WINDOW")
        .ok()
        .filter(|w| !w.is_empty());
    let mut speed = 1.0f64;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--window" => window = Some(args.next().unwrap_or_else(|| usage())),
            "--speed" => {
                speed = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                    .unwrap_or_else(|| usage())
            }
            "-h" | "--help" => usage(),
            _ if script_path.is_none() && !a.starts_with("--") => script_path = Some(a),
            _ => usage(),
        }
    }
    let Some(script_path) = script_path else {
        usage()
    };
    let text = match std::fs::read(&script_path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("statstorm-replay: {script_path}: {e}");
            std::process::exit(2);
        }
    };
    let Ok(text) = String::from_utf8(text) else {
        eprintln!("statstorm-replay: {script_path}: not UTF-8");
        std::process::exit(2);
    };
    let script = match parse_script(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("statstorm-replay: {script_path}: {e}");
            std::process::exit(2);
        }
    };
    match perform(&script, window.map(PathBuf::from).as_deref(), speed) {
        Ok(outcome) => {
            print_outcome(&script, &outcome);
            if !outcome.complete() {
                eprintln!(
                    "statstorm-replay: stopped at op {} of {} (a replay process died)",
                    outcome.done + 1,
                    outcome.total
                );
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("statstorm-replay: {e}");
            std::process::exit(1);
        }
    }
}

fn print_outcome(script: &Script, o: &Outcome) {
    println!(
        "statstorm-replay: {} of {} ops done: {} results as in the capture, {} not ({} skipped: fd not open)",
        o.done, o.total, o.matched, o.mismatched, o.skipped
    );
    for &(k, got) in &o.first_mismatches {
        let op = &script.ops[k];
        println!("  line {}: {op}: got {}", op.line, result_text(got));
    }
}

fn result_text(got: i64) -> String {
    if got == FD_NOT_OPEN {
        "fd not open".into()
    } else if got < 0 {
        replay::errno_name((-got) as i32)
    } else {
        got.to_string()
    }
}
