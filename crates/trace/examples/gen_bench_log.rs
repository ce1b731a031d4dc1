//! Writes a large, realistic `strace -f -tt -T -y -o` log for the ingest
//! benchmark by replaying the real NFS-lab traces
//! (`../shared/fixtures/nfs-lab/strace/**/*.strace.gz`):
//!
//! - 16 processes run at once, each replaying one lab trace after another
//!   with a fresh pid (pids cycle through 20000..60000);
//! - the lines of the processes interleave and are re-timed on one clock
//!   (`-tt` time of day, 1-4 us apart), durations kept;
//! - each replay serves one of 200 site roots (`/srv/www/siteN/...`
//!   instead of `/mnt/nfs/site/...`), so distinct paths number ~100k;
//! - every 16th call is split into `<unfinished ...>` and
//!   `<... NAME resumed>` with other processes' lines in between;
//! - `-y` decorations are added as strace prints them: `= 3</path>` on
//!   opens, `3</path>` on fd arguments, `AT_FDCWD</cwd>`, `TCP:[...]` on
//!   accepted sockets.
//!
//! `cargo run --release -p statstorm-trace --example gen_bench_log -- OUT MIB`

use std::collections::HashMap;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

const WORKERS: usize = 16;
const SITES: usize = 200;

/// One source line without timestamp.
struct Src {
    pid: u32,
    rest: String,
}

fn load(path: &Path) -> Vec<Src> {
    let gz = std::fs::read(path).unwrap();
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(2, ' ');
            let pid = it.next()?.parse().ok()?;
            let r = it.next()?.trim_start();
            let (_ts, rest) = r.split_once(' ')?;
            Some(Src {
                pid,
                rest: rest.to_string(),
            })
        })
        .collect()
}

struct Worker {
    src: usize,
    pos: usize,
    /// Source pid -> replay pid (a lab trace can hold a parent and children).
    pids: HashMap<u32, u32>,
    /// Pid of the call split into unfinished/resumed.
    split_pid: u32,
    site: usize,
    fds: HashMap<i64, String>,
    /// The second half of a call split into unfinished/resumed.
    resumed: Option<String>,
}

/// Calls whose first argument is an fd.
const FD_FIRST: &[&str] = &[
    "read",
    "write",
    "close",
    "fstat",
    "newfstatat",
    "pread64",
    "pwrite64",
    "getdents64",
    "lseek",
    "fcntl",
    "fchdir",
    "flock",
    "ioctl",
    "poll",
    "recvfrom",
    "recvmsg",
    "sendto",
    "writev",
    "shutdown",
    "accept",
    "accept4",
    "setsockopt",
    "getsockopt",
    "fstatfs",
    "ftruncate",
    "fsync",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = PathBuf::from(args.get(1).expect("usage: gen_bench_log OUT MIB"));
    let mib: u64 = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(1100);
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/nfs-lab/strace");
    let mut files: Vec<PathBuf> = Vec::new();
    for v in std::fs::read_dir(&lab).expect("nfs-lab fixtures") {
        for f in std::fs::read_dir(v.unwrap().path().join("defaults")).unwrap() {
            files.push(f.unwrap().path());
        }
    }
    files.sort();
    let sources: Vec<Vec<Src>> = files.iter().map(|f| load(f)).collect();
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&out).unwrap());
    let target = mib << 20;
    let mut written: u64 = 0;
    let mut clock_us: u64 = 10 * 3600 * 1_000_000;
    let mut next_pid: u32 = 20000;
    let mut replay: usize = 0;
    let new_worker = |replay: &mut usize| {
        let src = *replay % sources.len();
        let site = (*replay * 7) % SITES;
        *replay += 1;
        Worker {
            src,
            pos: 0,
            pids: HashMap::new(),
            split_pid: 0,
            site,
            fds: HashMap::new(),
            resumed: None,
        }
    };
    let mut workers: Vec<Worker> = (0..WORKERS).map(|_| new_worker(&mut replay)).collect();
    let mut rng: u64 = 0x2545f4914f6cdd1d;
    let mut calls: u64 = 0;
    let mut line = String::with_capacity(4096);
    while written < target {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let wi = (rng % WORKERS as u64) as usize;
        clock_us += 1 + (rng >> 32) % 4;
        let wk = &mut workers[wi];
        line.clear();
        let t = clock_us % (86_400 * 1_000_000);
        let ts = format!(
            "{:02}:{:02}:{:02}.{:06}",
            t / 3_600_000_000,
            t / 60_000_000 % 60,
            t / 1_000_000 % 60,
            t % 1_000_000
        );
        if let Some(r) = wk.resumed.take() {
            line.push_str(&format!("{:<5} {} ", wk.split_pid, ts));
            line.push_str(&r);
        } else {
            let src = &sources[wk.src];
            if wk.pos >= src.len() {
                *wk = new_worker(&mut replay);
                continue;
            }
            let pid = *wk.pids.entry(src[wk.pos].pid).or_insert_with(|| {
                next_pid = if next_pid >= 60000 {
                    20000
                } else {
                    next_pid + 1
                };
                next_pid
            });
            line.push_str(&format!("{:<5} {} ", pid, ts));
            let site = format!("/srv/www/site{}", wk.site);
            let rest = src[wk.pos].rest.replace("/mnt/nfs/site", &site);
            wk.pos += 1;
            let body = decorate(&rest, &mut wk.fds, &site);
            calls += 1;
            // Split every 16th complete call into unfinished + resumed.
            let split =
                calls % 16 == 0 && !body.contains("resumed>") && !body.contains("<unfinished");
            match (split, body.find('('), body.rfind(") = ")) {
                (true, Some(open), Some(close)) if close > open => {
                    let name = &body[..open];
                    let cut = body[open..close]
                        .find(", ")
                        .map(|i| open + i + 2)
                        .unwrap_or(open + 1);
                    line.push_str(&body[..cut]);
                    line.push_str(" <unfinished ...>");
                    wk.split_pid = pid;
                    wk.resumed = Some(format!("<... {name} resumed>{}", &body[cut..]));
                }
                _ => line.push_str(&body),
            }
        }
        line.push('\n');
        w.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
    }
    w.flush().unwrap();
    eprintln!("wrote {} bytes to {}", written, out.display());
}

/// Adds `-y` decorations to one call as strace prints them.
fn decorate(body: &str, fds: &mut HashMap<i64, String>, cwd: &str) -> String {
    let Some(open) = body.find('(') else {
        return body.to_string();
    };
    let name = &body[..open];
    if !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return body.to_string();
    }
    let mut s = body.replace("AT_FDCWD,", &format!("AT_FDCWD<{cwd}>,"));
    // fd argument
    if FD_FIRST.contains(&name) {
        let a = open + 1;
        let end = s[a..].find([',', ')']).map(|i| a + i);
        if let Some(e) = end {
            if let Ok(fd) = s[a..e].parse::<i64>() {
                let deco = match fd {
                    0..=2 => Some("/dev/null".to_string()),
                    _ => fds.get(&fd).cloned(),
                };
                if let Some(p) = deco {
                    s.insert_str(e, &format!("<{p}>"));
                }
                if name == "close" {
                    fds.remove(&fd);
                }
            }
        }
    }
    // result fd of opens and accepts
    let Some(eq) = s.rfind(") = ") else {
        return s;
    };
    let r = eq + 4;
    let rend = s[r..].find(' ').map(|i| r + i).unwrap_or(s.len());
    let Ok(fd) = s[r..rend].parse::<i64>() else {
        return s;
    };
    if fd < 0 {
        return s;
    }
    let deco = match name {
        "open" | "openat" => {
            let q1 = s.find('"');
            let q2 = q1.and_then(|q| s[q + 1..].find('"').map(|i| q + 1 + i));
            match (q1, q2) {
                (Some(a), Some(b)) => {
                    let p = &s[a + 1..b];
                    Some(if p.starts_with('/') {
                        p.to_string()
                    } else {
                        format!("{cwd}/{p}")
                    })
                }
                _ => None,
            }
        }
        "accept" | "accept4" => Some(format!(
            "TCP:[127.0.0.1:9000->127.0.0.1:{}]",
            30000 + fd * 7 % 30000
        )),
        _ => None,
    };
    if let Some(p) = deco {
        s.insert_str(rend, &format!("<{p}>"));
        fds.insert(fd, p);
    }
    s
}
