//! The NFS client's own counters in a diagnosis: read
//! ([`crate::evidence::nfs_counters`]), the simulator's time per RPC
//! calibrated from mountstats' round trips, and the measured RPC mix set
//! beside the one the NFS model gives the recorded calls.

use super::Options;
use crate::evidence::nfs_counters::Measured;
use crate::predict::{PredictOptions, Result};
use serde::Serialize;
use std::collections::BTreeMap;

/// The counters read (`Options::mountstats`, `Options::nfsstat`), and
/// the simulator's time per RPC calibrated from mountstats.
pub(super) fn with_counters(
    opts: &Options,
    p: &mut PredictOptions,
) -> Result<(Vec<Measured>, Option<Calibration>)> {
    use crate::evidence::nfs_counters;
    let bad = |e: nfs_counters::CountersError| crate::predict::Error::Evidence(e.to_string());
    let mut out = Vec::new();
    let mut calibration = None;
    if !opts.mountstats.is_empty() {
        let files: Vec<&std::path::Path> = opts.mountstats.iter().map(|f| f.as_path()).collect();
        let m = nfs_counters::read_mountstats(&files, &p.nfs.nfs_root).map_err(bad)?;
        if let Some(rtt) = m.rtt_ms.filter(|_| m.total >= CALIBRATE_AT) {
            if p.sim.server_latency.is_none() {
                let network = p.sim.rtt.unwrap_or(0.0);
                let server = (rtt - network).max(0.0);
                p.sim.server_latency = Some(server);
                let zero_rtt = p.sim.rtt.is_none();
                if zero_rtt {
                    p.sim.rtt = Some(0.0);
                }
                calibration = Some(Calibration {
                    server_ms: server,
                    rtt_ms: rtt,
                    rpcs: m.total,
                    network_inside: zero_rtt,
                });
            }
        }
        out.push(m);
    }
    if let Some(f) = &opts.nfsstat {
        out.push(nfs_counters::read_nfsstat(f).map_err(bad)?);
    }
    Ok((out, calibration))
}

/// RPCs a mountstats snapshot must count for its mean round trip to
/// stand for the server's time per RPC.
pub const CALIBRATE_AT: u64 = 20;

/// The simulator's time per RPC taken from mountstats.
#[derive(Clone, Copy, Debug)]
pub(super) struct Calibration {
    /// What the simulator's server takes per RPC.
    pub(super) server_ms: f64,
    /// The mean measured round trip.
    pub(super) rtt_ms: f64,
    pub(super) rpcs: u64,
    /// No network round trip was stated: it is inside `server_ms`.
    pub(super) network_inside: bool,
}

/// A share gap (of all the RPCs both tables know) past which the measured
/// mix and the modelled one are said to disagree.
pub const MIX_GAP: f64 = 0.10;

/// Fewer RPCs than this (of the procedures the model knows) are not
/// compared with the model's mix.
pub const MIX_AT: u64 = 50;

/// RPCs waited for a transport slot when, on average over the sends, at
/// least this many tasks were in the transport's backlog
/// ([`statstorm_nfs::mountstats::Transport::bklog_u`]).
pub const SLOT_WAIT: f64 = 0.05;

/// The NFS client's own counters (`--mountstats`, `--nfsstat`) beside
/// the NFS model's RPCs of the recorded calls.
#[derive(Debug, Serialize)]
pub struct Counters {
    pub measured: Measured,
    /// Per procedure the model counts, the two counts and their shares
    /// of the procedures' sum on each side.
    pub mix: Vec<MixRow>,
    /// The procedures whose shares differ by more than [`MIX_GAP`].
    pub disagree: Vec<String>,
    pub compared: Compared,
    /// What the gap points to, when the model can tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<MixHint>,
    /// The transport's backlog reached [`SLOT_WAIT`] per send: RPCs
    /// waited for a slot (mountstats only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub slot_wait: bool,
}

/// A likely cause of a gap between the measured mix and the model's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MixHint {
    /// NFSv4 modelled without read delegations, and the client sent fewer
    /// OPENs than the model: an open under a delegation sends none, so the
    /// server likely grants them (`--delegations on`).
    Delegations,
}

/// Whether the measured mix was compared with the model's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compared {
    Yes,
    /// Fewer than [`MIX_AT`] measured RPCs of the procedures the model
    /// counts.
    TooFew,
    /// The diagnosis models no NFS mount (no RPCs to compare).
    NoNfsModel,
}

/// One procedure of [`Counters::mix`].
#[derive(Debug, Serialize)]
pub struct MixRow {
    pub op: String,
    pub modelled: u64,
    pub measured: u64,
    pub modelled_share: f64,
    pub measured_share: f64,
}

/// `measured` beside `modelled` (the model's RPCs of the recorded calls,
/// by procedure); `delegations_off`: an NFSv4 mount modelled without read
/// delegations.
pub(super) fn counters(
    measured: Measured,
    modelled: &BTreeMap<String, u64>,
    delegations_off: bool,
) -> Counters {
    let sum = |m: &dyn Fn(&str) -> u64| modelled.keys().map(|k| m(k)).sum::<u64>();
    let got = |k: &str| measured.rpcs.get(k).copied().unwrap_or(0);
    let model = |k: &str| modelled.get(k).copied().unwrap_or(0);
    let (m_sum, g_sum) = (sum(&model), sum(&got));
    let share = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    let mix: Vec<MixRow> = modelled
        .keys()
        .map(|k| MixRow {
            op: k.clone(),
            modelled: model(k),
            measured: got(k),
            modelled_share: share(model(k), m_sum),
            measured_share: share(got(k), g_sum),
        })
        .filter(|r| r.modelled > 0 || r.measured > 0)
        .collect();
    let compared = if modelled.is_empty() {
        Compared::NoNfsModel
    } else if g_sum < MIX_AT || m_sum == 0 {
        Compared::TooFew
    } else {
        Compared::Yes
    };
    let disagree = if compared != Compared::Yes {
        Vec::new()
    } else {
        mix.iter()
            .filter(|r| (r.modelled_share - r.measured_share).abs() > MIX_GAP)
            .map(|r| r.op.clone())
            .collect()
    };
    let opens = |share: fn(&MixRow) -> f64| {
        mix.iter()
            .filter(|r| r.op == "OPEN" || r.op == "OPEN_NOATTR")
            .map(share)
            .sum::<f64>()
    };
    let hint = (delegations_off
        && !disagree.is_empty()
        && opens(|r| r.modelled_share) - opens(|r| r.measured_share) > MIX_GAP)
        .then_some(MixHint::Delegations);
    let slot_wait = measured
        .transport
        .as_ref()
        .is_some_and(|t| t.mean_backlog >= SLOT_WAIT);
    Counters {
        measured,
        mix,
        disagree,
        compared,
        hint,
        slot_wait,
    }
}
