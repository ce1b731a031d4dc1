//! What runs inside the guest: `/init` (busybox sh, PID 1), the per-command
//! wrapper `cmd.sh`, and the plan script the host writes for each run.
//!
//! `/init` loads the modules, mounts the host's root (read-only 9p, tag
//! `hostroot`) and the run's share (read-write 9p, tag `out`), builds the
//! root the commands run in (`/newroot`: a tmpfs holding the host's
//! top-level directories bound from the 9p mount, the host's top-level
//! symlinks such as `bin -> usr/bin`, and the guest's own `/proc`, `/sys`,
//! `/dev`, `/tmp`, `/run`, `/srv/export`, `/mnt/nfs` and `/var/lib/nfs`),
//! starts the NFS server there, then sources `/out/plan.sh`, whose
//! `lab_block` and `lab_cmd` lines run the blocks. Results are written to
//! a tmpfs (`/newroot/.lab/out`) while commands run and copied to the
//! share at the end, so that the share's 9p traffic never falls inside a
//! measured command. The guest ends with `poweroff -f`; any failure writes
//! `/out/failed` first.

use std::fmt::Write;

use crate::{Block, NfsVersion};

/// The export's options (exports(5)): `fsid=0` makes /srv/export the
/// NFSv4 pseudo-root, so v4.1 mounts `127.0.0.1:/`.
pub const EXPORT_OPTIONS: &str = "rw,sync,no_subtree_check,no_root_squash,fsid=0";

/// Seconds of the NFSv4 server's grace period (`nfsv4gracetime`, default
/// 90) and lockd's (`nlm_grace_period`). While either runs, nfsd refuses
/// v4 OPENs that are not reclaims (NFS4ERR_GRACE) and hands out no
/// delegation (`locks_in_grace`, fs/nfs_common/grace.c; callers in
/// fs/nfsd/nfs4state.c), and lockd refuses new locks; the guest waits for
/// both to end before the first block, so no measured command meets it.
pub const GRACE_SECS: u32 = 10;

pub const INIT: &str = r#"#!/bin/sh
# /init of the statstorm lab guest (see crates/lab/src/guest.rs)
export PATH=/bin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
now_s() { cut -d. -f1 /proc/uptime; }
fail() {
	echo "lab: FAIL: $*"
	echo "$*" >/out/failed
	sync
	poweroff -f
	sleep 60
}
for m in $(cat /lib/modules/order); do
	case $m in
	lockd) insmod /lib/modules/lockd.ko nlm_grace_period=@GRACE@ || fail "insmod lockd" ;;
	*) insmod /lib/modules/$m.ko || fail "insmod $m" ;;
	esac
done
ip link set lo up || fail "ip link set lo up"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /out || fail "mounting the 9p share 'out'"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro hostroot /host ||
	fail "mounting the host root over 9p"
echo "lab: modules and shares after $(cat /proc/uptime)"

R=/newroot
mount -t tmpfs -o mode=755 root $R
for e in $(ls -A /host); do
	case $e in
	proc | sys | dev | run | tmp | mnt | srv | boot | lost+found) mkdir -p $R/$e ;;
	*)
		if [ -L /host/$e ]; then
			ln -s "$(readlink /host/$e)" $R/$e
		elif [ -d /host/$e ]; then
			mkdir $R/$e && mount --bind /host/$e $R/$e || fail "binding /$e"
		fi
		;;
	esac
done
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount --bind /dev $R/dev
mount -t tmpfs -o mode=1777 tmp $R/tmp
mount -t tmpfs -o mode=755 run $R/run
mkdir -p $R/srv/export $R/mnt/nfs $R/.lab/out
[ -d $R/var/lib/nfs ] || fail "the host has no /var/lib/nfs (install nfs-kernel-server)"
mount -t tmpfs -o mode=755 nfsstate $R/var/lib/nfs
mkdir -p $R/var/lib/nfs/sm $R/var/lib/nfs/sm.bak $R/var/lib/nfs/v4recovery $R/run/rpcbind
: >$R/var/lib/nfs/etab
: >$R/var/lib/nfs/rmtab
mount -t ext4 /dev/vda $R/srv/export || fail "mounting the export image"
mount -t nfsd nfsd $R/proc/fs/nfsd || fail "mounting the nfsd file system"
cp /bin/busybox /cmd.sh $R/.lab/
C="chroot $R"

echo @GRACE@ >$R/proc/fs/nfsd/nfsv4gracetime || fail "setting nfsv4gracetime"
$C /usr/sbin/rpcbind || fail "rpcbind"
$C /usr/sbin/rpc.statd --no-notify || fail "rpc.statd"
$C /usr/sbin/exportfs -o @EXPORT@ 127.0.0.1:/srv/export || fail "exportfs"
$C /usr/sbin/rpc.mountd || fail "rpc.mountd"
$C /usr/sbin/rpc.nfsd -V 3 -V 4 -V 4.1 -V 4.2 8 || fail "rpc.nfsd"
grace_end=$(($(now_s) + @GRACE@ + 1))
echo "lab: nfsd started after $(cat /proc/uptime)"
cat /proc/uptime >/out/ready

lab_block() { # N VERS OPTS DELEG
	b=$1
	d=$R/.lab/out/b$b
	mkdir -p $d
	if grep -q " $R/mnt/nfs " /proc/mounts; then
		umount $R/mnt/nfs || fail "block $b: umount /mnt/nfs"
	fi
	echo $4 >/proc/sys/fs/leases-enable || fail "block $b: fs.leases-enable"
	while [ $(now_s) -lt $grace_end ]; do sleep 1; done
	case $2 in
	3) src=127.0.0.1:/srv/export ;;
	*) src=127.0.0.1:/ ;;
	esac
	o=vers=$2
	[ -n "$3" ] && o=$o,$3
	if ! $C /bin/mount -t nfs -o "$o" $src /mnt/nfs >$d/mount.log 2>&1; then
		fail "block $b: mount -t nfs -o $o $src /mnt/nfs: $(cat $d/mount.log)"
	fi
	$C /.lab/busybox grep " /mnt/nfs " /proc/mounts >$d/mount
	echo "lab: block $b mounted ($o) after $(cat /proc/uptime)"
}

lab_cmd() { # N M -- then env -i ... (written by the host)
	mkdir -p $R/.lab/out/b$1/c$2
	# writable by a command that runs as another user (its window file)
	chmod 1777 $R/.lab/out/b$1/c$2
}

. /out/plan.sh
cp -r $R/.lab/out/. /out/ || fail "copying the results to the share"
echo "lab: done after $(cat /proc/uptime)"
echo ok >/out/done
sync
poweroff -f
sleep 60
"#;

/// Runs one command inside the chroot: `cmd.sh DIR CWD ARGV...`. The cwd
/// is entered, the environment set and `argv[0]` found in `PATH` before the
/// first mountstats snapshot, so only the command's own file system calls fall between
/// the two snapshots; `now` reads the monotonic clock (`now at N nsecs`
/// of /proc/timer_list, kernel/time/timer_list.c) because busybox's date
/// has no nanoseconds.
pub const CMD: &str = r#"d=$1
cwd=$2
shift 2
B=/.lab/busybox
export STATSTORM_LAB_WINDOW=$d/window
now() { $B awk '/^now at/ { print $3; exit }' /proc/timer_list; }
if ! cd "$cwd" 2>$d/cd_error; then
	exit 0
fi
rm -f $d/cd_error
# argv[0] without a slash: looked up in PATH here, because busybox's shell
# would otherwise run its own applet of that name (cat, stat, sh, ...)
case $1 in
*/*) ;;
*)
	c=/.lab/not-found/$1
	IFS=:
	for p in $PATH; do
		if [ -f "$p/$1" ] && [ -x "$p/$1" ]; then
			c=$p/$1
			break
		fi
	done
	unset IFS
	shift
	set -- "$c" "$@"
	;;
esac
$B cat /proc/self/mountstats >$d/before
t0=$(now)
"$@" >$d/stdout 2>$d/stderr </dev/null
echo $? >$d/status
t1=$(now)
$B cat /proc/self/mountstats >$d/after
echo $((t1 - t0)) >$d/duration_ns
"#;

/// The environment every command starts from (`env -i`), before its own.
pub const BASE_ENV: &[(&str, &str)] = &[
    (
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ),
    ("HOME", "/root"),
    ("LC_ALL", "C"),
];

/// `s` as one POSIX shell word.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `/init` with its constants filled in.
pub fn init_script() -> String {
    INIT.replace("@GRACE@", &GRACE_SECS.to_string())
        .replace("@EXPORT@", EXPORT_OPTIONS)
}

/// The plan script `/init` sources: per block a `lab_block` line, per
/// command a `lab_cmd` line and the chroot line running it.
pub fn plan_script(blocks: &[Block]) -> String {
    let mut s = String::new();
    for (b, block) in blocks.iter().enumerate() {
        let vers = match block.version {
            NfsVersion::V3 => "3",
            NfsVersion::V4_1 => "4.1",
        };
        let _ = writeln!(
            s,
            "lab_block {b} {vers} {} {}",
            quote(&block.mount_options),
            u8::from(block.delegations)
        );
        for (c, cmd) in block.commands.iter().enumerate() {
            let _ = writeln!(s, "lab_cmd {b} {c}");
            let _ = write!(s, "$C /.lab/busybox env -i");
            for (k, v) in BASE_ENV
                .iter()
                .map(|(k, v)| (*k, *v))
                .chain(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            {
                let _ = write!(s, " {}", quote(&format!("{k}={v}")));
            }
            let _ = write!(
                s,
                " /.lab/busybox sh /.lab/cmd.sh /.lab/out/b{b}/c{c} {}",
                quote(&cmd.cwd)
            );
            for a in &cmd.argv {
                let _ = write!(s, " {}", quote(a));
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GuestCommand;

    #[test]
    fn quoting() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn plan_lines() {
        let blocks = [Block {
            version: NfsVersion::V4_1,
            mount_options: "noatime".into(),
            delegations: false,
            commands: vec![GuestCommand::new(["/usr/bin/stat", "a b"])
                .cwd("/mnt/nfs")
                .env("X", "1")],
        }];
        let s = plan_script(&blocks);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "lab_block 0 4.1 'noatime' 0");
        assert_eq!(lines[1], "lab_cmd 0 0");
        assert!(
            lines[2].starts_with("$C /.lab/busybox env -i 'PATH="),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].ends_with(" 'X=1' /.lab/busybox sh /.lab/cmd.sh /.lab/out/b0/c0 '/mnt/nfs' '/usr/bin/stat' 'a b'"),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn init_is_filled_in() {
        let s = init_script();
        assert!(!s.contains('@'), "unfilled placeholder");
        assert!(s.contains(
            "exportfs -o rw,sync,no_subtree_check,no_root_squash,fsid=0 127.0.0.1:/srv/export"
        ));
    }
}
