//! `statstorm diagnose --format html` opened in headless Chromium: the
//! page is one self-contained file (no URL in it, none requested while it
//! renders), and every plot it holds is drawn: a screenshot shows as many
//! frames of the plots' border colour as the page has
//! `<figure class="plot">`, each with a real drawing inside.
//!
//! Needs Debian's `chromium` (scripts/install-deps installs it); without
//! it the test fails, it is never skipped.

use assert_cmd::Command;
use serde_json::Value;
use statstorm_render::diagnose_html::{FRAME, PLOT_HEIGHT, PLOT_WIDTH};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn lab(file: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/nfs-lab/strace/3/defaults")
        .join(file);
    assert!(p.exists(), "missing lab fixture {}", p.display());
    p
}

/// The Chromium binary; a missing one fails the test.
fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "chromium not found on PATH: this test opens the HTML report in headless Chromium; \
         run scripts/install-deps (as root) to install Debian's chromium package"
    );
}

/// Pages wider than this are cut: the report is laid out for it.
const WIDTH: u32 = 1200;
/// A screenshot's first height; doubled until the page ends above the
/// bottom of the window.
const FIRST_HEIGHT: u32 = 8000;
const MAX_HEIGHT: u32 = 32000;
/// Rows of page background at the bottom of a screenshot that shows the
/// whole page (more than any gap inside the report).
const BOTTOM_ROWS: u32 = 200;
const BACKGROUND: [u8; 3] = [255, 255, 255];

/// One Chromium at a time: the tests of this file run side by side, and
/// two screenshots of pages thousands of pixels high at once on a loaded
/// 2-core machine once ran past the timeout (CI, 2026-12-07: killed after
/// 180 s; the same test alone took 5 s).
static CHROMIUM: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `chromium --headless --screenshot` of `page` at WIDTH x `height`, its
/// NetLog written to `netlog`. A run killed by the timeout is tried once
/// more (said on stderr); a second one fails the test, as any other
/// failure does.
fn screenshot(dir: &Path, page: &Path, height: u32, shot: &Path, netlog: &Path) {
    let _one = CHROMIUM.lock().unwrap_or_else(|e| e.into_inner());
    for attempt in 1..=2 {
        // (no screenshot left from a run before this one)
        let _ = std::fs::remove_file(shot);
        let out = chromium_screenshot(dir, page, height, shot, netlog);
        let killed = {
            use std::os::unix::process::ExitStatusExt;
            out.status.signal() == Some(9)
        };
        if killed && attempt == 1 {
            eprintln!("chromium ran past its timeout; trying once more");
            continue;
        }
        assert!(
            out.status.success() && shot.exists(),
            "chromium failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
}

fn chromium_screenshot(
    dir: &Path,
    page: &Path,
    height: u32,
    shot: &Path,
    netlog: &Path,
) -> std::process::Output {
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            // exact colours and one screenshot pixel per CSS pixel
            "--force-color-profile=srgb",
            "--force-device-scale-factor=1",
            "--run-all-compositor-stages-before-draw",
            // the browser's own background traffic (updates, sign-in,
            // time) kept down; what is left is told apart below
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-extensions",
            // and what is left resolves no host: no packet leaves the
            // machine (the control page's loopback address excepted)
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--window-size={WIDTH},{height}"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg(format!("file://{}", page.display()))
        .timeout(Duration::from_secs(180))
        .output()
        .expect("running chromium")
}

/// An RGB image.
struct Image {
    w: u32,
    h: u32,
    px: Vec<[u8; 3]>,
}

impl Image {
    fn at(&self, x: u32, y: u32) -> [u8; 3] {
        self.px[(y * self.w + x) as usize]
    }
}

fn decode(p: &Path) -> Image {
    let file = std::io::BufReader::new(std::fs::File::open(p).unwrap());
    let limits = png::Limits { bytes: 1 << 30 };
    let mut dec = png::Decoder::new_with_limits(file, limits);
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().expect("a PNG screenshot");
    let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader
        .next_frame(&mut buf)
        .expect("decoding the screenshot");
    let bytes = &buf[..info.buffer_size()];
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        c => panic!("unexpected colour type {c:?}"),
    };
    let px = bytes
        .chunks_exact(channels)
        .map(|c| {
            if channels < 3 {
                [c[0], c[0], c[0]]
            } else {
                [c[0], c[1], c[2]]
            }
        })
        .collect();
    Image {
        w: info.width,
        h: info.height,
        px,
    }
}

/// The last row holding anything but background.
fn last_content_row(img: &Image) -> u32 {
    (0..img.h)
        .rev()
        .find(|&y| (0..img.w).any(|x| img.at(x, y) != BACKGROUND))
        .unwrap_or(0)
}

/// A rectangle: left, top, width, height.
type Rect = (u32, u32, u32, u32);

/// The 4-connected regions of FRAME-coloured pixels, as their bounding
/// boxes with their pixel counts.
fn frame_regions(img: &Image) -> Vec<(Rect, usize)> {
    let mut seen = vec![false; img.px.len()];
    let mut out = Vec::new();
    for start in 0..img.px.len() {
        if seen[start] || img.px[start] != FRAME {
            continue;
        }
        seen[start] = true;
        let mut stack = vec![start];
        let (mut x0, mut y0, mut x1, mut y1, mut n) = (u32::MAX, u32::MAX, 0, 0, 0);
        while let Some(i) = stack.pop() {
            let (x, y) = (i as u32 % img.w, i as u32 / img.w);
            (x0, y0, x1, y1, n) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y), n + 1);
            let mut push = |nx: u32, ny: u32| {
                let j = (ny * img.w + nx) as usize;
                if !seen[j] && img.px[j] == FRAME {
                    seen[j] = true;
                    stack.push(j);
                }
            };
            if x > 0 {
                push(x - 1, y);
            }
            if x + 1 < img.w {
                push(x + 1, y);
            }
            if y > 0 {
                push(x, y - 1);
            }
            if y + 1 < img.h {
                push(x, y + 1);
            }
        }
        out.push(((x0, y0, x1 - x0 + 1, y1 - y0 + 1), n));
    }
    out
}

/// Whether the region's box is a whole 3px frame of the plot size.
fn is_frame(img: &Image, (x, y, w, h): Rect) -> bool {
    if (w, h) != (PLOT_WIDTH + 6, PLOT_HEIGHT + 6) {
        return false;
    }
    (0..h).all(|dy| {
        (0..w).all(|dx| {
            let band = dx < 3 || dy < 3 || dx >= w - 3 || dy >= h - 3;
            !band || img.at(x + dx, y + dy) == FRAME
        })
    })
}

/// What a frame holds: pixels that are not background, and its colours
/// (each with the pixels of it).
fn interior(img: &Image, (x, y, w, h): Rect) -> (usize, BTreeMap<[u8; 3], usize>) {
    let mut colours: BTreeMap<[u8; 3], usize> = BTreeMap::new();
    let mut drawn = 0;
    for yy in y + 3..y + h - 3 {
        for xx in x + 3..x + w - 3 {
            let c = img.at(xx, yy);
            if c != BACKGROUND {
                drawn += 1;
                *colours.entry(c).or_default() += 1;
            }
        }
    }
    (drawn, colours)
}

/// A colour far from grey: a data series, not an axis, grid or text.
fn chromatic(c: &[u8; 3]) -> bool {
    let (lo, hi) = (c.iter().min().unwrap(), c.iter().max().unwrap());
    hi - lo >= 60
}

/// Every `scheme://...` in `s`.
fn urls(s: &str, out: &mut Vec<String>) {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(i) = s[from..].find("://").map(|i| i + from) {
        let start = s[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+.-".contains(c)))
            .map_or(0, |j| j + 1);
        let end = s[i..]
            .find(|c: char| c.is_whitespace() || "\"'<>".contains(c))
            .map_or(s.len(), |j| i + j);
        if start < i && b[start].is_ascii_alphabetic() {
            out.push(s[start..end].to_string());
        }
        from = i + 3;
    }
}

fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// Schemes that fetch nothing from a network.
fn local(url: &str) -> bool {
    ["file:", "data:", "chrome:", "about:", "blob:", "devtools:"]
        .iter()
        .any(|s| url.starts_with(s))
}

/// The URLs a NetLog shows requested for the page: by a document (an
/// initiator that is an origin) or for a file:// page (a network
/// isolation key, anonymization key or cache key naming file://), and
/// that are not local. The browser's own requests (initiator "not an
/// origin", no file:// key: updates, sign-in) are returned apart.
fn page_requests(netlog: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let text = std::fs::read_to_string(netlog).expect("reading the NetLog");
    let log: Value = serde_json::from_str(&text).expect("the NetLog is JSON");
    let events = log["events"].as_array().expect("NetLog events");
    assert!(
        log["constants"]["logEventTypes"].is_object(),
        "NetLog without constants"
    );
    let mut page_sources: HashSet<u64> = HashSet::new();
    let mut by_source: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for e in events {
        let Some(id) = e["source"]["id"].as_u64() else {
            continue;
        };
        let params = &e["params"];
        if params.is_null() {
            continue;
        }
        if let Some(i) = params["initiator"].as_str() {
            if i != "not an origin" {
                page_sources.insert(id);
            }
        }
        let mut ss = Vec::new();
        strings(params, &mut ss);
        for s in ss {
            let mut found = Vec::new();
            urls(s, &mut found);
            if found.iter().any(|u| u.starts_with("file:")) {
                page_sources.insert(id);
            }
            by_source
                .entry(id)
                .or_default()
                .extend(found.into_iter().filter(|u| !local(u)));
        }
    }
    let (mut page, mut browser) = (BTreeSet::new(), BTreeSet::new());
    for (id, us) in by_source {
        if page_sources.contains(&id) {
            page.extend(us);
        } else {
            browser.extend(us);
        }
    }
    (page, browser)
}

#[test]
fn html_report_renders_every_plot_and_requests_nothing() {
    let t0 = Instant::now();
    // a missing browser fails here, first
    chromium();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let report = d.join("report.html");
    let trace = lab("fpm_nooc-series.strace.gz");
    Command::cargo_bin("statstorm")
        .unwrap()
        .arg("diagnose")
        .arg(&trace)
        .args(["--from-mount", "vers=3", "--nfs-root", "/mnt/nfs"])
        .args(["--format", "html", "-o"])
        .arg(&report)
        .assert()
        .success();
    let plots = check_report(d, &report);
    control_page_request_is_seen(d);
    eprintln!(
        "{plots} plots drawn and framed; {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// `statstorm demo`: the built-in case's report, written where asked,
/// every plot drawn, nothing requested.
#[test]
fn demo_writes_a_report_with_every_plot_drawn() {
    chromium();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let report = d.join("demo.html");
    let t0 = Instant::now();
    let out = Command::cargo_bin("statstorm")
        .unwrap()
        .current_dir(d)
        .args(["demo", "-o", "demo.html"])
        .output()
        .unwrap();
    let took = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("OPcache revalidation storm"), "{text}");
    assert!(text.contains(&format!(
        "HTML report: {}",
        report.canonicalize().unwrap().display()
    )));
    let plots = check_report(d, &report);
    // the timeline, the directories, per request, stalls, and each plan's
    // TTFB distribution
    assert!(plots >= 5, "{plots}");
    eprintln!("statstorm demo: {took:.2} s; {plots} plots drawn");
}

/// Checks the report at `report` (in `d`): one self-contained file, every
/// plot framed and drawn in a headless Chromium screenshot, no request for
/// the page in its NetLog. The number of plots.
fn check_report(d: &Path, report: &Path) -> usize {
    let html = std::fs::read_to_string(report).unwrap();

    // one self-contained file: no script, no URL, nothing to fetch
    assert!(html.starts_with("<!DOCTYPE html>"), "not HTML5");
    assert!(html.contains(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
    ));
    // plotters' SVG names its namespace with a URL ("xmlns=http://www.w3.org/2000/svg"):
    // a name, not a request, and the report leaves it out (the HTML parser
    // puts inline <svg> in that namespace anyway), so no URL at all is left
    assert!(
        !html.contains("xmlns="),
        "an SVG namespace attribute was left in"
    );
    let mut in_html = Vec::new();
    urls(&html, &mut in_html);
    assert!(in_html.is_empty(), "URLs in the report: {in_html:?}");
    let lower = html.to_ascii_lowercase();
    for bad in [
        "<script",
        "<link",
        "<img",
        "<iframe",
        "<object",
        "<embed",
        " src=",
        " href=",
        "url(",
        "@import",
        "@font-face",
    ] {
        assert!(!lower.contains(bad), "the report holds {bad:?}");
    }
    let plots = html.matches("<figure class=\"plot\"").count();
    // the timeline, the directories, per request, stalls, and each plan's
    // TTFB distribution
    assert!(plots >= 5, "only {plots} plots in the report");

    // the whole page in one screenshot
    let shot = d.join("shot.png");
    let netlog = d.join("net.json");
    let mut height = FIRST_HEIGHT;
    let img = loop {
        screenshot(d, report, height, &shot, &netlog);
        let img = decode(&shot);
        assert_eq!(img.w, WIDTH, "screenshot width");
        if last_content_row(&img) + BOTTOM_ROWS < img.h {
            break img;
        }
        assert!(
            height < MAX_HEIGHT,
            "the page is taller than {MAX_HEIGHT} px"
        );
        height *= 2;
    };

    // one whole frame per plot, each with a drawing inside, and the
    // frame colour nowhere else
    let regions = frame_regions(&img);
    let (frames, stray): (Vec<_>, Vec<_>) = regions.iter().partition(|(r, _)| is_frame(&img, *r));
    assert!(
        stray.is_empty(),
        "the plots' frame colour is used outside whole frames: {stray:?}"
    );
    assert_eq!(
        frames.len(),
        plots,
        "{} frames in the screenshot, {plots} plots in the report: {frames:?}",
        frames.len()
    );
    for (r, _) in &frames {
        let (drawn, colours) = interior(&img, *r);
        let common: Vec<_> = colours.iter().filter(|(_, &n)| n >= 20).collect();
        let series: Vec<_> = common
            .iter()
            .filter(|(c, &n)| chromatic(c) && n >= 50)
            .collect();
        assert!(
            drawn >= 300 && common.len() >= 2 && !series.is_empty(),
            "the plot framed at {r:?} is not drawn: {drawn} pixels drawn, colours {common:?}"
        );
    }

    // nothing requested for the page but local URLs
    let (page, browser_own) = page_requests(&netlog);
    assert!(page.is_empty(), "URLs requested for the report: {page:?}");
    if !browser_own.is_empty() {
        eprintln!(
            "{} URLs of the browser's own (not the page's), none resolved",
            browser_own.len()
        );
    }

    plots
}

/// The NetLog check sees a page's request: a page with one image from the
/// loopback (nothing listens on the discard port).
fn control_page_request_is_seen(d: &Path) {
    let control = d.join("control.html");
    std::fs::write(
        &control,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>\
         <p>control</p><img src=\"http://127.0.0.1:9/statstorm-probe.png\"></body></html>",
    )
    .unwrap();
    let control_log = d.join("control-net.json");
    screenshot(d, &control, 300, &d.join("control.png"), &control_log);
    let (page, _) = page_requests(&control_log);
    assert!(
        page.iter().any(|u| u.contains("statstorm-probe.png")),
        "the NetLog check missed the control page's request: {page:?}"
    );
}
