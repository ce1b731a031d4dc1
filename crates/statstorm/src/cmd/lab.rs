//! `statstorm lab`: a capture replayed through the real Linux NFS client in
//! a throwaway qemu guest (statstorm_lab), each request's RPCs beside the
//! NFS client model's, per option set. Exit 0 when every request agrees,
//! 1 when one does not, 2 when the lab could not run.

use anyhow::{bail, Context, Result};
use statstorm_lab::verify::{self, OptionSet, Verification};
use statstorm_lab::{selftest, Lab, NfsVersion};
use statstorm_nfs::MountOptions;
use statstorm_render::{Export, Format};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The capture (strace text, any format analyze reads; .gz/.zst).
    #[arg(value_name = "CAPTURE", required_unless_present = "self_test")]
    pub captures: Vec<PathBuf>,
    /// The directory the capture's application lives in: the calls under
    /// it are replayed on the guest's NFS mount, the others left out.
    #[arg(
        long = "nfs-root",
        value_name = "DIR",
        required_unless_present = "self_test"
    )]
    pub nfs_root: Option<String>,
    /// The NFS version of every option set that names none.
    #[arg(long, value_name = "3|4.1", default_value = "3")]
    pub vers: String,
    /// Whether the guest's server hands out NFSv4 delegations.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    pub delegations: String,
    /// An option set, as for `mount -o` (repeatable; `vers=` in it
    /// overrides --vers for that set). Default: one set, the defaults.
    #[arg(long = "mount", value_name = "OPTS")]
    pub mounts: Vec<String>,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = super::format_parser::<Verification>())]
    pub format: Format,
    /// Wall-clock limit of one guest boot.
    #[arg(long, value_name = "TIME", default_value = "15m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Check the lab on its built-in scenario (two PHP CLI runs, three
    /// option sets): exit 0 when kernel and model agree.
    #[arg(long, conflicts_with_all = ["captures", "nfs_root", "mounts"])]
    pub self_test: bool,
}

/// One option set from `--mount OPTS` and the defaults of --vers and
/// --delegations; the options are checked as typed (an unknown one names
/// the nearest known).
fn option_set(opts: &str, vers: NfsVersion, delegations: bool) -> Result<OptionSet> {
    let mut version = vers;
    let mut rest = Vec::new();
    for tok in opts.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match tok.split_once('=') {
            Some(("vers" | "nfsvers", v)) => version = v.parse()?,
            _ => rest.push(tok),
        }
    }
    let options = rest.join(",");
    MountOptions::parse_strict(&format!("vers={version},{options}"))
        .with_context(|| format!("--mount {opts:?}"))?;
    Ok(OptionSet {
        version,
        options,
        delegations,
    })
}

pub fn run(a: Args) -> Result<i32> {
    let vers: NfsVersion = a.vers.parse()?;
    let delegations = a.delegations == "on";
    let (trace, root, sets) = if a.self_test {
        let sets = selftest::SETS
            .iter()
            .map(|(v, o)| option_set(o, v.parse()?, true))
            .collect::<Result<Vec<_>>>()?;
        let trace = statstorm_trace::read_bytes("self-test", selftest::capture().as_bytes());
        (trace, selftest::ROOT.to_string(), sets)
    } else {
        let root = a.nfs_root.clone().unwrap_or_default();
        if !root.starts_with('/') {
            bail!("--nfs-root {root:?} is not an absolute path");
        }
        let sets = if a.mounts.is_empty() {
            vec![option_set("", vers, delegations)?]
        } else {
            a.mounts
                .iter()
                .map(|m| option_set(m, vers, delegations))
                .collect::<Result<_>>()?
        };
        let trace = statstorm_trace::read_paths(&a.captures)?;
        (trace, root, sets)
    };
    let replayer = verify::find_replayer()?;
    let say = |m: &str| {
        if std::io::stderr().is_terminal() {
            errln!("statstorm lab: {m}");
        }
    };
    say("preparing the guest (the first run fetches Debian's kernel package)");
    let lab = Lab::prepare(&statstorm_lab::default_cache())?;
    say(&format!(
        "replaying under {} option set(s) in a qemu guest (about 30 s a boot, plus the capture's own time)",
        sets.len()
    ));
    let v = verify::verify(&lab, &trace, &root, &sets, &replayer, a.timeout)?;
    let mut out = std::io::stdout().lock();
    v.export(a.format, &mut out)?;
    Ok(if v.agrees() { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_sets_take_their_version_and_check_their_options() {
        let s = option_set("vers=4.1,actimeo=60", NfsVersion::V3, true).unwrap();
        assert_eq!(s.version, NfsVersion::V4_1);
        assert_eq!(s.options, "actimeo=60");
        let s = option_set("", NfsVersion::V3, false).unwrap();
        assert_eq!((s.version, s.options.as_str()), (NfsVersion::V3, ""));
        let e = format!(
            "{:#}",
            option_set("actimo=60", NfsVersion::V3, true).unwrap_err()
        );
        assert!(e.contains("actimo"), "{e}");
        assert!(option_set("vers=4", NfsVersion::V3, true).is_err());
    }
}
