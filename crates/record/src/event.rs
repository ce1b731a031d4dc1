//! The events the BPF program writes (`struct record_event` of
//! src/bpf/record.h), decoded from the ring buffer's bytes into [`Call`]s.
//!
//! [`Call::decode`] trusts nothing: a record shorter than its header, or
//! whose lengths point past its end, is an [`DecodeError`], never a panic
//! (fuzzed: fuzz/fuzz_targets/record_event.rs).

/// Bytes kept of each path, its NUL included (`RECORD_PATH`).
pub const RECORD_PATH: usize = 512;
/// Offset of the path bytes (`RECORD_HEADER`).
pub const HEADER: usize = 136;
/// The whole record (`sizeof(struct record_event)`).
pub const RECORD: usize = HEADER + 2 * RECORD_PATH;

const FLAG_CUT: u16 = 1;
const FLAG_STAT: u16 = 2;

/// The syscalls the BPF program follows (x86-64 numbers,
/// arch/x86/entry/syscalls/syscall_64.tbl).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Syscall {
    Read,
    Write,
    Open,
    Close,
    Stat,
    Fstat,
    Lstat,
    Access,
    Dup,
    Dup2,
    Accept,
    Clone,
    Fork,
    Vfork,
    Execve,
    Fcntl,
    Getdents,
    Getcwd,
    Chdir,
    Fchdir,
    Rename,
    Mkdir,
    Rmdir,
    Unlink,
    Readlink,
    Getdents64,
    Openat,
    Mkdirat,
    Newfstatat,
    Unlinkat,
    Renameat,
    Readlinkat,
    Faccessat,
    Accept4,
    Dup3,
    Renameat2,
    Execveat,
    Statx,
    Clone3,
    Openat2,
    Faccessat2,
}

impl Syscall {
    /// Every followed syscall with its number.
    pub const ALL: [(u16, Syscall); 41] = [
        (0, Syscall::Read),
        (1, Syscall::Write),
        (2, Syscall::Open),
        (3, Syscall::Close),
        (4, Syscall::Stat),
        (5, Syscall::Fstat),
        (6, Syscall::Lstat),
        (21, Syscall::Access),
        (32, Syscall::Dup),
        (33, Syscall::Dup2),
        (43, Syscall::Accept),
        (56, Syscall::Clone),
        (57, Syscall::Fork),
        (58, Syscall::Vfork),
        (59, Syscall::Execve),
        (72, Syscall::Fcntl),
        (78, Syscall::Getdents),
        (79, Syscall::Getcwd),
        (80, Syscall::Chdir),
        (81, Syscall::Fchdir),
        (82, Syscall::Rename),
        (83, Syscall::Mkdir),
        (84, Syscall::Rmdir),
        (87, Syscall::Unlink),
        (89, Syscall::Readlink),
        (217, Syscall::Getdents64),
        (257, Syscall::Openat),
        (258, Syscall::Mkdirat),
        (262, Syscall::Newfstatat),
        (263, Syscall::Unlinkat),
        (264, Syscall::Renameat),
        (267, Syscall::Readlinkat),
        (269, Syscall::Faccessat),
        (288, Syscall::Accept4),
        (292, Syscall::Dup3),
        (316, Syscall::Renameat2),
        (322, Syscall::Execveat),
        (332, Syscall::Statx),
        (435, Syscall::Clone3),
        (437, Syscall::Openat2),
        (439, Syscall::Faccessat2),
    ];

    /// The syscall of number `nr`, if followed.
    pub fn from_nr(nr: u16) -> Option<Syscall> {
        Syscall::ALL.iter().find(|(n, _)| *n == nr).map(|&(_, s)| s)
    }

    /// The name strace prints.
    pub fn name(self) -> &'static str {
        match self {
            Syscall::Read => "read",
            Syscall::Write => "write",
            Syscall::Open => "open",
            Syscall::Close => "close",
            Syscall::Stat => "stat",
            Syscall::Fstat => "fstat",
            Syscall::Lstat => "lstat",
            Syscall::Access => "access",
            Syscall::Dup => "dup",
            Syscall::Dup2 => "dup2",
            Syscall::Accept => "accept",
            Syscall::Clone => "clone",
            Syscall::Fork => "fork",
            Syscall::Vfork => "vfork",
            Syscall::Execve => "execve",
            Syscall::Fcntl => "fcntl",
            Syscall::Getdents => "getdents",
            Syscall::Getcwd => "getcwd",
            Syscall::Chdir => "chdir",
            Syscall::Fchdir => "fchdir",
            Syscall::Rename => "rename",
            Syscall::Mkdir => "mkdir",
            Syscall::Rmdir => "rmdir",
            Syscall::Unlink => "unlink",
            Syscall::Readlink => "readlink",
            Syscall::Getdents64 => "getdents64",
            Syscall::Openat => "openat",
            Syscall::Mkdirat => "mkdirat",
            Syscall::Newfstatat => "newfstatat",
            Syscall::Unlinkat => "unlinkat",
            Syscall::Renameat => "renameat",
            Syscall::Readlinkat => "readlinkat",
            Syscall::Faccessat => "faccessat",
            Syscall::Accept4 => "accept4",
            Syscall::Dup3 => "dup3",
            Syscall::Renameat2 => "renameat2",
            Syscall::Execveat => "execveat",
            Syscall::Statx => "statx",
            Syscall::Clone3 => "clone3",
            Syscall::Openat2 => "openat2",
            Syscall::Faccessat2 => "faccessat2",
        }
    }
}

/// What a successful stat-family call returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatInfo {
    pub mode: u32,
    pub size: i64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub ctime: i64,
    pub ctime_nsec: u32,
}

/// One finished call of a followed process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call<'a> {
    /// Entry, nanoseconds of CLOCK_MONOTONIC.
    pub ts_ns: u64,
    /// Entry to exit, nanoseconds.
    pub dur_ns: u64,
    /// The raw return value (a negative errno on failure).
    pub ret: i64,
    /// The raw arguments.
    pub args: [u64; 6],
    /// openat2's `how.flags`, clone3's `flags`.
    pub extra: u64,
    pub stat: Option<StatInfo>,
    /// Process (thread group).
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    pub syscall: Syscall,
    /// A path was longer than the bytes kept and is cut.
    pub cut: bool,
    /// The first path (without its NUL); read's first bytes; getcwd's
    /// result.
    pub path: Option<&'a [u8]>,
    /// rename's target; readlink's result.
    pub path2: Option<&'a [u8]>,
}

/// Why a ring buffer record could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record of {0} bytes, shorter than its {HEADER}-byte header")]
    Short(usize),
    #[error("syscall number {0} is not one the recorder follows")]
    Syscall(u16),
    #[error("path length {len} at offset {at} runs past the record's {size} bytes")]
    Length { at: usize, len: usize, size: usize },
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(a)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

/// `len` bytes at `at` of `b`, less a trailing NUL when `nul`.
fn text(b: &[u8], at: usize, len: usize, nul: bool) -> Result<Option<&[u8]>, DecodeError> {
    if len == 0 {
        return Ok(None);
    }
    let end = at
        .checked_add(len)
        .filter(|&e| e <= b.len())
        .ok_or(DecodeError::Length {
            at,
            len,
            size: b.len(),
        })?;
    let mut s = &b[at..end];
    if nul {
        // up to the first NUL (the kernel's string ends there)
        if let Some(z) = s.iter().position(|&c| c == 0) {
            s = &s[..z];
        }
    }
    Ok(Some(s))
}

impl<'a> Call<'a> {
    /// Decodes one ring buffer record.
    pub fn decode(b: &'a [u8]) -> Result<Call<'a>, DecodeError> {
        if b.len() < HEADER {
            return Err(DecodeError::Short(b.len()));
        }
        let nr = u16_at(b, 124);
        let syscall = Syscall::from_nr(nr).ok_or(DecodeError::Syscall(nr))?;
        let flags = u16_at(b, 126);
        let len1 = u16_at(b, 128) as usize;
        let len2 = u16_at(b, 130) as usize;
        let mut args = [0u64; 6];
        for (i, a) in args.iter_mut().enumerate() {
            *a = u64_at(b, 24 + 8 * i);
        }
        // read's data and readlink's target are bytes, not C strings
        let data1 = syscall == Syscall::Read;
        let data2 = matches!(syscall, Syscall::Readlink | Syscall::Readlinkat);
        let stat = (flags & FLAG_STAT != 0).then(|| StatInfo {
            size: u64_at(b, 80) as i64,
            mtime: u64_at(b, 88) as i64,
            ctime: u64_at(b, 96) as i64,
            mtime_nsec: u32_at(b, 104),
            ctime_nsec: u32_at(b, 108),
            mode: u32_at(b, 112),
        });
        Ok(Call {
            ts_ns: u64_at(b, 0),
            dur_ns: u64_at(b, 8),
            ret: u64_at(b, 16) as i64,
            args,
            extra: u64_at(b, 72),
            stat,
            pid: u32_at(b, 116),
            tid: u32_at(b, 120),
            syscall,
            cut: flags & FLAG_CUT != 0,
            path: text(b, HEADER, len1, !data1)?,
            path2: text(b, HEADER + RECORD_PATH, len2, !data2)?,
        })
    }

    /// The raw record of this call (what the BPF program writes): for
    /// tests and the fuzz corpus.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER];
        b[0..8].copy_from_slice(&self.ts_ns.to_ne_bytes());
        b[8..16].copy_from_slice(&self.dur_ns.to_ne_bytes());
        b[16..24].copy_from_slice(&self.ret.to_ne_bytes());
        for (i, a) in self.args.iter().enumerate() {
            b[24 + 8 * i..32 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        b[72..80].copy_from_slice(&self.extra.to_ne_bytes());
        let mut flags = 0u16;
        if let Some(s) = self.stat {
            flags |= FLAG_STAT;
            b[80..88].copy_from_slice(&s.size.to_ne_bytes());
            b[88..96].copy_from_slice(&s.mtime.to_ne_bytes());
            b[96..104].copy_from_slice(&s.ctime.to_ne_bytes());
            b[104..108].copy_from_slice(&s.mtime_nsec.to_ne_bytes());
            b[108..112].copy_from_slice(&s.ctime_nsec.to_ne_bytes());
            b[112..116].copy_from_slice(&s.mode.to_ne_bytes());
        }
        if self.cut {
            flags |= FLAG_CUT;
        }
        b[116..120].copy_from_slice(&self.pid.to_ne_bytes());
        b[120..124].copy_from_slice(&self.tid.to_ne_bytes());
        let nr = Syscall::ALL
            .iter()
            .find(|(_, s)| *s == self.syscall)
            .map_or(0, |&(n, _)| n);
        b[124..126].copy_from_slice(&nr.to_ne_bytes());
        b[126..128].copy_from_slice(&flags.to_ne_bytes());
        let nul1 = self.syscall != Syscall::Read;
        let nul2 = !matches!(self.syscall, Syscall::Readlink | Syscall::Readlinkat);
        let p1 = self.path.map(|p| {
            let mut v = p.to_vec();
            if nul1 {
                v.push(0);
            }
            v
        });
        let p2 = self.path2.map(|p| {
            let mut v = p.to_vec();
            if nul2 {
                v.push(0);
            }
            v
        });
        let l1 = p1.as_ref().map_or(0, Vec::len);
        let l2 = p2.as_ref().map_or(0, Vec::len);
        b[128..130].copy_from_slice(&(l1 as u16).to_ne_bytes());
        b[130..132].copy_from_slice(&(l2 as u16).to_ne_bytes());
        if let Some(p) = p1 {
            b.extend_from_slice(&p);
        }
        if let Some(p) = p2 {
            b.resize(HEADER + RECORD_PATH, 0);
            b.extend_from_slice(&p);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips() {
        let c = Call {
            ts_ns: 5,
            dur_ns: 7,
            ret: -2,
            args: [1, 2, 3, 4, 5, 6],
            extra: 0,
            stat: Some(StatInfo {
                mode: 0o100644,
                size: 9,
                mtime: 1,
                mtime_nsec: 2,
                ctime: 3,
                ctime_nsec: 4,
            }),
            pid: 10,
            tid: 11,
            syscall: Syscall::Renameat2,
            cut: true,
            path: Some(b"/a"),
            path2: Some(b"/b/c"),
        };
        let b = c.encode();
        assert_eq!(b.len(), HEADER + RECORD_PATH + 5);
        assert_eq!(Call::decode(&b).unwrap(), c);
    }

    #[test]
    fn bad_records_are_errors() {
        assert_eq!(Call::decode(&[0; 10]), Err(DecodeError::Short(10)));
        let mut b = vec![0u8; HEADER];
        b[124] = 200; // no syscall 200 followed
        assert_eq!(Call::decode(&b), Err(DecodeError::Syscall(200)));
        b[124] = 4; // stat
        b[128] = 40; // a 40-byte path in no bytes
        assert!(matches!(Call::decode(&b), Err(DecodeError::Length { .. })));
    }

    #[test]
    fn the_syscall_table_has_no_duplicates() {
        let mut n: Vec<u16> = Syscall::ALL.iter().map(|p| p.0).collect();
        n.dedup();
        assert_eq!(n.len(), Syscall::ALL.len());
        for (nr, s) in Syscall::ALL {
            assert_eq!(Syscall::from_nr(nr), Some(s));
        }
    }
}
