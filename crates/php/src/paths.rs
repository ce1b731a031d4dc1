//! Path helpers the lift and the lower share: what PHP's realpath walk
//! looks at next (`tsrm_realpath_r`), base names, ancestry, and which
//! files are scripts.

/// File name endings PHP applications include.
const SCRIPT_EXT: &[&str] = &[
    ".php", ".inc", ".module", ".phtml", ".install", ".theme", ".profile", ".engine",
];

pub fn is_script(p: &str) -> bool {
    SCRIPT_EXT.iter().any(|e| p.ends_with(e))
}

/// The path `tsrm_realpath_r` looks at after `p` (R53): drop the last
/// component and any `.` components before it. `None` at the root, which
/// is never lstat'ed.
pub fn parent(p: &str) -> Option<&str> {
    let p = p.trim_end_matches('/');
    let i = p.rfind('/')?;
    // empty components (`a//b`) are skipped
    let mut q = p[..i].trim_end_matches('/');
    loop {
        if let Some(s) = q.strip_suffix("/.") {
            q = s;
        } else if let Some(s) = q.strip_suffix("/..") {
            // `a/b/..` is resolved by resolving `a/b` and dropping its last
            // component (measured: `/v/composer/../w` walks `/v/composer/../w`,
            // `/v/composer`, `/v`, ...)
            q = s;
            break;
        } else {
            break;
        }
    }
    if q.is_empty() {
        None
    } else {
        Some(q)
    }
}

pub fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// `dir` is a proper ancestor of `p`.
pub fn is_ancestor(dir: &str, p: &str) -> bool {
    p.len() > dir.len() && p.starts_with(dir) && p.as_bytes()[dir.len()] == b'/'
}
