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
    /// Two inputs show the same pid: read together, their processes
    /// would be merged into one.
    #[error("{}", pid_collision_message(*pid, first, second))]
    PidCollision {
        pid: u32,
        first: String,
        second: String,
    },
}

/// What [`Error::PidCollision`] says: both files, the pid, and what to do.
pub fn pid_collision_message(pid: u32, first: &str, second: &str) -> String {
    let which = if pid == 0 {
        "both have lines without a pid (strace without -f), read as process 0".to_string()
    } else {
        format!("pid {pid} is in both")
    };
    format!(
        "{second} and {first}: {which}; several inputs are read as one trace, so their processes \
         would be merged into one. Give captures of different runs (or one file twice) separately; \
         join pieces of one capture into one input (cat a b | statstorm ...)"
    )
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
        Compression::Gzip => Box::new(GzMembers::new(r)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(r)?),
        Compression::None => Box::new(r),
    })
}

/// The members of a gzip file, one after the other, as `gzip -d` reads
/// them: a member may follow another, and zero bytes after the last member
/// end the data (tape and block-device padding; gzip.c `get_method`
/// ignores them). Any other bytes after a member are an error, as
/// `flate2::bufread::MultiGzDecoder` gives, which reads them as a header.
struct GzMembers<R: BufRead> {
    /// The member being read; `None` once the data has ended.
    dec: Option<flate2::bufread::GzDecoder<R>>,
}

impl<R: BufRead> GzMembers<R> {
    fn new(r: R) -> Self {
        GzMembers {
            dec: Some(flate2::bufread::GzDecoder::new(r)),
        }
    }
}

impl<R: BufRead> Read for GzMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let Some(mut dec) = self.dec.take() else {
                return Ok(0);
            };
            let n = dec.read(buf)?;
            if n > 0 {
                self.dec = Some(dec);
                return Ok(n);
            }
            // The member ended (the bufread decoder consumed exactly its
            // bytes): what follows is another member, zero padding or the
            // end.
            let mut r = dec.into_inner();
            if r.fill_buf()?.first() == Some(&GZIP_MAGIC[0]) {
                self.dec = Some(flate2::bufread::GzDecoder::new(r));
                continue;
            }
            loop {
                let head = r.fill_buf()?;
                if head.is_empty() {
                    return Ok(0);
                }
                if head.iter().any(|&b| b != 0) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "bytes after the gzip data that are neither a gzip member nor zero padding",
                    ));
                }
                let n = head.len();
                r.consume(n);
            }
        }
    }
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

/// A file mapped into memory (derefs to `[u8]`), safe against the file
/// shrinking while it is read: pages past the new end read as zeros
/// instead of stopping the process with `SIGBUS`, and [`Mapped::shrunk`]
/// tells afterwards (see [`guard`]).
pub struct Mapped {
    map: memmap2::Mmap,
    file: File,
    /// This map's slot in [`guard`]'s table.
    slot: usize,
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // Before the map itself goes (its fields drop after this).
        guard::unregister(self.slot);
    }
}

impl Mapped {
    /// The file's length now, when it is shorter than the map: the file
    /// shrank after it was mapped, and what the map held past that length
    /// read as zeros (or was not reached). `None` when it kept its length
    /// or grew (appended bytes are not in the map).
    pub fn shrunk(&self) -> Option<u64> {
        let now = self.file.metadata().map(|m| m.len()).ok();
        match now {
            Some(n) if n < self.map.len() as u64 => Some(n),
            _ if guard::faulted(self.slot) => Some(now.unwrap_or(0).min(self.map.len() as u64)),
            _ => None,
        }
    }
}

/// An uncompressed regular file mapped into memory: `path`, or stdin
/// (`-`) when it is redirected from a regular file. `Ok(None)` when the
/// input cannot be mapped (a pipe, a terminal, an empty file, more maps
/// at once than [`guard`] has room for) or is compressed: read it with
/// [`open`] instead.
///
/// The parser then works on the page cache directly (no read copies, and
/// the parallel path starts on every block at once). A file that shrinks
/// while mapped (truncated, rewritten in place) would kill the process
/// with `SIGBUS` on the first read past its new end; [`guard`] maps zeros
/// there instead and [`Mapped::shrunk`] reports it. What is appended after
/// the map was made is not read.
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
    // SAFETY: the map is read-only and private to this process. The file
    // shrinking while it is mapped is handled by `guard`, with which the
    // map is registered before any of its bytes is read.
    let map = match unsafe { memmap2::Mmap::map(&file) } {
        Ok(m) => m,
        Err(_) => return Ok(None),
    };
    let Some(slot) = guard::register(map.as_ptr() as usize, map.len()) else {
        return Ok(None);
    };
    let map = Mapped { map, file, slot };
    if sniff(&map) != Compression::None {
        return Ok(None);
    }
    // One pass from start to end: read ahead.
    let _ = map.map.advise(memmap2::Advice::Sequential);
    Ok(Some(map))
}

/// Reading a mapped file that shrinks: a `SIGBUS` handler for the maps of
/// this module. A read of a page past the file's new end raises `SIGBUS`
/// in the reading thread; the handler maps anonymous zero pages from that
/// page to the end of the map in place of the file's (`MAP_FIXED`), marks
/// the map, and returns, so the read is done again and gives zeros. A
/// `SIGBUS` at any other address gets the signal's default action (the
/// process stops with it, as without the handler).
///
/// The maps are kept in a fixed table of atomics (the handler may neither
/// lock nor allocate); `mmap` is a plain system call, safe to make there.
pub mod guard {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Once;

    /// Maps registered at once, at most (`statstorm analyze` maps one
    /// input at a time).
    const SLOTS: usize = 16;

    #[allow(clippy::declare_interior_mutable_const)]
    const ZERO: AtomicUsize = AtomicUsize::new(0);
    #[allow(clippy::declare_interior_mutable_const)]
    const NO: AtomicBool = AtomicBool::new(false);
    /// Start and end addresses of each registered map (start 0: free).
    static START: [AtomicUsize; SLOTS] = [ZERO; SLOTS];
    static END: [AtomicUsize; SLOTS] = [ZERO; SLOTS];
    /// The handler replaced pages of this map.
    static FAULTED: [AtomicBool; SLOTS] = [NO; SLOTS];
    static PAGE: AtomicUsize = AtomicUsize::new(4096);
    static INSTALL: Once = Once::new();
    static INSTALLED: AtomicBool = AtomicBool::new(false);

    /// Registers `len` bytes at `start`, installing the handler the first
    /// time; `None` when the table is full or the handler could not be
    /// installed (then the map must not be used).
    pub(super) fn register(start: usize, len: usize) -> Option<usize> {
        INSTALL.call_once(install);
        if !INSTALLED.load(Ordering::Acquire) || start == 0 {
            return None;
        }
        for i in 0..SLOTS {
            if START[i]
                .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                FAULTED[i].store(false, Ordering::Release);
                END[i].store(start + len, Ordering::Release);
                START[i].store(start, Ordering::Release);
                return Some(i);
            }
        }
        None
    }

    pub(super) fn unregister(slot: usize) {
        END[slot].store(0, Ordering::Release);
        START[slot].store(0, Ordering::Release);
    }

    /// Whether the handler replaced pages of the map in `slot`.
    pub(super) fn faulted(slot: usize) -> bool {
        FAULTED[slot].load(Ordering::Acquire)
    }

    fn install() {
        // SAFETY: sysconf and sigaction with a zeroed, then filled,
        // `sigaction` struct; the handler is an `extern "C"` function of
        // the right signature for SA_SIGINFO.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::Release);
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = handler;
            sa.sa_sigaction = f as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) == 0 {
                INSTALLED.store(true, Ordering::Release);
            }
        }
    }

    extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO.
        let addr = unsafe { (*info).si_addr() } as usize;
        let page = PAGE.load(Ordering::Acquire);
        for i in 0..SLOTS {
            let start = START[i].load(Ordering::Acquire);
            let end = END[i].load(Ordering::Acquire);
            if start == 0 || start == usize::MAX || addr < start || addr >= end {
                continue;
            }
            let from = addr & !(page - 1);
            // SAFETY: [from, end) lies inside a read-only file map this
            // module registered and its owner still holds (unregistered
            // before it is unmapped); replacing its pages with zero pages
            // keeps the range mapped and readable.
            let p = unsafe {
                libc::mmap(
                    from as *mut libc::c_void,
                    end - from,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                FAULTED[i].store(true, Ordering::Release);
                return;
            }
        }
        // Not a registered map: the default action, as without a handler
        // (the faulting access is made again on return and stops the
        // process with SIGBUS).
        // SAFETY: signal() with SIG_DFL is async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}

/// Lets the pages of `map[range]` leave the process's resident set once
/// they have been parsed (they stay in the page cache). Reading them again
/// still works: the kernel maps them back from the file.
pub fn release(map: &Mapped, range: std::ops::Range<usize>) {
    if range.start >= range.end || range.end > map.len() {
        return;
    }
    let map = &map.map;
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

/// Reads a side file (a scenario, a php.ini, a `/proc/mounts` copy) of at
/// most `limit` bytes as text (invalid UTF-8 replaced); a larger one is an
/// `InvalidData` error naming the limit, not an allocation that grows
/// until it fails (`/dev/zero` given as a php.ini).
pub fn read_text_capped(path: &Path, limit: u64) -> io::Result<String> {
    let mut b = Vec::new();
    File::open(path)?.take(limit + 1).read_to_end(&mut b)?;
    if b.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes: not a settings or scenario file"),
        ));
    }
    Ok(String::from_utf8_lossy(&b).into_owned())
}

/// The cap of [`read_text_capped`] for settings, mounts and scenario files:
/// real ones are a few hundred KiB at most.
pub const SIDE_FILE_LIMIT: u64 = 16 << 20;

/// What a reader publishes while it reads an input, for a progress line
/// or a stall guard watching from another thread.
#[derive(Debug, Default)]
pub struct Counters {
    /// Input bytes read (or merged, for a mapped input).
    pub bytes: std::sync::atomic::AtomicU64,
    /// Events parsed.
    pub events: std::sync::atomic::AtomicU64,
}

impl Counters {
    /// Counts one event. Only the reading thread writes: a plain load and
    /// store, no locked add per event.
    #[inline]
    pub fn event(&self) {
        use std::sync::atomic::Ordering;
        let n = self.events.load(Ordering::Relaxed);
        self.events.store(n + 1, Ordering::Relaxed);
    }
}

/// A reader that fails once it has given more than `limit` bytes (after
/// decompression): an input that must stay small, read whole into memory
/// (a reference capture).
pub struct Limited<R> {
    pub inner: R,
    pub limit: u64,
    pub read: u64,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("more than {} MiB of text", self.limit >> 20),
            ));
        }
        Ok(n)
    }
}

/// A reader that adds the bytes it reads to [`Counters::bytes`].
pub struct Counted<'c, R> {
    pub inner: R,
    pub counters: &'c Counters,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counters
            .bytes
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}
