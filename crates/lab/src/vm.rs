//! The export image and the qemu process.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::LabError;

/// Builds an ext4 image of `dir` at `image` with `mkfs.ext4 -d` (e2fsprogs
/// copies the tree, with its modes, owners, symlinks and sizes, without
/// mounting anything). The image is sparse; its size leaves room for the
/// commands' writes.
pub fn export_image(mkfs: &Path, dir: &Path, image: &Path) -> Result<(), LabError> {
    let (files, bytes) = tree_size(dir)?;
    let size = (bytes * 2 + files * 8192 + (256 << 20)).next_multiple_of(1 << 20);
    let f = fs::File::create(image)
        .map_err(|e| LabError::io(format!("creating {}", image.display()), e))?;
    f.set_len(size)
        .map_err(|e| LabError::io(format!("sizing {}", image.display()), e))?;
    drop(f);
    let out = Command::new(mkfs)
        .args(["-q", "-F", "-N"])
        .arg((files * 2 + 4096).to_string())
        .arg("-d")
        .arg(dir)
        .arg(image)
        .output()
        .map_err(|e| LabError::io(format!("running {}", mkfs.display()), e))?;
    if !out.status.success() {
        return Err(LabError::Mkfs {
            dir: dir.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Entries and bytes under `dir` (not following symlinks).
fn tree_size(dir: &Path) -> Result<(u64, u64), LabError> {
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd =
            fs::read_dir(&d).map_err(|e| LabError::io(format!("reading {}", d.display()), e))?;
        for e in rd {
            let e = e.map_err(|e| LabError::io(format!("reading {}", d.display()), e))?;
            let m = e
                .metadata()
                .map_err(|err| LabError::io(format!("stat {}", e.path().display()), err))?;
            files += 1;
            bytes += m.len().next_multiple_of(4096);
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    Ok((files, bytes))
}

/// One boot.
pub struct Boot<'a> {
    pub qemu: &'a Path,
    pub kernel: &'a Path,
    pub initramfs: &'a Path,
    pub image: &'a Path,
    pub share: &'a Path,
    pub console: &'a Path,
    pub memory_mib: u32,
    pub timeout: Duration,
}

pub struct Booted {
    pub boot_to_ready: Option<Duration>,
    pub wall: Duration,
    pub console: String,
}

/// Kills and reaps qemu when dropped before it exited by itself.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The message of /init's last `lab: FAIL: ...` console line.
pub fn guest_failure(console: &str) -> Option<&str> {
    console
        .lines()
        .rev()
        .find_map(|l| l.trim_end_matches('\r').strip_prefix("lab: FAIL: "))
}

/// The console's last lines, for error messages.
pub fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

impl Boot<'_> {
    /// qemu's arguments. TCG (no KVM), with `-icount shift=0`: the guest's
    /// clock advances by 1 ns per instruction while it runs (and with the
    /// host's clock while it idles), so guest durations do not depend on
    /// the host's load. `panic=-1` and `-no-reboot` turn a guest panic into
    /// qemu's exit.
    pub fn args(&self) -> Vec<String> {
        let p = |p: &Path| p.display().to_string();
        let mut a: Vec<String> = [
            "-nodefaults",
            "-no-user-config",
            "-machine",
            "pc",
            "-accel",
            "tcg",
            "-icount",
            "shift=0",
            "-smp",
            "1",
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
        ]
        .map(String::from)
        .to_vec();
        a.extend(["-m".into(), self.memory_mib.to_string()]);
        a.extend(["-serial".into(), format!("file:{}", p(self.console))]);
        a.extend([
            "-kernel".into(),
            p(self.kernel),
            "-initrd".into(),
            p(self.initramfs),
        ]);
        a.extend([
            "-append".into(),
            "console=ttyS0 panic=-1 rdinit=/init loglevel=4 nokaslr".into(),
        ]);
        a.extend([
            "-drive".into(),
            format!("file={},format=raw,if=virtio,cache=unsafe", p(self.image)),
        ]);
        // the host's root, read-only; multidevs=remap keeps inode numbers
        // unique across the host's mounts
        a.extend([
            "-virtfs".into(),
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
                .into(),
        ]);
        a.extend([
            "-virtfs".into(),
            format!(
                "local,path={},mount_tag=out,security_model=none",
                p(self.share)
            ),
        ]);
        a
    }

    pub fn run(&self) -> Result<Booted, LabError> {
        let stderr_path = self.share.with_file_name("qemu.stderr");
        let stderr = fs::File::create(&stderr_path)
            .map_err(|e| LabError::io(format!("creating {}", stderr_path.display()), e))?;
        let start = Instant::now();
        let mut cmd = Command::new(self.qemu);
        cmd.args(self.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        // qemu dies with the thread that waits for it, even when that
        // thread is killed without unwinding (prctl(2) PR_SET_PDEATHSIG)
        // SAFETY: prctl is async-signal-safe and touches no memory of the
        // parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| LabError::io(format!("starting {}", self.qemu.display()), e))?;
        let mut guard = Guard(Some(child));
        let console = || tail(&fs::read_to_string(self.console).unwrap_or_default(), 40);
        let mut ready = None;
        let status = loop {
            let c = guard.0.as_mut().expect("qemu running");
            if let Some(s) = c
                .try_wait()
                .map_err(|e| LabError::io("waiting for qemu".into(), e))?
            {
                guard.0 = None;
                break s;
            }
            if ready.is_none() && self.share.join("ready").exists() {
                ready = Some(start.elapsed());
            }
            if start.elapsed() > self.timeout {
                drop(guard);
                return Err(LabError::Timeout {
                    secs: self.timeout.as_secs(),
                    console: console(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let wall = start.elapsed();
        if self.share.join("done").exists() {
            return Ok(Booted {
                boot_to_ready: ready,
                wall,
                console: fs::read_to_string(self.console).unwrap_or_default(),
            });
        }
        // /init's failures before the share is mounted reach the console only
        let full = fs::read_to_string(self.console).unwrap_or_default();
        let message = fs::read_to_string(self.share.join("failed"))
            .ok()
            .or_else(|| guest_failure(&full).map(str::to_string));
        if let Some(m) = message {
            return Err(LabError::Guest {
                message: m.trim().to_string(),
                console: console(),
            });
        }
        Err(LabError::Qemu {
            status: status.to_string(),
            stderr: fs::read_to_string(&stderr_path)
                .unwrap_or_default()
                .trim()
                .to_string(),
            console: console(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_failure_and_tail() {
        let c = "[    1.0] boot\r\nlab: FAIL: insmod ext4\r\n[    2.0] reboot: Power down\r\n";
        assert_eq!(guest_failure(c), Some("insmod ext4"));
        assert_eq!(guest_failure("all fine\n"), None);
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }

    #[test]
    fn export_image_of_a_tree() {
        let Ok(mkfs) = crate::assets::find_program("mkfs.ext4", "e2fsprogs") else {
            panic!("mkfs.ext4 not found: install the Debian package e2fsprogs");
        };
        let d = tempfile::tempdir().unwrap();
        let tree = d.path().join("tree");
        fs::create_dir_all(tree.join("sub")).unwrap();
        fs::write(tree.join("sub/f"), vec![7u8; 10_000]).unwrap();
        std::os::unix::fs::symlink("sub/f", tree.join("l")).unwrap();
        assert_eq!(tree_size(&tree).unwrap(), (3, 4096 + 12288 + 4096));
        let img = d.path().join("x.img");
        export_image(&mkfs, &tree, &img).unwrap();
        let b = fs::read(&img).unwrap();
        // the ext4 superblock's magic, 0xEF53 at byte 1024 + 0x38
        assert_eq!(&b[1024 + 0x38..1024 + 0x3a], &[0x53, 0xef]);
        let e = export_image(&mkfs, &d.path().join("missing"), &img).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
