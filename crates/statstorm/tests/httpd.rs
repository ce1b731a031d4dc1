//! Apache httpd running PHP in-process (mod_php): its requests are split
//! per accepted connection and labelled as such (`httpd_accept`: APR's
//! accept4), not as FastCGI connections; they are lifted and lowered as a
//! pool's (OPcache shared by the server's processes, a realpath cache
//! each). Capture: tests/fixtures/httpd (scripts/php-harness.d/
//! httpd-capture.sh: `apache2 -X` with libphp8.2, OPcache off, one index
//! request then four of the lab's tree.php).

mod common;

use serde_json::Value;

fn json(cmd: &str, args: &[&str]) -> Value {
    let trace = common::fixtures("httpd").join("httpd-tree-nooc.strace.gz");
    let mut all = vec![trace.display().to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    common::json(cmd, &all)
}

#[test]
fn httpd_requests_are_accepted_connections_not_fastcgi() {
    let a = json("analyze", &[]);
    let kinds: Vec<&str> = a["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["httpd_accept"; 5], "{kinds:?}");
    let note = a["request_split"]["note"].as_str().unwrap();
    assert!(note.contains("Apache httpd with mod_php"), "{note}");
    assert!(!note.contains("FastCGI connection ("), "{note}");
}

#[test]
fn httpd_requests_round_trip_under_their_settings() {
    let p = json("predict", &["--from-php", "opcache.enable=0"]);
    let reqs = p["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 5);
    // the four tree.php requests: the first walks the tree, the others
    // find it in the realpath cache; each opens every script
    for (i, r) in reqs.iter().enumerate().skip(1) {
        let opens = r["recorded"]["by_syscall"]["openat"].as_u64().unwrap();
        assert!(opens >= 19, "request {i}: {opens} openat");
    }
    assert_eq!(
        p["before_check"]["requests_beyond"], 0,
        "{}",
        p["before_check"]
    );
}
