//! The NFS client model held to the kernel's counts of the lab fixtures
//! (tests/fixtures/lab, measured by scripts/lab-fixtures with `statstorm
//! lab`: the PHP harness's captures and a deployment through a symbolic
//! link, under option sets the NFS lab fixtures lack), without a guest: each capture is prepared as for the
//! replay, the model run under each run's options in effect, and every
//! request's counts compared with the kernel's within max(5%, 2). The
//! cells that differ at all are printed, so a drift shows before it
//! fails.

use serde_json::Value;
use statstorm_lab::check::{self, Counts, RequestKey};
use statstorm_lab::replay;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn counts(v: &Value) -> Counts {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

#[test]
fn the_model_agrees_with_the_kernel_on_every_lab_fixture() {
    let dir = root().join("tests/fixtures/lab");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    let mut bad = Vec::new();
    let mut runs = 0;
    let (mut cells, mut exact) = (0, 0);
    for f in &files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        assert_eq!(v["schema"], "statstorm.lab/1", "{}", f.display());
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        // the capture beside the JSON, else the PHP harness's (gzip or
        // zstd)
        let php = root().join("tests/fixtures/php");
        let capture = [&dir, &php]
            .iter()
            .flat_map(|d| ["gz", "zst"].map(|x| d.join(format!("{name}.strace.{x}"))))
            .find(|p| p.exists())
            .unwrap_or_else(|| {
                panic!(
                    "{name}: no capture beside the JSON nor in {}",
                    php.display()
                )
            });
        let trace = statstorm_trace::read_path(&capture).unwrap();
        let nfs_root = v["nfs_root"].as_str().unwrap();
        let prepared = replay::prepare(&trace, nfs_root.as_bytes(), b"/mnt/nfs");
        for r in v["runs"].as_array().unwrap() {
            runs += 1;
            let kernel: BTreeMap<RequestKey, Counts> = r["requests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| {
                    let mut k = counts(&q["kernel"]["rpc"]);
                    k.extend(counts(&q["kernel"]["not_compared"]));
                    (
                        (
                            q["pid"].as_u64().unwrap() as u32,
                            q["request"].as_u64().unwrap(),
                        ),
                        k,
                    )
                })
                .collect();
            let model = check::model_requests(
                &trace,
                &prepared,
                nfs_root,
                r["effective_options"].as_str().unwrap(),
                r["delegations"].as_bool().unwrap(),
            )
            .unwrap();
            for q in check::compare(&kernel, &model) {
                let ops: std::collections::BTreeSet<&String> =
                    q.kernel.keys().chain(q.model.keys()).collect();
                for o in ops {
                    let (k, m) = (
                        q.kernel.get(o).copied().unwrap_or(0),
                        q.model.get(o).copied().unwrap_or(0),
                    );
                    cells += 1;
                    if k == m {
                        exact += 1;
                    } else {
                        println!(
                            "{name} vers={} {} pid {} request {}: {o} kernel {k} model {m}",
                            r["vers"], r["options"], q.pid, q.request
                        );
                    }
                }
                if !q.agrees() {
                    bad.push(format!(
                        "{name} vers={} {} pid {} request {}: {:?}",
                        r["vers"], r["options"], q.pid, q.request, q.misses
                    ));
                }
            }
        }
    }
    println!("{runs} runs, {exact} of {cells} cells equal");
    assert!(runs >= 12, "{runs} runs");
    assert!(bad.is_empty(), "outside max(5%, 2):\n{}", bad.join("\n"));
}
