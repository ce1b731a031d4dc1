//! `/proc/self/mountstats`: the Linux NFS client's own per-mount RPC
//! counters, parsed, and the per-operation deltas between two snapshots.
//!
//! The text is written by `nfs_show_stats` (fs/nfs/super.c) and, for the
//! RPC part, `rpc_clnt_show_stats` / `_print_rpc_iostats`
//! (net/sunrpc/stats.c). Every mount has one line
//!
//! ```text
//! device 127.0.0.1:/srv/export mounted on /mnt/nfs with fstype nfs statvers=1.1
//! ```
//!
//! (device and mountpoint escaped by `seq_escape`: space, tab, newline and
//! backslash as `\ooo` octal); NFS mounts follow it with tab-indented lines,
//! of which this parser keeps `opts:` and, after the `per-op statistics`
//! line, one line per RPC procedure:
//!
//! ```text
//!          GETATTR: 3 3 0 396 336 0 1 1 0
//! ```
//!
//! ops, transmissions, major timeouts, bytes sent, bytes received, then the
//! cumulative queue, round-trip and execute times in milliseconds, and (from
//! statvers 1.1, Linux 5.x) the number of replies with an error status.
//! The `xprt:` lines (one per transport: several with `nconnect`) are
//! kept too, for the slot use and backlog ([`Transport`]). Other indented
//! lines (age, caps, events, bytes, ...) are skipped.
//!
//! ```
//! use statstorm_nfs::mountstats::{op_deltas, parse};
//! let before = parse("device s:/e mounted on /m with fstype nfs statvers=1.1\n\
//!     \tper-op statistics\n\t        NULL: 1 1 0 44 24 0 0 0 0\n\t      LOOKUP: 2 2 0 0 0 0 0 0 1\n").unwrap();
//! let after = parse("device s:/e mounted on /m with fstype nfs statvers=1.1\n\
//!     \tper-op statistics\n\t        NULL: 1 1 0 44 24 0 0 0 0\n\t      LOOKUP: 7 7 0 0 0 0 0 0 1\n").unwrap();
//! let d = op_deltas(before.mount("/m").unwrap(), after.mount("/m").unwrap()).unwrap();
//! assert_eq!(d.into_iter().collect::<Vec<_>>(), [("LOOKUP".to_string(), 5)]);
//! ```

use std::collections::BTreeMap;

use thiserror::Error;

/// One snapshot of `/proc/self/mountstats`: every mount, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MountStats {
    pub mounts: Vec<MountStat>,
}

/// One mount of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MountStat {
    /// `127.0.0.1:/srv/export` (unescaped).
    pub device: String,
    /// `/mnt/nfs` (unescaped).
    pub mountpoint: String,
    /// `nfs`, `nfs4`, `ext4`, ...
    pub fstype: String,
    /// `1.1` from `statvers=1.1`; NFS mounts only.
    pub statvers: Option<String>,
    /// The `opts:` line's value (`rw,vers=3,rsize=...`); NFS mounts only.
    pub opts: Option<String>,
    /// Per RPC procedure (`GETATTR`, `LOOKUP`, ...), as listed after
    /// `per-op statistics`; empty for a mount without them.
    pub ops: BTreeMap<String, OpStats>,
    /// The RPC transports' counters (`xprt:` lines of tcp, udp or rdma),
    /// in file order.
    pub transports: Vec<Transport>,
}

/// One RPC transport's counters since it was made (an `xprt:` line:
/// net/sunrpc/xprtsock.c `xs_tcp_print_stats` / `xs_udp_print_stats`,
/// xprtrdma's `xprt_rdma_print_stats` begins with tcp's first ten). At each
/// transmission `xprt_request_transmit` (net/sunrpc/xprt.c) counts the
/// send and adds the requests then on the wire to `req_u` and the tasks
/// then waiting for a slot to `bklog_u`, so their deltas over the sends'
/// are the mean requests in flight and the mean backlog per send.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transport {
    /// `tcp`, `udp` or `rdma`.
    pub proto: String,
    pub sends: u64,
    pub recvs: u64,
    pub bad_xids: u64,
    /// Sum over sends of the requests on the wire.
    pub req_u: u64,
    /// Sum over sends of the tasks waiting for a slot.
    pub bklog_u: u64,
    /// The most slots in use at once (Linux 2.6.38 and later).
    pub max_slots: Option<u64>,
    /// Sum over sends of the tasks waiting to transmit (with `max_slots`).
    pub sending_u: Option<u64>,
    /// Sum over sends of the tasks waiting for a reply (with `max_slots`).
    pub pending_u: Option<u64>,
}

/// The counters of one RPC procedure on one mount (`struct rpc_iostats`,
/// include/linux/sunrpc/metrics.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpStats {
    /// Requests completed.
    pub ops: u64,
    /// Transmissions (ops plus retransmissions).
    pub transmissions: u64,
    /// Major timeouts.
    pub timeouts: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Cumulative milliseconds queued before transmission.
    pub queue_ms: u64,
    /// Cumulative milliseconds from transmission to reply.
    pub rtt_ms: u64,
    /// Cumulative milliseconds from queueing to completion.
    pub execute_ms: u64,
    /// Replies with an error status (statvers 1.1 and later).
    pub errors: Option<u64>,
}

/// Why a snapshot could not be parsed, or two snapshots not compared.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MountStatsError {
    #[error("mountstats line {line}: {what}")]
    Syntax { line: usize, what: String },
    #[error("mountstats: {op} went from {before} to {after} ops between the snapshots (not the same mount?)")]
    CounterWentBack { op: String, before: u64, after: u64 },
}

fn syntax(line: usize, what: impl Into<String>) -> MountStatsError {
    MountStatsError::Syntax {
        line,
        what: what.into(),
    }
}

/// Parses a whole `/proc/self/mountstats` text. Errors name the 1-based line.
pub fn parse(text: &str) -> Result<MountStats, MountStatsError> {
    let mut mounts: Vec<MountStat> = Vec::new();
    let mut in_ops = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        if let Some(rest) = raw.strip_prefix("device ") {
            mounts.push(parse_device(n, rest)?);
            in_ops = false;
            continue;
        }
        if !raw.starts_with([' ', '\t']) {
            return Err(syntax(
                n,
                format!("expected `device ...` or an indented line, got {raw:?}"),
            ));
        }
        let Some(m) = mounts.last_mut() else {
            return Err(syntax(n, "indented line before any `device` line"));
        };
        let line = raw.trim();
        if line == "per-op statistics" {
            in_ops = true;
        } else if let Some(o) = line.strip_prefix("opts:") {
            m.opts = Some(o.trim().to_string());
        } else if let Some(x) = line.strip_prefix("xprt:") {
            if let Some(t) = parse_xprt(n, x)? {
                m.transports.push(t);
            }
        } else if in_ops {
            let (name, op) = parse_op(n, line)?;
            if m.ops.insert(name.to_string(), op).is_some() {
                return Err(syntax(
                    n,
                    format!("{name} listed twice for {}", m.mountpoint),
                ));
            }
        }
    }
    Ok(MountStats { mounts })
}

fn parse_device(n: usize, rest: &str) -> Result<MountStat, MountStatsError> {
    // device DEV mounted on MP with fstype FS [statvers=V]
    let t: Vec<&str> = rest.split(' ').collect();
    if t.len() < 7 || t[1] != "mounted" || t[2] != "on" || t[4] != "with" || t[5] != "fstype" {
        return Err(syntax(
            n,
            "expected `device DEV mounted on DIR with fstype TYPE`",
        ));
    }
    let statvers = match t.get(7) {
        None => None,
        Some(s) => match s.strip_prefix("statvers=") {
            Some(v) if t.len() == 8 => Some(v.to_string()),
            _ => {
                return Err(syntax(
                    n,
                    format!("unexpected {:?} after the fstype", t[7..].join(" ")),
                ))
            }
        },
    };
    Ok(MountStat {
        device: unescape(n, t[0])?,
        mountpoint: unescape(n, t[3])?,
        fstype: unescape(n, t[6])?,
        statvers,
        opts: None,
        ops: BTreeMap::new(),
        transports: Vec::new(),
    })
}

/// An `xprt:` line's value: `None` for a transport this parser does not
/// know (its counters are laid out otherwise).
fn parse_xprt(n: usize, rest: &str) -> Result<Option<Transport>, MountStatsError> {
    let mut w = rest.split_whitespace();
    let proto = w.next().unwrap_or("");
    // where `sends` is, and how many counters the two layouts have (older
    // kernels end at bklog_u)
    let (sends_at, short, long) = match proto {
        "tcp" | "rdma" => (5, 10, 13),
        "udp" => (2, 7, 10),
        _ => return Ok(None),
    };
    let v: Vec<u64> = w
        .map(|x| {
            // idle time (tcp) is a signed count of seconds
            x.parse::<u64>()
                .or_else(|_| x.parse::<i64>().map(|i| i.max(0) as u64))
                .map_err(|_| syntax(n, format!("xprt: {x:?} is not a count")))
        })
        .collect::<Result<_, _>>()?;
    // rdma prints its own counters after tcp's first ten
    // (net/sunrpc/xprtrdma/transport.c `xprt_rdma_print_stats`)
    let rdma = proto == "rdma";
    let fits = v.len() == short || v.len() == long || (rdma && v.len() > short);
    if !fits {
        return Err(syntax(
            n,
            format!(
                "xprt: {proto}: expected {short} or {long} counters, got {}",
                v.len()
            ),
        ));
    }
    let at = |i: usize| v[sends_at + i];
    let more = !rdma && v.len() >= long;
    Ok(Some(Transport {
        proto: proto.to_string(),
        sends: at(0),
        recvs: at(1),
        bad_xids: at(2),
        req_u: at(3),
        bklog_u: at(4),
        max_slots: more.then(|| at(5)),
        sending_u: more.then(|| at(6)),
        pending_u: more.then(|| at(7)),
    }))
}

/// Undoes `seq_escape`'s `\ooo` (three octal digits).
fn unescape(n: usize, s: &str) -> Result<String, MountStatsError> {
    if !s.contains('\\') {
        return Ok(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            let oct = b
                .get(i + 1..i + 4)
                .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
            let Some(d) = oct else {
                return Err(syntax(
                    n,
                    format!("bad escape in {s:?} (expected \\ and 3 octal digits)"),
                ));
            };
            let v = d.iter().fold(0u32, |a, c| a * 8 + u32::from(c - b'0'));
            let Ok(v) = u8::try_from(v) else {
                return Err(syntax(n, format!("escape out of range in {s:?}")));
            };
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| syntax(n, format!("{s:?} is not UTF-8 once unescaped")))
}

fn parse_op(n: usize, line: &str) -> Result<(&str, OpStats), MountStatsError> {
    let Some((name, nums)) = line.split_once(':') else {
        return Err(syntax(n, format!("expected `OP: counters`, got {line:?}")));
    };
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(syntax(n, format!("bad operation name {name:?}")));
    }
    let v: Vec<u64> = nums
        .split_whitespace()
        .map(|w| {
            w.parse::<u64>()
                .map_err(|_| syntax(n, format!("{name}: {w:?} is not a count")))
        })
        .collect::<Result<_, _>>()?;
    if v.len() != 8 && v.len() != 9 {
        return Err(syntax(
            n,
            format!("{name}: expected 8 or 9 counters, got {}", v.len()),
        ));
    }
    Ok((
        name,
        OpStats {
            ops: v[0],
            transmissions: v[1],
            timeouts: v[2],
            bytes_sent: v[3],
            bytes_received: v[4],
            queue_ms: v[5],
            rtt_ms: v[6],
            execute_ms: v[7],
            errors: v.get(8).copied(),
        },
    ))
}

impl MountStats {
    /// The last mount on `mountpoint` (the one visible there when mounts
    /// are stacked), if any.
    pub fn mount(&self, mountpoint: &str) -> Option<&MountStat> {
        self.mounts
            .iter()
            .rev()
            .find(|m| m.mountpoint == mountpoint)
    }
}

/// Per RPC procedure, how many more requests `after` counts than `before`
/// (procedures with no new request are left out). An operation missing
/// from `before` counts from 0; a counter lower in `after` is an error (the
/// snapshots are not of the same mount).
pub fn op_deltas(
    before: &MountStat,
    after: &MountStat,
) -> Result<BTreeMap<String, u64>, MountStatsError> {
    let mut d = BTreeMap::new();
    for (name, a) in &after.ops {
        let b = before.ops.get(name).map_or(0, |o| o.ops);
        match a.ops.checked_sub(b) {
            Some(0) => {}
            Some(x) => {
                d.insert(name.clone(), x);
            }
            None => {
                return Err(MountStatsError::CounterWentBack {
                    op: name.clone(),
                    before: b,
                    after: a.ops,
                })
            }
        }
    }
    Ok(d)
}

/// [`op_deltas`] between two whole snapshots, on `mountpoint`; `None` when
/// either snapshot has no mount there.
pub fn snapshot_deltas(
    before: &MountStats,
    after: &MountStats,
    mountpoint: &str,
) -> Result<Option<BTreeMap<String, u64>>, MountStatsError> {
    match (before.mount(mountpoint), after.mount(mountpoint)) {
        (Some(b), Some(a)) => op_deltas(b, a).map(Some),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/self/mountstats` in the lab guest (Debian 12, Linux 6.1.0),
    /// read by `cat` started in /mnt/nfs right after the export was
    /// mounted over NFSv3 with default options (the mounts before the
    /// export's ext4 left out).
    const V3: &str = r#"device /dev/vda mounted on /srv/export with fstype ext4
device nfsd mounted on /proc/fs/nfsd with fstype nfsd
device 127.0.0.1:/srv/export mounted on /mnt/nfs with fstype nfs statvers=1.1
	opts:	rw,vers=3,rsize=131072,wsize=131072,namlen=255,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60,hard,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=127.0.0.1,mountvers=3,mountport=41857,mountproto=udp,local_lock=none
	age:	0
	caps:	caps=0xf,wtmult=4096,dtsize=131072,bsize=0,namlen=255
	sec:	flavor=1,pseudoflavor=1
	events:	0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 
	bytes:	0 0 0 0 0 0 0 0 
	RPC iostats version: 1.1  p/v: 100003/3 (nfs)
	xprt:	tcp 973 1 2 0 0 8 8 0 8 0 2 0 0
	per-op statistics
	        NULL: 1 1 0 44 24 1 0 1 0
	     GETATTR: 2 2 0 168 224 0 0 0 0
	     SETATTR: 0 0 0 0 0 0 0 0 0
	      LOOKUP: 0 0 0 0 0 0 0 0 0
	      ACCESS: 1 1 0 88 120 0 0 0 0
	    READLINK: 0 0 0 0 0 0 0 0 0
	        READ: 0 0 0 0 0 0 0 0 0
	       WRITE: 0 0 0 0 0 0 0 0 0
	      CREATE: 0 0 0 0 0 0 0 0 0
	       MKDIR: 0 0 0 0 0 0 0 0 0
	     SYMLINK: 0 0 0 0 0 0 0 0 0
	       MKNOD: 0 0 0 0 0 0 0 0 0
	      REMOVE: 0 0 0 0 0 0 0 0 0
	       RMDIR: 0 0 0 0 0 0 0 0 0
	      RENAME: 0 0 0 0 0 0 0 0 0
	        LINK: 0 0 0 0 0 0 0 0 0
	     READDIR: 0 0 0 0 0 0 0 0 0
	 READDIRPLUS: 0 0 0 0 0 0 0 0 0
	      FSSTAT: 0 0 0 0 0 0 0 0 0
	      FSINFO: 2 2 0 168 160 0 6 6 0
	    PATHCONF: 1 1 0 84 56 0 0 0 0
	      COMMIT: 0 0 0 0 0 0 0 0 0

"#;

    /// The same after mounting over NFSv4.1.
    const V41: &str = r#"device /dev/vda mounted on /srv/export with fstype ext4
device nfsd mounted on /proc/fs/nfsd with fstype nfsd
device 127.0.0.1:/ mounted on /mnt/nfs with fstype nfs4 statvers=1.1
	opts:	rw,vers=4.1,rsize=131072,wsize=131072,namlen=255,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=127.0.0.1,local_lock=none
	age:	0
	impl_id:	name='',domain='',date='0,0'
	caps:	caps=0xc003c0bf,wtmult=512,dtsize=131072,bsize=0,namlen=255
	nfsv4:	bm0=0xfdffbfff,bm1=0x40fdbe3e,bm2=0x803,acl=0x3,sessions,pnfs=not configured,lease_time=90,lease_expired=0
	sec:	flavor=1,pseudoflavor=1
	events:	0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 
	bytes:	0 0 0 0 0 0 0 0 
	RPC iostats version: 1.1  p/v: 100003/4 (nfs)
	xprt:	tcp 0 0 2 0 0 15 15 0 15 0 2 0 0
	per-op statistics
	        NULL: 1 1 0 44 24 0 0 0 0
	        READ: 0 0 0 0 0 0 0 0 0
	       WRITE: 0 0 0 0 0 0 0 0 0
	      COMMIT: 0 0 0 0 0 0 0 0 0
	        OPEN: 0 0 0 0 0 0 0 0 0
	OPEN_CONFIRM: 0 0 0 0 0 0 0 0 0
	 OPEN_NOATTR: 0 0 0 0 0 0 0 0 0
	OPEN_DOWNGRADE: 0 0 0 0 0 0 0 0 0
	       CLOSE: 0 0 0 0 0 0 0 0 0
	     SETATTR: 0 0 0 0 0 0 0 0 0
	      FSINFO: 2 2 0 312 328 0 0 0 0
	       RENEW: 0 0 0 0 0 0 0 0 0
	 SETCLIENTID: 0 0 0 0 0 0 0 0 0
	SETCLIENTID_CONFIRM: 0 0 0 0 0 0 0 0 0
	        LOCK: 0 0 0 0 0 0 0 0 0
	       LOCKT: 0 0 0 0 0 0 0 0 0
	       LOCKU: 0 0 0 0 0 0 0 0 0
	      ACCESS: 1 1 0 160 168 0 0 0 0
	     GETATTR: 1 1 0 152 240 0 0 0 0
	      LOOKUP: 0 0 0 0 0 0 0 0 0
	 LOOKUP_ROOT: 1 1 0 144 260 0 0 0 0
	      REMOVE: 0 0 0 0 0 0 0 0 0
	      RENAME: 0 0 0 0 0 0 0 0 0
	        LINK: 0 0 0 0 0 0 0 0 0
	     SYMLINK: 0 0 0 0 0 0 0 0 0
	      CREATE: 0 0 0 0 0 0 0 0 0
	    PATHCONF: 1 1 0 148 116 0 0 0 0
	      STATFS: 0 0 0 0 0 0 0 0 0
	    READLINK: 0 0 0 0 0 0 0 0 0
	     READDIR: 0 0 0 0 0 0 0 0 0
	 SERVER_CAPS: 3 3 0 468 504 0 0 0 0
	 DELEGRETURN: 0 0 0 0 0 0 0 0 0
	      GETACL: 0 0 0 0 0 0 0 0 0
	      SETACL: 0 0 0 0 0 0 0 0 0
	FS_LOCATIONS: 0 0 0 0 0 0 0 0 0
	RELEASE_LOCKOWNER: 0 0 0 0 0 0 0 0 0
	     SECINFO: 0 0 0 0 0 0 0 0 0
	FSID_PRESENT: 0 0 0 0 0 0 0 0 0
	 EXCHANGE_ID: 2 2 0 488 200 0 0 0 0
	CREATE_SESSION: 1 1 0 200 124 0 0 0 0
	DESTROY_SESSION: 0 0 0 0 0 0 0 0 0
	    SEQUENCE: 0 0 0 0 0 0 0 0 0
	GET_LEASE_TIME: 0 0 0 0 0 0 0 0 0
	RECLAIM_COMPLETE: 1 1 0 128 88 0 0 0 0
	   LAYOUTGET: 0 0 0 0 0 0 0 0 0
	GETDEVICEINFO: 0 0 0 0 0 0 0 0 0
	LAYOUTCOMMIT: 0 0 0 0 0 0 0 0 0
	LAYOUTRETURN: 0 0 0 0 0 0 0 0 0
	SECINFO_NO_NAME: 1 1 0 132 104 0 0 0 0
	TEST_STATEID: 0 0 0 0 0 0 0 0 0
	FREE_STATEID: 0 0 0 0 0 0 0 0 0
	GETDEVICELIST: 0 0 0 0 0 0 0 0 0
	BIND_CONN_TO_SESSION: 0 0 0 0 0 0 0 0 0
	DESTROY_CLIENTID: 0 0 0 0 0 0 0 0 0
	        SEEK: 0 0 0 0 0 0 0 0 0
	    ALLOCATE: 0 0 0 0 0 0 0 0 0
	  DEALLOCATE: 0 0 0 0 0 0 0 0 0
	 LAYOUTSTATS: 0 0 0 0 0 0 0 0 0
	       CLONE: 0 0 0 0 0 0 0 0 0
	        COPY: 0 0 0 0 0 0 0 0 0
	OFFLOAD_CANCEL: 0 0 0 0 0 0 0 0 0
	     LOOKUPP: 0 0 0 0 0 0 0 0 0
	 LAYOUTERROR: 0 0 0 0 0 0 0 0 0
	 COPY_NOTIFY: 0 0 0 0 0 0 0 0 0
	    GETXATTR: 0 0 0 0 0 0 0 0 0
	    SETXATTR: 0 0 0 0 0 0 0 0 0
	  LISTXATTRS: 0 0 0 0 0 0 0 0 0
	 REMOVEXATTR: 0 0 0 0 0 0 0 0 0
	   READ_PLUS: 0 0 0 0 0 0 0 0 0

"#;

    #[test]
    fn v3_sample() {
        let s = parse(V3).unwrap();
        assert_eq!(s.mounts.len(), 3);
        assert_eq!(s.mounts[0].device, "/dev/vda");
        assert_eq!(s.mounts[0].fstype, "ext4");
        assert!(s.mounts[0].ops.is_empty() && s.mounts[0].opts.is_none());
        let m = s.mount("/mnt/nfs").unwrap();
        assert_eq!(m.device, "127.0.0.1:/srv/export");
        assert_eq!(m.fstype, "nfs");
        assert_eq!(m.statvers.as_deref(), Some("1.1"));
        assert!(m
            .opts
            .as_deref()
            .unwrap()
            .starts_with("rw,vers=3,rsize=131072,"));
        assert_eq!(m.ops.len(), 22);
        assert_eq!(
            m.ops["NULL"],
            OpStats {
                ops: 1,
                transmissions: 1,
                timeouts: 0,
                bytes_sent: 44,
                bytes_received: 24,
                queue_ms: 1,
                rtt_ms: 0,
                execute_ms: 1,
                errors: Some(0),
            }
        );
        assert_eq!(m.ops["FSINFO"].ops, 2);
        assert_eq!(m.ops["FSINFO"].rtt_ms, 6);
        assert_eq!(m.ops["GETATTR"].ops, 2);
        assert_eq!(m.ops["ACCESS"].ops, 1);
        assert_eq!(m.ops["LOOKUP"].ops, 0);
    }

    #[test]
    fn v41_sample() {
        let s = parse(V41).unwrap();
        let m = s.mount("/mnt/nfs").unwrap();
        assert_eq!(
            (m.device.as_str(), m.fstype.as_str()),
            ("127.0.0.1:/", "nfs4")
        );
        assert!(m.opts.as_deref().unwrap().contains(",vers=4.1,"));
        assert_eq!(m.ops["SETCLIENTID_CONFIRM"].ops, 0);
        assert_eq!(m.ops["EXCHANGE_ID"].ops, 2);
        assert_eq!(m.ops["SERVER_CAPS"].ops, 3);
        assert_eq!(m.ops["LOOKUP_ROOT"].ops, 1);
        assert!(s.mount("/nowhere").is_none());
    }

    #[test]
    fn deltas_between_snapshots() {
        let before = parse(V3).unwrap();
        let after_text = V3
            .replace(
                "      LOOKUP: 0 0 0 0 0 0 0 0 0",
                "      LOOKUP: 21 21 0 2000 4000 0 1 2 0",
            )
            .replace("      ACCESS: 1 1 0", "      ACCESS: 2 2 0");
        let after = parse(&after_text).unwrap();
        let d = snapshot_deltas(&before, &after, "/mnt/nfs")
            .unwrap()
            .unwrap();
        let want: BTreeMap<String, u64> =
            [("ACCESS".to_string(), 1), ("LOOKUP".to_string(), 21)].into();
        assert_eq!(d, want);
        assert_eq!(snapshot_deltas(&before, &after, "/x").unwrap(), None);
        // the other way round: counters went back
        let e = snapshot_deltas(&after, &before, "/mnt/nfs").unwrap_err();
        assert!(matches!(e, MountStatsError::CounterWentBack { .. }), "{e}");
        // an operation first listed in `after` counts from zero
        let mut a = after.mount("/mnt/nfs").unwrap().clone();
        a.ops.insert(
            "NEWOP".into(),
            OpStats {
                ops: 4,
                ..OpStats::default()
            },
        );
        assert_eq!(
            op_deltas(before.mount("/mnt/nfs").unwrap(), &a).unwrap()["NEWOP"],
            4
        );
    }

    #[test]
    fn escaped_names_and_old_format() {
        let s = parse(
            "device srv:/a\\040b mounted on /mnt/with\\040space with fstype nfs statvers=1.0\n\
             \tper-op statistics\n\t     GETATTR: 3 3 0 1 2 3 4 5\n",
        )
        .unwrap();
        let m = s.mount("/mnt/with space").unwrap();
        assert_eq!(m.device, "srv:/a b");
        assert_eq!(m.ops["GETATTR"].errors, None);
        assert_eq!(m.ops["GETATTR"].execute_ms, 5);
    }

    #[test]
    fn transports() {
        let m = |lines: &str| {
            let s = parse(&format!(
                "device a mounted on /m with fstype nfs\n{lines}\tper-op statistics\n"
            ))
            .unwrap();
            s.mounts[0].transports.clone()
        };
        // the lab guest's (Linux 6.1): 13 counters
        let t = m("\txprt:\ttcp 0 0 2 0 0 255 255 0 255 0 2 0 0\n");
        assert_eq!(
            t,
            [Transport {
                proto: "tcp".into(),
                sends: 255,
                recvs: 255,
                bad_xids: 0,
                req_u: 255,
                bklog_u: 0,
                max_slots: Some(2),
                sending_u: Some(0),
                pending_u: Some(0),
            }]
        );
        // nconnect: a line per transport; an older tcp line ends at
        // bklog_u; a negative idle time
        let t = m("\txprt:\ttcp 1 0 1 0 -3 10 10 0 12 4\n\txprt:\ttcp 2 0 1 0 0 5 5 0 5 0 1 0 0\n");
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].sends, t[0].req_u, t[0].bklog_u), (10, 12, 4));
        assert_eq!(t[0].max_slots, None);
        assert_eq!(t[1].max_slots, Some(1));
        // udp: sends third; rdma: tcp's first ten, then its own
        let t = m("\txprt:\tudp 800 1 7 7 0 9 2 3 0 0\n");
        assert_eq!(
            (t[0].sends, t[0].req_u, t[0].bklog_u, t[0].max_slots),
            (7, 9, 2, Some(3))
        );
        let t = m("\txprt:\trdma 0 0 1 0 0 6 6 0 6 0 11 12 13 14 15 16 17 18 19 20 21\n");
        assert_eq!((t[0].sends, t[0].bklog_u, t[0].max_slots), (6, 0, None));
        // a transport laid out otherwise: skipped
        assert!(m("\txprt:\tlocal 1 2 3\n").is_empty());
        for bad in ["\txprt:\ttcp 1 2 3\n", "\txprt:\ttcp 0 0 2 0 0 x 1 0 1 0\n"] {
            let e = parse(&format!("device a mounted on /m with fstype nfs\n{bad}")).unwrap_err();
            assert!(
                matches!(&e, MountStatsError::Syntax { line: 2, what } if what.starts_with("xprt: ")),
                "{e}"
            );
        }
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("\tper-op statistics\n", 1, "before any"),
            ("device a mounted on /m with fstype nfs\nbogus\n", 2, "expected `device"),
            ("device a mounted at /m with fstype nfs\n", 1, "mounted on"),
            ("device a mounted on /m with fstype nfs x=1\n", 1, "after the fstype"),
            ("device a\\09 mounted on /m with fstype nfs\n", 1, "escape"),
            ("device a\\777 mounted on /m with fstype nfs\n", 1, "range"),
            ("device a mounted on /m with fstype nfs\n\tper-op statistics\n\tGETATTR: 1 2\n", 3, "8 or 9"),
            ("device a mounted on /m with fstype nfs\n\tper-op statistics\n\tGETATTR: 1 2 3 4 5 6 7 x\n", 3, "not a count"),
            ("device a mounted on /m with fstype nfs\n\tper-op statistics\n\tno colon here\n", 3, "OP: counters"),
            ("device a mounted on /m with fstype nfs\n\tper-op statistics\n\tA B: 1 1 1 1 1 1 1 1\n", 3, "name"),
            (
                "device a mounted on /m with fstype nfs\n\tper-op statistics\n\tX: 1 1 1 1 1 1 1 1\n\tX: 1 1 1 1 1 1 1 1\n",
                4,
                "twice",
            ),
            ("device a mounted on /m with fstype nfs\n\tper-op statistics\n\tX: 99999999999999999999 1 1 1 1 1 1 1\n", 3, "count"),
        ];
        for (text, line, what) in cases {
            match parse(text) {
                Err(MountStatsError::Syntax { line: l, what: w }) => {
                    assert_eq!(l, line, "{text:?}: {w}");
                    assert!(w.contains(what), "{text:?}: {w}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert_eq!(parse("").unwrap(), MountStats::default());
    }
}
