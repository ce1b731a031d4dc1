//! opcache.file_update_protection (R65) against real php-fpm: the fresh
//! captures (scripts/php-harness, workload `fresh`: the tree with
//! t/d1/m0.php modified just before the first request, OPcache on with
//! revalidate_freq=0, recorded with `strace -v` so the stat structs carry
//! the mtimes). With the default protection (2 s) PHP compiles m0.php in
//! every request until `request_time - 2 >= mtime` (then caches it); with
//! file_update_protection=0 only in the first.

mod common;
use common::*;
use statstorm_trace::op::OpKind;

const M0: &str = "/tmp/statstorm-lab/www/t/d1/m0.php";

/// Opens of m0.php per request.
fn m0_opens(reqs: &[Vec<statstorm_trace::op::Op>]) -> Vec<usize> {
    reqs.iter()
        .map(|ops| {
            ops.iter()
                .filter(|o| o.kind == OpKind::Open && o.path == M0.into())
                .count()
        })
        .collect()
}

#[test]
fn fresh_script_is_compiled_until_the_protection_window_passes() {
    let caps = captures();
    let find = |n: &str| capture(&caps, n);
    let (rf0, fup0) = (find("fpm-fresh-rf0"), find("fpm-fresh-rf0-fup0"));
    let real = |c: &Capture| {
        let t = statstorm_trace::read_path(&c.path).unwrap();
        let r = statstorm_php::request::split_requests(&t.events, &t.strings);
        let w = statstorm_php::lift(&t, &r);
        (m0_opens(&statstorm_php::lift::request_ops(&t, &r)), w)
    };
    let (real_rf0, w) = real(rf0);
    let (real_fup0, _) = real(fup0);
    let mtime = w
        .mtime_at(M0, i64::MAX)
        .expect("m0.php's mtime (strace -v)");
    println!("m0.php mtime {mtime}; opens per request: rf0 {real_rf0:?}, fup0 {real_fup0:?}");
    // the captures show the rule: opened while request_time - 2 < mtime
    let secs: Vec<i64> = w
        .requests
        .iter()
        .map(|r| r.request_time_us.div_euclid(1_000_000))
        .collect();
    let expect = |fup: i64| -> Vec<usize> {
        let mut cached = false;
        secs.iter()
            .map(|&s| {
                if cached {
                    0
                } else {
                    cached = s - fup >= mtime;
                    1
                }
            })
            .collect()
    };
    assert_eq!(
        real_rf0,
        expect(2),
        "the real capture (request seconds {secs:?})"
    );
    assert!(
        real_rf0.iter().sum::<usize>() > 1,
        "m0.php compiled only once: no window to test"
    );
    assert_eq!(real_fup0.iter().sum::<usize>(), 1, "fup0: compiled once");
    // the model, from the rf0 capture, under 2 (as recorded), 0, and 4 s
    for fup in [2u64, 0, 4] {
        let mut cfg = rf0.config.clone();
        cfg.file_update_protection = fup;
        let pred = m0_opens(&statstorm_php::lower(&w, &cfg));
        println!("file_update_protection={fup}: predicted {pred:?}");
        assert_eq!(pred, expect(fup as i64), "file_update_protection={fup}");
    }
}

/// R64 step 3 against real php-fpm: the change captures (workload
/// `change`: t/d1/m1.php given another, past, mtime before request 4,
/// `strace -v`). OPcache's validation finds the new mtime and compiles the
/// script again: with revalidate_freq=0 in request 4, with 2 in the first
/// request after the window (6). The model replays both, and predicts no
/// recompile with validate_timestamps=0.
#[test]
fn changed_script_is_compiled_again_by_its_validation() {
    const M1: &str = "/tmp/statstorm-lab/www/t/d1/m1.php";
    let caps = captures();
    let opens = |reqs: &[Vec<statstorm_trace::op::Op>]| -> Vec<usize> {
        reqs.iter()
            .map(|ops| {
                ops.iter()
                    .filter(|o| o.kind == OpKind::Open && o.path == M1.into())
                    .count()
            })
            .collect()
    };
    for (name, again) in [("fpm-change-rf0", 4usize), ("fpm-change-rf2", 6)] {
        let c = caps
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name}"));
        let t = statstorm_trace::read_path(&c.path).unwrap();
        let r = statstorm_php::request::split_requests(&t.events, &t.strings);
        let w = statstorm_php::lift(&t, &r);
        let real = opens(&statstorm_php::lift::request_ops(&t, &r));
        let mut want = vec![0; real.len()];
        want[0] = 1;
        want[again] = 1;
        assert_eq!(real, want, "{name}: the real capture");
        assert_eq!(
            w.mtimes.get(M1).map(Vec::len),
            Some(2),
            "{name}: two mtimes seen"
        );
        let pred = opens(&statstorm_php::lower(&w, &c.config));
        assert_eq!(pred, real, "{name}: as recorded");
        let mut vt0 = c.config.clone();
        vt0.validate_timestamps = false;
        let pred = opens(&statstorm_php::lower(&w, &vt0));
        println!("{name}: m1.php opens real {real:?}, validate_timestamps=0 {pred:?}");
        assert_eq!(pred.iter().sum::<usize>(), 1, "{name}: vt0 compiles once");
    }
    // across the two: the change is timed by the ctime of the stat that
    // saw it (the touch before request 4), not by that stat (request 6 in
    // rf2), so rf2 -> rf0 recompiles in request 4 and rf0 -> rf2 in 6
    let load_change = |n: &str| {
        let c = caps.iter().find(|c| c.name == n).unwrap();
        let t = statstorm_trace::read_path(&c.path).unwrap();
        let r = statstorm_php::request::split_requests(&t.events, &t.strings);
        (
            c,
            statstorm_php::lift(&t, &r),
            opens(&statstorm_php::lift::request_ops(&t, &r)),
        )
    };
    for (x, y) in [
        ("fpm-change-rf2", "fpm-change-rf0"),
        ("fpm-change-rf0", "fpm-change-rf2"),
    ] {
        let (_, wx, _) = load_change(x);
        let (cy, wy, real) = load_change(y);
        let mut w = wx.clone();
        retime(&mut w, &wy);
        let pred = opens(&statstorm_php::lower(&w, &cy.config));
        println!("{x} -> {y}: m1.php opens predicted {pred:?} real {real:?}");
        assert_eq!(pred, real, "{x} -> {y}: the recompile's request");
    }
}
