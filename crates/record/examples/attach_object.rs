//! Loads a compiled BPF object file, attaches each of its programs, and
//! holds them until standard input reaches its end: the measurement helper
//! of scripts/bench-overhead-floor (the cost of an attachment alone, with
//! programs written for the measurement, apart from `statstorm record`).
//!
//!   attach_object OBJ < FIFO
use std::io::Read;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: attach_object OBJ (holds the programs until stdin ends)");
        std::process::exit(2);
    };
    let obj = match libbpf_rs::ObjectBuilder::default()
        .open_file(&path)
        .and_then(|o| o.load())
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("attach_object: {path}: {e}");
            std::process::exit(1);
        }
    };
    let mut links = Vec::new();
    for prog in obj.progs_mut() {
        match prog.attach() {
            Ok(l) => links.push(l),
            Err(e) => {
                eprintln!(
                    "attach_object: {path}: {}: {e}",
                    prog.name().to_string_lossy()
                );
                std::process::exit(1);
            }
        }
    }
    eprintln!("attach_object: {} programs attached", links.len());
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
