//! A writer of "newc" cpio archives, the format the kernel unpacks an
//! initramfs from (Documentation/driver-api/early-userspace/buffer-format.rst):
//! per entry a 110-byte ASCII header (`070701` and 13 eight-digit hex
//! fields), the NUL-terminated name, padding to 4 bytes, the data, padding
//! to 4 bytes; the archive ends with an entry named `TRAILER!!!`.

use std::io::{self, Write};

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// Writes entries one after another; [`Cpio::finish`] writes the trailer.
/// Every entry is owned by root, dated 0 and has a fresh inode number.
pub struct Cpio<W: Write> {
    out: W,
    ino: u32,
    written: u64,
}

impl<W: Write> Cpio<W> {
    pub fn new(out: W) -> Self {
        Cpio {
            out,
            ino: 0,
            written: 0,
        }
    }

    /// A directory; `name` without a leading `/` (`dev`, `lib/modules`).
    pub fn dir(&mut self, name: &str, perm: u32) -> io::Result<()> {
        self.entry(name, S_IFDIR | (perm & 0o7777), 2, 0, &[])
    }

    /// A regular file holding `data`.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) -> io::Result<()> {
        self.entry(name, S_IFREG | (perm & 0o7777), 1, 0, data)
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) -> io::Result<()> {
        self.entry(name, S_IFLNK | 0o777, 1, 0, target.as_bytes())
    }

    /// A character device node `major:minor`.
    pub fn char_dev(&mut self, name: &str, perm: u32, major: u32, minor: u32) -> io::Result<()> {
        self.entry(
            name,
            S_IFCHR | (perm & 0o7777),
            1,
            (major << 8) | minor,
            &[],
        )
    }

    /// Writes the trailer and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.ino = 0;
        self.entry("TRAILER!!!", 0, 1, 0, &[])?;
        Ok(self.out)
    }

    /// `rdev` packed as `major << 8 | minor`, split into the header's two fields.
    fn entry(
        &mut self,
        name: &str,
        mode: u32,
        nlink: u32,
        rdev: u32,
        data: &[u8],
    ) -> io::Result<()> {
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cpio: {what}: {name:?}"),
            )
        };
        if name.is_empty() || name.starts_with('/') || name.contains('\0') {
            return Err(bad("entry names are relative, non-empty and without NUL"));
        }
        let size = u32::try_from(data.len()).map_err(|_| bad("file larger than 4 GiB"))?;
        let ino = if name == "TRAILER!!!" {
            0
        } else {
            self.ino += 1;
            self.ino
        };
        let namesize = name.len() + 1;
        let header = format!(
            "070701{ino:08x}{mode:08x}{uid:08x}{gid:08x}{nlink:08x}{mtime:08x}{size:08x}\
             {devmajor:08x}{devminor:08x}{rdevmajor:08x}{rdevminor:08x}{namesize:08x}{check:08x}",
            uid = 0,
            gid = 0,
            mtime = 0,
            devmajor = 0,
            devminor = 0,
            rdevmajor = rdev >> 8,
            rdevminor = rdev & 0xff,
            check = 0,
        );
        debug_assert_eq!(header.len(), 110);
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.written += b.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - (self.written % 4) as usize) % 4;
        self.put(&[0; 3][..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(h: &[u8], i: usize) -> u32 {
        let s = std::str::from_utf8(&h[6 + 8 * i..14 + 8 * i]).unwrap();
        u32::from_str_radix(s, 16).unwrap()
    }

    #[test]
    fn file_entry_layout() {
        let mut c = Cpio::new(Vec::new());
        c.file("init", 0o755, b"#!/bin/sh\n").unwrap();
        let out = c.finish().unwrap();
        assert_eq!(&out[..6], b"070701");
        assert_eq!(field(&out, 0), 1); // ino
        assert_eq!(field(&out, 1), 0o100755); // mode
        assert_eq!(field(&out, 6), 10); // filesize
        assert_eq!(field(&out, 11), 5); // namesize: "init\0"
                                        // header 110 + name 5 = 115, padded to 116; data 10 -> 126, padded to 128
        assert_eq!(&out[110..115], b"init\0");
        assert_eq!(&out[115..116], &[0]);
        assert_eq!(&out[116..126], b"#!/bin/sh\n");
        assert_eq!(&out[128..134], b"070701");
        assert_eq!(&out[238..249], b"TRAILER!!!\0");
        assert_eq!(out.len() % 4, 0);
    }

    #[test]
    fn device_symlink_and_dir() {
        let mut c = Cpio::new(Vec::new());
        c.dir("dev", 0o755).unwrap();
        c.char_dev("dev/console", 0o600, 5, 1).unwrap();
        c.symlink("bin/sh", "busybox").unwrap();
        let out = c.finish().unwrap();
        // every header starts on a 4-byte boundary
        let starts: Vec<usize> = out
            .windows(6)
            .enumerate()
            .filter(|(i, w)| i % 4 == 0 && *w == b"070701")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(starts.len(), 4);
        let dev = &out[starts[1]..];
        assert_eq!(field(dev, 1), 0o020600);
        assert_eq!((field(dev, 9), field(dev, 10)), (5, 1));
        let link = &out[starts[2]..];
        assert_eq!(field(link, 1), 0o120777);
        assert_eq!(field(link, 6), 7);
        assert!(out[starts[2]..starts[3]]
            .windows(7)
            .any(|w| w == b"busybox"));
        assert_eq!(field(&out[starts[0]..], 1), 0o040755);
    }

    #[test]
    fn rejects_absolute_names() {
        let mut c = Cpio::new(Vec::new());
        assert!(c.file("/init", 0o755, b"").is_err());
        assert!(c.file("", 0o755, b"").is_err());
    }

    /// The archive unpacks with busybox's cpio when that is installed (it
    /// is, with busybox-static, wherever the lab runs).
    #[test]
    fn busybox_cpio_reads_it() {
        let bb = std::path::Path::new("/bin/busybox");
        if !bb.exists() {
            return;
        }
        let mut c = Cpio::new(Vec::new());
        c.dir("d", 0o755).unwrap();
        c.file("d/f", 0o644, b"hello").unwrap();
        c.symlink("d/l", "f").unwrap();
        let out = c.finish().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut p = std::process::Command::new(bb)
            .args(["cpio", "-i", "-d"])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        p.stdin.take().unwrap().write_all(&out).unwrap();
        assert!(p.wait().unwrap().success());
        assert_eq!(std::fs::read(dir.path().join("d/f")).unwrap(), b"hello");
        assert_eq!(
            std::fs::read_link(dir.path().join("d/l")).unwrap(),
            std::path::Path::new("f")
        );
    }
}
