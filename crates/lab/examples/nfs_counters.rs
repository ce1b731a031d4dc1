//! Makes evidence files from the real Linux NFS client: the NFS client's
//! own counters around three `php -n` runs of a small PHP site on an
//! NFSv4.1 mount (default mount options, server delegations on), and the
//! strace of those runs.
//!
//! ```text
//! cargo run --release -p statstorm-lab --example nfs_counters -- OUTDIR
//! ```
//!
//! The site, built on the host and served by the lab guest's nfsd, is
//! `site/index.php`, which `require_once`s 40 files `site/inc/fNN.php` by
//! absolute path (`/mnt/nfs/site/inc/f00.php` ...), each defining one
//! trivial function, then calls `file_exists()` on 30 paths
//! `/mnt/nfs/site/uploads/uNN.txt`, of which the 15 even-numbered exist.
//! One guest command (cwd `/mnt/nfs/site`) snapshots
//! `/proc/self/mountstats`, runs the three php processes under
//! `strace -f -tt -T -y`, snapshots `/proc/self/mountstats` again and
//! runs `nfsstat -c`. Written to OUTDIR, exactly as the guest printed
//! them:
//!
//! - `lab-v41-mountstats-before.txt`, `lab-v41-mountstats-after.txt`
//! - `lab-v41-nfsstat-c.txt`
//! - `lab-v41-php.strace.gz` (the strace log, gzip-compressed)
//!
//! The lab's needs (qemu, busybox-static, e2fsprogs, nfs-kernel-server,
//! the Debian kernel package, fetched once into the lab cache) are those
//! of [`statstorm_lab::Lab::prepare`]; the host must also have php, strace
//! and nfsstat (nfs-common), which the guest runs from the host's tree.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flate2::write::GzEncoder;
use flate2::Compression;
use statstorm_lab::{default_cache, Block, GuestCommand, Lab, NfsVersion, Plan, NFS_MOUNTPOINT};

const INCLUDES: usize = 40;
const UPLOADS: usize = 30;
const PHP_RUNS: usize = 3;
/// What index.php prints last, once per run.
const SITE_OK: &str = "statstorm-site ok";

/// The guest's files, in the order printed, and the names written.
const FILES: [(&str, &str); 4] = [
    ("ms-before.txt", "lab-v41-mountstats-before.txt"),
    ("ms-after.txt", "lab-v41-mountstats-after.txt"),
    ("nfsstat-c.txt", "lab-v41-nfsstat-c.txt"),
    ("php.strace", "lab-v41-php.strace"),
];

/// Each file is printed as a begin line with its size in bytes, its
/// bytes, a newline and an end line.
const BEGIN: &str = "=== statstorm-lab-file ";
const END: &str = "=== statstorm-lab-end ";

fn main() {
    let out_dir = match std::env::args_os().nth(1) {
        Some(d) => PathBuf::from(d),
        None => {
            eprintln!("usage: nfs_counters OUTDIR");
            std::process::exit(2);
        }
    };
    fs::create_dir_all(&out_dir).unwrap_or_else(|e| panic!("creating {}: {e}", out_dir.display()));

    let t = Instant::now();
    let lab = Lab::prepare(&default_cache())
        .unwrap_or_else(|e| panic!("the NFS lab cannot run on this host: {e}"));
    eprintln!(
        "lab prepared in {:.1?}: kernel package {}",
        t.elapsed(),
        lab.kernel().package
    );

    let export = tempfile::tempdir().expect("temporary export directory");
    build_site(export.path());

    let mut plan = Plan::new(export.path());
    plan.timeout = Duration::from_secs(15 * 60);
    plan.blocks
        .push(
            Block::new(NfsVersion::V4_1, "", true).command(
                GuestCommand::new(["/bin/sh", "-c", &guest_script()])
                    .cwd(format!("{NFS_MOUNTPOINT}/site")),
            ),
        );
    let t = Instant::now();
    let out = lab
        .run(&plan)
        .unwrap_or_else(|e| panic!("the lab run failed: {e}"));
    eprintln!(
        "lab run: {:.1?} (qemu wall {:.1?}, boot to ready {:?})",
        t.elapsed(),
        out.wall,
        out.boot_to_ready
    );
    let block = &out.blocks[0];
    eprintln!("mount: {}", block.mount_line);
    let c = &block.commands[0];
    if c.status != 0 {
        panic!(
            "the guest command exited {}\n--- stderr ---\n{}\n--- stdout (last 2000 bytes) ---\n{}",
            c.status,
            c.stderr,
            tail(&c.stdout, 2000)
        );
    }
    if !c.stderr.is_empty() {
        eprintln!("guest stderr:\n{}", c.stderr);
    }
    eprintln!(
        "guest command: {:.1?}, RPCs on {NFS_MOUNTPOINT}: {:?}",
        c.duration, c.ops
    );

    let files = split_files(&c.stdout);
    let sum: usize = (0..INCLUDES).sum();
    let line = format!(
        "{SITE_OK}: {INCLUDES} includes (sum {sum}), {} of {UPLOADS} uploads exist\n",
        UPLOADS.div_ceil(2)
    );
    assert_eq!(
        files.preamble,
        line.repeat(PHP_RUNS),
        "index.php's output is not {PHP_RUNS} times the expected line"
    );

    for ((_, name), body) in FILES.iter().zip(&files.bodies) {
        if name.ends_with(".strace") {
            let path = out_dir.join(format!("{name}.gz"));
            let mut gz = GzEncoder::new(Vec::new(), Compression::best());
            gz.write_all(body.as_bytes()).expect("compressing");
            let bytes = gz.finish().expect("compressing");
            fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            eprintln!(
                "{}: {} bytes ({} uncompressed)",
                path.display(),
                bytes.len(),
                body.len()
            );
        } else {
            let path = out_dir.join(name);
            fs::write(&path, body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            eprintln!("{}: {} bytes", path.display(), body.len());
        }
    }
}

/// The export's `site/` tree.
fn build_site(root: &Path) {
    let site = root.join("site");
    let inc = site.join("inc");
    let uploads = site.join("uploads");
    fs::create_dir_all(&inc).expect("site/inc");
    fs::create_dir_all(&uploads).expect("site/uploads");
    let mut index = String::from("<?php\n");
    for i in 0..INCLUDES {
        fs::write(
            inc.join(format!("f{i:02}.php")),
            format!("<?php\nfunction f{i:02}() {{ return {i}; }}\n"),
        )
        .expect("inc file");
        index.push_str(&format!(
            "require_once '{NFS_MOUNTPOINT}/site/inc/f{i:02}.php';\n"
        ));
    }
    index.push_str("$sum = 0;\n");
    for i in 0..INCLUDES {
        index.push_str(&format!("$sum += f{i:02}();\n"));
    }
    index.push_str("$found = 0;\n");
    for i in 0..UPLOADS {
        if i % 2 == 0 {
            fs::write(
                uploads.join(format!("u{i:02}.txt")),
                format!("upload {i}\n"),
            )
            .expect("upload file");
        }
        index.push_str(&format!(
            "if (file_exists('{NFS_MOUNTPOINT}/site/uploads/u{i:02}.txt')) {{ $found++; }}\n"
        ));
    }
    index.push_str(&format!(
        "echo \"{SITE_OK}: {INCLUDES} includes (sum $sum), $found of {UPLOADS} uploads exist\\n\";\n"
    ));
    fs::write(site.join("index.php"), index).expect("index.php");
}

/// The guest command's shell script.
fn guest_script() -> String {
    let php = format!("php -n {NFS_MOUNTPOINT}/site/index.php");
    let runs = vec![php; PHP_RUNS].join("; ");
    let mut s = String::from("set -e\n");
    s.push_str("cat /proc/self/mountstats > /tmp/ms-before.txt\n");
    s.push_str(&format!(
        "strace -f -tt -T -y -o /tmp/php.strace sh -c \"{runs}\"\n"
    ));
    s.push_str("cat /proc/self/mountstats > /tmp/ms-after.txt\n");
    s.push_str("nfsstat -c > /tmp/nfsstat-c.txt 2>&1\n");
    for (f, _) in FILES {
        s.push_str(&format!(
            "printf '{BEGIN}%s %s ===\\n' {f} \"$(wc -c < /tmp/{f})\"\n\
             cat /tmp/{f}\n\
             printf '\\n{END}%s ===\\n' {f}\n"
        ));
    }
    s
}

struct Printed {
    /// What came before the first file (php's own output).
    preamble: String,
    /// The files' contents, in [`FILES`]' order.
    bodies: Vec<String>,
}

/// Splits the guest's stdout into the files [`guest_script`] printed,
/// checking each one's size and end line.
fn split_files(stdout: &str) -> Printed {
    let first = stdout
        .find(BEGIN)
        .unwrap_or_else(|| panic!("no file in the guest's output:\n{}", tail(stdout, 2000)));
    let preamble = stdout[..first].to_string();
    let mut rest = &stdout[first..];
    let mut bodies = Vec::new();
    for (f, _) in FILES {
        let line_end = rest.find('\n').expect("begin line");
        let line = &rest[..line_end];
        let fields: Vec<&str> = line
            .strip_prefix(BEGIN)
            .and_then(|l| l.strip_suffix(" ==="))
            .unwrap_or_else(|| panic!("expected the begin line of {f}, got {line:?}"))
            .split(' ')
            .collect();
        assert_eq!(fields.first(), Some(&f), "begin line {line:?}");
        let size: usize = fields
            .get(1)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no size in {line:?}"));
        let body_start = line_end + 1;
        let body = rest
            .get(body_start..body_start + size)
            .unwrap_or_else(|| panic!("{f}: {size} bytes announced, fewer printed"));
        let end = format!("\n{END}{f} ===\n");
        let after = &rest[body_start + size..];
        assert!(
            after.starts_with(&end),
            "{f}: no end line after {size} bytes (output not UTF-8?)"
        );
        bodies.push(body.to_string());
        rest = &after[end.len()..];
    }
    assert!(
        rest.is_empty(),
        "trailing guest output: {}",
        tail(rest, 2000)
    );
    Printed { preamble, bodies }
}

/// The last `n` bytes of `s` (or a little more, at a character boundary).
fn tail(s: &str, n: usize) -> &str {
    let mut i = s.len().saturating_sub(n);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[i..]
}
