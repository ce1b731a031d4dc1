//! Prints every event of strace logs, one per line, with its strings
//! resolved: a check that two builds of the parser give the same events
//! (`diff <(old/dump LOG) <(new/dump LOG)`).
//!
//! `cargo run --release -p statstorm-trace --example dump -- [--threads N] FILE...`
//! (`-` = stdin; threads 0 = all cores, 1 = the sequential reader path)

use statstorm_trace::{Event, Interner, Options, Ret, Sink};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

struct Dump<W: Write> {
    out: W,
}

impl<W: Write> Sink for Dump<W> {
    fn event(&mut self, ev: &Event, s: &Interner) -> bool {
        let st = |p: Option<statstorm_trace::PathId>| p.map(|p| s.str(p).into_owned());
        let ret = match ev.ret {
            Ret::Ok(v) => format!("{v}"),
            Ret::Err(e) => s.str(e.0).into_owned(),
            Ret::Unknown => "?".into(),
        };
        writeln!(
            self.out,
            "{} {} {:?} {:?} {} {:?} {:?} {:?} {:?} {:x} {} {:?} {}",
            ev.line,
            ev.pid,
            ev.ts_us,
            ev.dur_us,
            s.str(ev.name),
            st(ev.path),
            st(ev.path2),
            ev.fd,
            st(ev.fd_path),
            ev.flags.0,
            ret,
            st(ev.ret_path),
            ev.input
        )
        .is_ok()
    }
}

fn main() {
    let mut threads = 0;
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--threads") {
        threads = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(0);
        args.drain(i..(i + 2).min(args.len()));
    }
    let mut code = 0;
    for arg in args {
        let r = match statstorm_trace::input::open(&PathBuf::from(&arg)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                code = 1;
                continue;
            }
        };
        let mut sink = Dump {
            out: BufWriter::new(std::io::stdout().lock()),
        };
        let opts = Options {
            threads,
            ..Options::default()
        };
        if let Err(e) = statstorm_trace::stream(&arg, r, &mut sink, opts) {
            eprintln!("{e}");
            code = 1;
        }
    }
    std::process::exit(code);
}
