//! The guest's assets: Debian's kernel and the modules the lab loads
//! (cached per kernel package), the static busybox, and the initramfs made
//! of them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cpio::Cpio;
use crate::guest;
use crate::LabError;

/// The Debian package naming the current kernel of the distribution; its
/// `Depends:` is the versioned `linux-image-6.1.0-N-amd64` package.
pub const KERNEL_META_PACKAGE: &str = "linux-image-amd64";

/// Modules the guest loads (their dependencies are added from each
/// module's `depends=`): virtio transport, block disk and 9p share, ext4
/// for the export, the NFS server and the v3/v4 client. `crc32c_generic`
/// is ext4's soft dependency (`softdep=pre: crypto-crc32c`): ext4 needs a
/// crc32c driver to mount a file system with metadata checksums, which
/// mkfs.ext4 enables by default.
pub const ROOT_MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_blk",
    "9pnet_virtio",
    "9p",
    "crc32c_generic",
    "ext4",
    "nfsd",
    "nfsv3",
    "nfsv4",
];

/// A program the lab runs on the host, and the Debian package providing it.
pub fn find_program(name: &str, package: &'static str) -> Result<PathBuf, LabError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from));
    for d in dirs {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(LabError::Missing {
        program: name.to_string(),
        package,
    })
}

/// The static busybox of Debian's busybox-static (`/bin/busybox`): the
/// initramfs has no shared libraries, and a dynamically linked `/init`
/// cannot start ("No working init found").
pub fn static_busybox() -> Result<(PathBuf, Vec<u8>), LabError> {
    let p = find_program("busybox", "busybox-static")?;
    let bytes = fs::read(&p).map_err(|e| LabError::io(format!("reading {}", p.display()), e))?;
    match elf_has_interp(&bytes) {
        Some(false) => Ok((p, bytes)),
        _ => Err(LabError::BusyboxNotStatic { path: p }),
    }
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}
fn is_elf64le(b: &[u8]) -> bool {
    b.len() >= 64 && &b[..4] == b"\x7fELF" && b[4] == 2 && b[5] == 1
}

/// Whether a 64-bit little-endian ELF file asks for a program interpreter
/// (a `PT_INTERP` program header: dynamically linked); `None` when it is
/// not such an ELF file.
pub fn elf_has_interp(b: &[u8]) -> Option<bool> {
    if !is_elf64le(b) {
        return None;
    }
    let phoff = usize::try_from(u64_at(b, 0x20)?).ok()?;
    let phentsize = usize::from(u16_at(b, 0x36)?);
    let phnum = usize::from(u16_at(b, 0x38)?);
    for i in 0..phnum {
        const PT_INTERP: u32 = 3;
        if u32_at(b, phoff.checked_add(i.checked_mul(phentsize)?)?)? == PT_INTERP {
            return Some(true);
        }
    }
    Some(false)
}

/// The `key=value` strings of a kernel module's `.modinfo` section (what
/// `modinfo` prints), or `None` when the file is not a 64-bit ELF with one.
pub fn modinfo(b: &[u8]) -> Option<Vec<(String, String)>> {
    if !is_elf64le(b) {
        return None;
    }
    let shoff = usize::try_from(u64_at(b, 0x28)?).ok()?;
    let shentsize = usize::from(u16_at(b, 0x3a)?);
    let shnum = usize::from(u16_at(b, 0x3c)?);
    let shstrndx = usize::from(u16_at(b, 0x3e)?);
    let sh = |i: usize| -> Option<(u32, usize, usize)> {
        let o = shoff.checked_add(i.checked_mul(shentsize)?)?;
        let name = u32_at(b, o)?;
        let off = usize::try_from(u64_at(b, o + 0x18)?).ok()?;
        let size = usize::try_from(u64_at(b, o + 0x20)?).ok()?;
        Some((name, off, size))
    };
    let (_, stroff, strsize) = sh(shstrndx)?;
    let strtab = b.get(stroff..stroff.checked_add(strsize)?)?;
    for i in 0..shnum {
        let (name, off, size) = sh(i)?;
        let n = strtab.get(name as usize..)?;
        let n = &n[..n.iter().position(|&c| c == 0)?];
        if n == b".modinfo" {
            let data = b.get(off..off.checked_add(size)?)?;
            let kv = data
                .split(|&c| c == 0)
                .filter_map(|s| std::str::from_utf8(s).ok())
                .filter_map(|s| s.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            return Some(kv);
        }
    }
    None
}

/// A module's name from its file name: `9pnet_virtio.ko` -> `9pnet_virtio`,
/// `crc32c-intel.ko` -> `crc32c_intel` (the kernel treats `-` and `_` alike).
pub fn module_name(file: &str) -> Option<String> {
    let stem = file.strip_suffix(".ko")?;
    Some(stem.replace('-', "_"))
}

/// The modules to load for `roots`, dependencies first, read from the
/// module files under `moddir` (`lib/modules/VERSION`, whose
/// `modules.builtin` lists what needs no loading). Debian's package ships
/// no `modules.dep` (depmod writes it when the package is installed), so
/// the dependencies come from each module's `depends=`.
pub fn resolve_modules(moddir: &Path, roots: &[&str]) -> Result<Vec<(String, PathBuf)>, LabError> {
    let builtin: BTreeSet<String> = fs::read_to_string(moddir.join("modules.builtin"))
        .map_err(|e| LabError::io(format!("reading {}/modules.builtin", moddir.display()), e))?
        .lines()
        .filter_map(|l| module_name(l.rsplit('/').next()?))
        .collect();
    let mut files = BTreeMap::new();
    let mut stack = vec![moddir.join("kernel")];
    while let Some(d) = stack.pop() {
        let rd =
            fs::read_dir(&d).map_err(|e| LabError::io(format!("reading {}", d.display()), e))?;
        for e in rd {
            let e = e.map_err(|e| LabError::io(format!("reading {}", d.display()), e))?;
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(n) = e.file_name().to_str().and_then(module_name) {
                files.insert(n, p);
            }
        }
    }
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    for r in roots {
        visit(r, &files, &builtin, &mut seen, &mut order, &mut Vec::new())?;
    }
    Ok(order)
}

fn visit(
    name: &str,
    files: &BTreeMap<String, PathBuf>,
    builtin: &BTreeSet<String>,
    seen: &mut BTreeSet<String>,
    order: &mut Vec<(String, PathBuf)>,
    path: &mut Vec<String>,
) -> Result<(), LabError> {
    let name = name.replace('-', "_");
    if builtin.contains(&name) || seen.contains(&name) {
        return Ok(());
    }
    if path.contains(&name) {
        return Err(LabError::Module {
            name,
            what: format!("dependency cycle through {}", path.join(" -> ")),
        });
    }
    let Some(file) = files.get(&name) else {
        return Err(LabError::Module {
            name,
            what: "neither a module file nor built in".into(),
        });
    };
    let bytes =
        fs::read(file).map_err(|e| LabError::io(format!("reading {}", file.display()), e))?;
    let info = modinfo(&bytes).ok_or_else(|| LabError::Module {
        name: name.clone(),
        what: format!("{} has no .modinfo section", file.display()),
    })?;
    path.push(name.clone());
    for (k, v) in &info {
        if k == "depends" {
            for d in v.split(',').filter(|d| !d.is_empty()) {
                visit(d, files, builtin, seen, order, path)?;
            }
        }
    }
    path.pop();
    seen.insert(name.clone());
    order.push((name, file.clone()));
    Ok(())
}

/// The versioned kernel package `linux-image-amd64` depends on, from
/// `apt-cache depends` (`Depends: linux-image-6.1.0-N-amd64`).
pub fn kernel_package() -> Result<String, LabError> {
    let out = Command::new("apt-cache")
        .args(["depends", KERNEL_META_PACKAGE])
        .output()
        .map_err(|e| LabError::KernelPackage {
            detail: format!("cannot run apt-cache (Debian's apt): {e}"),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_kernel_depends(&text).ok_or_else(|| LabError::KernelPackage {
        detail: format!(
            "`apt-cache depends {KERNEL_META_PACKAGE}` names no linux-image-* package (run apt-get update?): {}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    })
}

/// The last (by name) kernel package already in `cache`, if any.
pub fn cached_kernel(cache: &Path) -> Option<String> {
    fs::read_dir(cache)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("modules.order").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("linux-image-"))
        .max()
}

/// The first `Depends: linux-image-...` of `apt-cache depends` output.
pub fn parse_kernel_depends(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-") && !p.contains(['<', ' ']))
        .map(str::to_string)
}

/// The cached kernel of one package: `DIR/vmlinuz`, `DIR/modules/NAME.ko`
/// and `DIR/modules.order` (load order, one name a line).
#[derive(Debug, Clone)]
pub struct KernelAssets {
    pub package: String,
    pub dir: PathBuf,
    pub vmlinuz: PathBuf,
    pub modules: Vec<(String, PathBuf)>,
}

/// The kernel assets of `package` under `cache`, fetched (`apt-get
/// download`) and extracted (`dpkg-deb -x`, nothing is installed) the
/// first time.
pub fn kernel_assets(cache: &Path, package: &str) -> Result<KernelAssets, LabError> {
    let dir = cache.join(package);
    if !dir.join("modules.order").is_file() {
        build_kernel_assets(cache, package, &dir)?;
    }
    let order = fs::read_to_string(dir.join("modules.order"))
        .map_err(|e| LabError::io(format!("reading {}/modules.order", dir.display()), e))?;
    let modules = order
        .lines()
        .filter(|l| !l.is_empty())
        .map(|n| (n.to_string(), dir.join("modules").join(format!("{n}.ko"))))
        .collect();
    Ok(KernelAssets {
        package: package.to_string(),
        vmlinuz: dir.join("vmlinuz"),
        dir,
        modules,
    })
}

fn build_kernel_assets(cache: &Path, package: &str, dir: &Path) -> Result<(), LabError> {
    fs::create_dir_all(cache)
        .map_err(|e| LabError::io(format!("creating {}", cache.display()), e))?;
    let work = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(cache)
        .map_err(|e| LabError::io(format!("creating a directory in {}", cache.display()), e))?;
    let out = Command::new("apt-get")
        .args(["download", package])
        .current_dir(work.path())
        .output()
        .map_err(|e| LabError::KernelDownload {
            package: package.to_string(),
            output: format!("cannot run apt-get: {e}"),
        })?;
    let deb = fs::read_dir(work.path())
        .map_err(|e| LabError::io(format!("reading {}", work.path().display()), e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"));
    let Some(deb) = deb.filter(|_| out.status.success()) else {
        return Err(LabError::KernelDownload {
            package: package.to_string(),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    };
    let root = work.path().join("root");
    let x = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .output()
        .map_err(|e| LabError::Missing {
            program: format!("dpkg-deb ({e})"),
            package: "dpkg",
        })?;
    if !x.status.success() {
        return Err(LabError::KernelDownload {
            package: package.to_string(),
            output: format!("dpkg-deb -x: {}", String::from_utf8_lossy(&x.stderr).trim()),
        });
    }
    let kver = package.strip_prefix("linux-image-").unwrap_or(package);
    let vmlinuz = root.join("boot").join(format!("vmlinuz-{kver}"));
    let moddir = root.join("lib/modules").join(kver);
    if !vmlinuz.is_file() || !moddir.is_dir() {
        return Err(LabError::KernelDownload {
            package: package.to_string(),
            output: format!(
                "the package has no {} or {}",
                vmlinuz.display(),
                moddir.display()
            ),
        });
    }
    let modules = resolve_modules(&moddir, ROOT_MODULES)?;
    let stage = work.path().join("assets");
    let io = |what: String| move |e| LabError::io(what, e);
    fs::create_dir_all(stage.join("modules")).map_err(io("creating the asset directory".into()))?;
    fs::copy(&vmlinuz, stage.join("vmlinuz"))
        .map_err(io(format!("copying {}", vmlinuz.display())))?;
    let mut order = String::new();
    for (n, p) in &modules {
        fs::copy(p, stage.join("modules").join(format!("{n}.ko")))
            .map_err(io(format!("copying {}", p.display())))?;
        order.push_str(n);
        order.push('\n');
    }
    fs::write(stage.join("modules.order"), order).map_err(io("writing modules.order".into()))?;
    // another process may have finished first: then its copy is used
    match fs::rename(&stage, dir) {
        Ok(()) => Ok(()),
        Err(_) if dir.join("modules.order").is_file() => Ok(()),
        Err(e) => Err(LabError::io(format!("renaming into {}", dir.display()), e)),
    }
}

/// The initramfs: busybox as `/bin/busybox`, the modules, `/init` and
/// the command wrapper, as an uncompressed newc archive (the kernel takes
/// it as is; compressing it would save a few MB of a local file only).
pub fn initramfs(busybox: &[u8], kernel: &KernelAssets) -> Result<Vec<u8>, LabError> {
    let io = |e| LabError::io("writing the initramfs".into(), e);
    let mut c = Cpio::new(Vec::with_capacity(16 << 20));
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "host",
        "out",
        "newroot",
        "lib",
        "lib/modules",
    ] {
        c.dir(d, 0o755).map_err(io)?;
    }
    c.char_dev("dev/console", 0o600, 5, 1).map_err(io)?;
    c.char_dev("dev/null", 0o666, 1, 3).map_err(io)?;
    c.file("bin/busybox", 0o755, busybox).map_err(io)?;
    c.symlink("bin/sh", "busybox").map_err(io)?;
    let mut order = String::new();
    for (n, p) in &kernel.modules {
        let b = fs::read(p).map_err(|e| LabError::io(format!("reading {}", p.display()), e))?;
        c.file(&format!("lib/modules/{n}.ko"), 0o644, &b)
            .map_err(io)?;
        order.push_str(n);
        order.push('\n');
    }
    c.file("lib/modules/order", 0o644, order.as_bytes())
        .map_err(io)?;
    c.file("init", 0o755, guest::init_script().as_bytes())
        .map_err(io)?;
    c.file("cmd.sh", 0o755, guest::CMD.as_bytes()).map_err(io)?;
    c.finish().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_depends_line() {
        let t = "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n";
        assert_eq!(
            parse_kernel_depends(t).as_deref(),
            Some("linux-image-6.1.0-56-amd64")
        );
        assert_eq!(parse_kernel_depends("linux-image-amd64\n"), None);
        assert_eq!(parse_kernel_depends("  Depends: <linux-image-x>\n"), None);
    }

    #[test]
    fn cached_kernel_is_found() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(cached_kernel(d.path()), None);
        for (n, complete) in [
            ("linux-image-6.1.0-9-amd64", true),
            ("linux-image-6.1.0-99-amd64", false),
        ] {
            fs::create_dir(d.path().join(n)).unwrap();
            if complete {
                fs::write(d.path().join(n).join("modules.order"), "ext4\n").unwrap();
            }
        }
        // an unfinished fetch does not count
        assert_eq!(
            cached_kernel(d.path()).as_deref(),
            Some("linux-image-6.1.0-9-amd64")
        );
    }

    #[test]
    fn missing_programs_name_their_package() {
        let e = find_program("statstorm-no-such-program", "some-package").unwrap_err();
        assert_eq!(
            e.to_string(),
            "statstorm-no-such-program not found: install the Debian package some-package \
             (apt-get install some-package)"
        );
    }

    #[test]
    fn module_names() {
        assert_eq!(
            module_name("9pnet_virtio.ko").as_deref(),
            Some("9pnet_virtio")
        );
        assert_eq!(
            module_name("crc32c-intel.ko").as_deref(),
            Some("crc32c_intel")
        );
        assert_eq!(module_name("modules.order"), None);
    }

    /// A minimal ELF64 relocatable with a `.modinfo` section, as the
    /// kernel's modpost writes it.
    fn fake_module(modinfo: &[u8]) -> Vec<u8> {
        let shstr = b"\0.shstrtab\0.modinfo\0";
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let modinfo_off = b.len();
        b.extend_from_slice(modinfo);
        let shstr_off = b.len();
        b.extend_from_slice(shstr);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        let shoff = b.len();
        let mut sh = |name: u32, off: usize, size: usize| {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&(off as u64).to_le_bytes());
            h[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            b.extend_from_slice(&h);
        };
        sh(0, 0, 0);
        sh(1, shstr_off, shstr.len());
        sh(11, modinfo_off, modinfo.len());
        b[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        b[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
        b
    }

    #[test]
    fn modinfo_of_a_module() {
        let m = fake_module(b"license=GPL\0depends=sunrpc,grace\0name=lockd\0");
        let kv = modinfo(&m).unwrap();
        assert!(kv.contains(&("depends".into(), "sunrpc,grace".into())));
        assert!(kv.contains(&("name".into(), "lockd".into())));
        assert_eq!(modinfo(b"not an elf"), None);
        // truncated: no panic, no answer
        assert_eq!(modinfo(&m[..100]), None);
    }

    #[test]
    fn resolution_orders_dependencies_first_and_skips_builtins() {
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("kernel/fs");
        fs::create_dir_all(&k).unwrap();
        let m = |n: &str, deps: &str| {
            fs::write(
                k.join(format!("{n}.ko")),
                fake_module(format!("depends={deps}\0").as_bytes()),
            )
            .unwrap();
        };
        m("nfsv3", "nfs,lockd,sunrpc");
        m("nfs", "sunrpc,lockd");
        m("lockd", "sunrpc,grace");
        m("sunrpc", "");
        m("crc32c-generic", "");
        fs::write(
            d.path().join("modules.builtin"),
            "kernel/fs/nfs_common/grace.ko\n",
        )
        .unwrap();
        let order: Vec<String> = resolve_modules(d.path(), &["nfsv3", "crc32c_generic"])
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(order, ["sunrpc", "lockd", "nfs", "nfsv3", "crc32c_generic"]);
        let e = resolve_modules(d.path(), &["nope"]).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        m("a", "b");
        m("b", "a");
        assert!(resolve_modules(d.path(), &["a"])
            .unwrap_err()
            .to_string()
            .contains("cycle"));
    }

    #[test]
    fn busybox_is_checked_for_static_linking() {
        // the test binary itself is dynamically linked
        let me = fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(elf_has_interp(&me), Some(true));
        assert_eq!(elf_has_interp(b"#!/bin/sh\n"), None);
    }
}
