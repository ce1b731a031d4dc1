//! The lift with its requests kept outside memory
//! (`lift::lift_parts_stored`: each pass reads them back one at a time)
//! gives the workload the lift in memory gives, on every committed
//! capture. Captures: tests/fixtures/php (regenerate: scripts/php-harness).

mod common;
use common::*;
use statstorm_php::workload::{MemoryStore, RequestStore};

#[test]
fn the_stored_lift_is_the_lift_in_memory() {
    let caps = captures();
    assert!(caps.len() > 20, "{} captures", caps.len());
    let mut templated = 0;
    for c in &caps {
        let trace =
            statstorm_trace::read_path(&c.path).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let reqs = statstorm_php::request::split_requests(&trace.events, &trace.strings);
        let real = statstorm_php::lift::request_ops(&trace, &reqs);
        let facts = statstorm_php::lift::TraceFacts::of(&trace, &reqs);
        let (mem, mem_first) = statstorm_php::lift::lift_parts_from(&facts, &reqs, &real);
        let mut stores = 0;
        let (stored, first) =
            statstorm_php::lift::lift_parts_stored(&facts, &reqs, &real, &mut || {
                stores += 1;
                Ok(Box::new(MemoryStore::default()) as Box<dyn RequestStore>)
            })
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(stores, 2, "{}", c.name);
        assert_eq!(first, mem_first, "{}", c.name);
        // none held: each read back without its operations, then with
        // them
        assert!(stored.requests.is_empty(), "{}", c.name);
        assert_eq!(stored.len(), mem.len(), "{}", c.name);
        for (i, m) in mem.requests.iter().enumerate() {
            let got = stored.meta(i).unwrap();
            let want = statstorm_php::WorkRequest {
                ops: Vec::new(),
                ..m.clone()
            };
            assert_eq!(*got, want, "{}: request {i}", c.name);
        }
        assert_eq!(stored.has_cli(), mem.has_cli(), "{}", c.name);
        assert_eq!(stored.has_fpm(), mem.has_fpm(), "{}", c.name);
        assert_eq!(stored.templated(), mem.templated(), "{}", c.name);
        assert_eq!(
            stored.start_order().unwrap(),
            mem.start_order().unwrap(),
            "{}",
            c.name
        );
        assert_eq!(
            stored.compiled_scripts(),
            mem.compiled_scripts(),
            "{}",
            c.name
        );
        let loaded = stored.loaded().unwrap();
        assert_eq!(loaded, mem, "{}", c.name);
        templated += mem.requests.iter().filter(|r| r.from_template).count();
    }
    // (the captures exercise the templates)
    assert!(templated > 0);
}
