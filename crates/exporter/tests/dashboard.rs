//! The Grafana dashboard (grafana/statstorm-dashboard.json) is valid JSON
//! and every statstorm metric its queries name is one the exporter
//! writes: a renamed metric cannot leave a panel empty.

use statstorm_exporter::{Metrics, SelfStats};
use statstorm_nfs::mountstats;

#[test]
fn every_metric_the_dashboard_queries_is_exported() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/grafana/statstorm-dashboard.json"
    ))
    .unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).unwrap();
    // a scrape with an NFS mount, so that the NFS families are written
    let ms = mountstats::parse(
        "device 127.0.0.1:/srv mounted on /mnt/nfs with fstype nfs statvers=1.1\n\
         \tRPC iostats version: 1.1  p/v: 100003/3 (nfs)\n\
         \txprt:\ttcp 0 0 2 0 0 255 255 0 300 12 4 0 0\n\
         \tper-op statistics\n\
         \t        NULL: 0 0 0 0 0 0 0 0\n\
         \t     GETATTR: 5 5 0 600 560 1 2 4\n",
    )
    .unwrap();
    let scrape = Metrics::new(10).render(Some(&ms), &SelfStats::default());
    let families: Vec<&str> = scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(families.contains(&"statstorm_nfs_rpc_total"), "{scrape}");
    // the transport's sums, labelled by mount and transport
    assert!(
        scrape.contains(
            "statstorm_nfs_xprt_backlog_total{mountpoint=\"/mnt/nfs\",transport=\"0\",proto=\"tcp\"} 12"
        ),
        "{scrape}"
    );
    assert!(
        scrape.contains(
            "statstorm_nfs_xprt_max_slots{mountpoint=\"/mnt/nfs\",transport=\"0\",proto=\"tcp\"} 4"
        ),
        "{scrape}"
    );
    let panels = d["panels"].as_array().unwrap();
    assert!(panels.len() >= 8);
    let mut named = 0;
    for p in panels {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for (i, _) in expr
                .match_indices("statstorm_")
                .chain(expr.match_indices("process_"))
            {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let family = name.strip_suffix("_bucket").unwrap_or(&name);
                assert!(
                    families.contains(&family),
                    "panel {:?} queries {name}, which the exporter does not write",
                    p["title"]
                );
                named += 1;
            }
        }
    }
    assert!(named >= 15, "{named}");
}
