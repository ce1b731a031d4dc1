//! Opening inputs: files, `-` for stdin, gzip and zstd (by magic bytes),
//! directories refused, `-ff` per-pid files found from their prefix.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Errors that stop reading an input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Open {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}: is a directory; give the strace log files in it")]
    IsDirectory { path: String },
    #[error("{path}: read error after line {line}: {source}")]
    Read {
        path: String,
        line: u64,
        #[source]
        source: io::Error,
    },
    #[error("too many inputs ({0}); at most 65536")]
    TooManyInputs(usize),
}

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Compression of an input, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

pub fn sniff(head: &[u8]) -> Compression {
    if head.starts_with(GZIP_MAGIC) {
        Compression::Gzip
    } else if head.starts_with(ZSTD_MAGIC) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Wraps a buffered reader in the decompressor its magic bytes call for.
pub fn decompressed<'a, R: BufRead + 'a>(mut r: R) -> io::Result<Box<dyn Read + 'a>> {
    let head = r.fill_buf()?;
    Ok(match sniff(head) {
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(r)?),
        Compression::None => Box::new(r),
    })
}

/// Opens `path` (`-` is stdin), decompressing by magic bytes.
pub fn open(path: &Path) -> Result<Box<dyn Read>, Error> {
    let name = path.display().to_string();
    if path.as_os_str() == "-" {
        let r = BufReader::with_capacity(256 << 10, io::stdin());
        return decompressed(r).map_err(|source| Error::Open { path: name, source });
    }
    let meta = std::fs::metadata(path).map_err(|source| Error::Open {
        path: name.clone(),
        source,
    })?;
    if meta.is_dir() {
        return Err(Error::IsDirectory { path: name });
    }
    let f = File::open(path).map_err(|source| Error::Open {
        path: name.clone(),
        source,
    })?;
    decompressed(BufReader::with_capacity(256 << 10, f))
        .map_err(|source| Error::Open { path: name, source })
}

/// The pid of a `strace -ff -o PREFIX` file `PREFIX.PID` (also
/// `PREFIX.PID.gz` / `.zst`).
pub fn pid_from_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let name = name
        .strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".zst"))
        .unwrap_or(name);
    let (_, pid) = name.rsplit_once('.')?;
    if pid.is_empty() || !pid.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Expands a `-ff` prefix: when `path` does not exist but `path.PID` files
/// do, returns them sorted by pid.
pub fn expand_prefix(path: &Path) -> Option<Vec<PathBuf>> {
    if path.as_os_str() == "-" || path.exists() {
        return None;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = path.file_name()?.to_str()?.to_string();
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name();
            let n = n.to_str()?;
            let rest = n.strip_prefix(&base)?.strip_prefix('.')?;
            let p = dir.join(n);
            let pid = pid_from_name(&p)?;
            let digits = rest
                .strip_suffix(".gz")
                .or_else(|| rest.strip_suffix(".zst"))
                .unwrap_or(rest);
            (digits == pid.to_string()).then_some((pid, p))
        })
        .collect();
    if found.is_empty() {
        return None;
    }
    found.sort();
    Some(found.into_iter().map(|(_, p)| p).collect())
}

/// A file mapped into memory (derefs to `[u8]`).
pub type Mapped = memmap2::Mmap;

/// An uncompressed regular file mapped into memory: `path`, or stdin
/// (`-`) when it is redirected from a regular file. `Ok(None)` when the
/// input cannot be mapped (a pipe, a terminal, an empty file) or is
/// compressed: read it with [`open`] instead.
///
/// The parser then works on the page cache directly (no read copies, and
/// the parallel path starts on every block at once). A mapped file must not
/// shrink while it is read (the process would get `SIGBUS`): strace logs
/// only grow while strace writes them, and what is appended after the map
/// was made is not read.
pub fn map(path: &Path) -> Result<Option<Mapped>, Error> {
    let name = path.display().to_string();
    let err = |source| Error::Open {
        path: name.clone(),
        source,
    };
    let file = if path.as_os_str() == "-" {
        use std::os::fd::AsFd;
        match io::stdin().as_fd().try_clone_to_owned() {
            Ok(fd) => File::from(fd),
            Err(_) => return Ok(None),
        }
    } else {
        let meta = std::fs::metadata(path).map_err(err)?;
        if meta.is_dir() {
            return Err(Error::IsDirectory { path: name });
        }
        File::open(path).map_err(err)?
    };
    let meta = file.metadata().map_err(err)?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(None);
    }
    // stdin may have been read from already (`(head -n 1; statstorm ...) <
    // log`): the input is what is left, so only a file still at its start
    // is mapped.
    {
        use std::io::Seek;
        let mut f = &file;
        if f.stream_position().map_err(err)? != 0 {
            return Ok(None);
        }
    }
    // SAFETY: the map is read-only and private to this process; the only
    // hazard is the file shrinking while mapped (documented above).
    let map = match unsafe { memmap2::Mmap::map(&file) } {
        Ok(m) => m,
        Err(_) => return Ok(None),
    };
    if sniff(&map) != Compression::None {
        return Ok(None);
    }
    // One pass from start to end: read ahead.
    let _ = map.advise(memmap2::Advice::Sequential);
    Ok(Some(map))
}

/// Lets the pages of `map[range]` leave the process's resident set once
/// they have been parsed (they stay in the page cache). Reading them again
/// still works: the kernel maps them back from the file.
pub fn release(map: &Mapped, range: std::ops::Range<usize>) {
    if range.start >= range.end || range.end > map.len() {
        return;
    }
    // SAFETY: `map` is a read-only shared file mapping: a page touched again
    // after MADV_DONTNEED is faulted back in from the file with the same
    // bytes, so no live borrow of the map sees a change.
    let _ = unsafe {
        map.unchecked_advise_range(
            memmap2::UncheckedAdvice::DontNeed,
            range.start,
            range.end - range.start,
        )
    };
}
