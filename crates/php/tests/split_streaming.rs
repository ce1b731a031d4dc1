//! The streaming split (`Splitter::streaming`: a unit let go as its pid
//! moves on, requests by themselves given out, the rest folded per pid)
//! decides as the split that keeps every unit (`Splitter::finish`): the
//! same mode, note and requests, in the same order once sorted, and each
//! unit given out as a request is the plan's request of that unit. Over
//! every committed strace capture and every NFS lab trace, each alone and
//! each directory's traces in one stream (php-fpm workers beside php-cli
//! runs and shells).

use statstorm_php::request::{Closed, RequestInfo, Splitter};
use statstorm_trace::event::Event;
use std::path::{Path, PathBuf};

fn traces(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            traces(&p, out);
        } else if p.to_string_lossy().contains(".strace") {
            out.push(p);
        }
    }
}

/// Both splits of `events`; panics where they differ.
fn same_split(what: &str, events: &[Event], strings: &statstorm_trace::event::Interner) -> usize {
    let mut batch = Splitter::new();
    let mut stream = Splitter::streaming();
    let mut given: Vec<Closed> = Vec::new();
    for ev in events {
        let (ub, sb) = batch.push_slot(ev, strings);
        let (us, ss) = stream.push_slot(ev, strings);
        assert_eq!((ub, sb), (us, ss), "{what}: unit ids and slots");
        let n = given.len();
        given.extend(stream.take_closed());
        // at most the pid's previous unit closes per event
        assert!(given.len() <= n + 1, "{what}: units closed by one event");
    }
    let plan = batch.finish();
    let (sp, rest) = stream.finish_streaming();
    given.extend(rest);
    assert_eq!(sp.mode, plan.mode, "{what}: mode");
    assert_eq!(sp.note, plan.note, "{what}: note");
    assert_eq!(sp.requests, plan.requests.len(), "{what}: requests");
    let mut all: Vec<RequestInfo> = Vec::new();
    for c in &given {
        if let Some(r) = &c.request {
            let i = plan.unit_request[c.unit.0 as usize]
                .unwrap_or_else(|| panic!("{what}: unit {} given out, in no request", c.unit.0));
            assert_eq!(&plan.requests[i as usize], r, "{what}: unit {}", c.unit.0);
            all.push(r.clone());
        }
    }
    // every unit closed once
    let mut ids: Vec<u32> = given.iter().map(|c| c.unit.0).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), given.len(), "{what}: a unit closed twice");
    assert_eq!(ids.len(), plan.unit_request.len(), "{what}: units closed");
    all.extend(sp.joined.iter().map(|(r, _)| r.clone()));
    all.sort_by_key(RequestInfo::order);
    assert_eq!(all, plan.requests, "{what}: requests");
    plan.requests.len()
}

#[test]
fn the_streaming_split_decides_as_the_whole_one() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    traces(&root.join("tests/fixtures"), &mut files);
    let committed = files.len();
    assert!(committed > 50, "committed strace captures: {committed}");
    let lab = root.join("../shared/fixtures/nfs-lab/strace");
    traces(&lab, &mut files);
    assert!(
        files.len() > committed,
        "the NFS lab traces are missing at {}",
        lab.display()
    );
    let mut requests = 0;
    for f in &files {
        let t = statstorm_trace::read_path(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        requests += same_split(&f.display().to_string(), &t.events, &t.strings);
    }
    // each lab block's traces in one stream, in time order
    let mut blocks: Vec<PathBuf> = files[committed..]
        .iter()
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    blocks.dedup();
    for dir in &blocks {
        let mut inputs: Vec<PathBuf> = Vec::new();
        traces(dir, &mut inputs);
        let t = statstorm_trace::read_paths(&inputs)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        requests += same_split(&dir.display().to_string(), &t.events, &t.strings);
    }
    assert!(requests > 1000, "requests compared: {requests}");
}
