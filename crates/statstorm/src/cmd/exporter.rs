//! `statstorm exporter`: a counts-mode recording (statstorm_record) that
//! never ends, its windows folded into [`Metrics`], served over HTTP at
//! `/metrics` in the Prometheus text format with the NFS client's
//! mountstats. Read-only: no endpoint changes anything.

use anyhow::{Context, Result};
use statstorm_exporter::{Metrics, SelfStats, DEFAULT_MAX_DIRS};
use statstorm_record::recorder::{
    self, Config, CountsConfig, Summary, DEFAULT_MAX_CPU, DEFAULT_MAX_KEYS,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Address to serve /metrics on (another than localhost exposes the
    /// paths of the machine's files to whoever reaches it).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9877")]
    pub listen: String,
    /// Follow every process whose name starts with NAME; new ones (a
    /// restarted pool) are picked up at their first call.
    #[arg(long, value_name = "NAME", default_value = "php-fpm")]
    pub comm: String,
    /// Also follow PID and its descendants (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// How often the kernel's counts are drained into the metrics.
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// The most keys (process x syscall x result x path) the kernel keeps
    /// per interval; calls beyond are counted with result "unknown".
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_KEYS)]
    pub max_keys: u32,
    /// The most distinct `dir` label values; later directories are
    /// counted under "(other)".
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DIRS)]
    pub max_dirs: usize,
    /// The most CPU the exporter's recording may use, in percent of one CPU.
    #[arg(long, value_name = "PERCENT", default_value_t = DEFAULT_MAX_CPU * 100.0)]
    pub max_cpu: f64,
    /// Stop after this long (default: until SIGINT or SIGTERM).
    #[arg(long, value_name = "TIME", value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
}

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn run(a: Args) -> Result<i32> {
    if let Err(e) = recorder::check() {
        errln!("statstorm: error: {e}");
        return Ok(2);
    }
    let cfg = Config {
        pids: a.pids,
        comm: Some(a.comm),
        command: None,
        duration: a.duration.unwrap_or(Duration::MAX),
        ring_bytes: recorder::DEFAULT_RING_BYTES,
        counts: Some(CountsConfig {
            window: a.interval,
            max_keys: a.max_keys,
        }),
        max_cpu: (a.max_cpu != 0.0).then_some(a.max_cpu / 100.0),
    };
    let server = match tiny_http::Server::http(&a.listen) {
        Ok(s) => s,
        Err(e) => {
            errln!("statstorm: error: cannot listen on {}: {e}", a.listen);
            return Ok(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing a signal handler")?;
    }
    let metrics = Arc::new(Mutex::new(Metrics::new(a.max_dirs)));
    // set by the recording's first progress call, made once its programs
    // are attached
    let attached = Arc::new(AtomicBool::new(false));
    let recording = {
        let (metrics, stop, attached) = (metrics.clone(), stop.clone(), attached.clone());
        std::thread::spawn(move || -> Result<Summary, recorder::Error> {
            recorder::record_with(
                &cfg,
                &mut std::io::sink(),
                &mut |w| {
                    if let Ok(mut m) = metrics.lock() {
                        m.fold(w);
                    }
                },
                &stop,
                &mut |_| attached.store(true, Ordering::Relaxed),
            )
        })
    };
    // /metrics is served once the calls are counted: a scrape (or a
    // script that waits for the endpoint, then starts its load) never
    // sees an exporter that is up but not yet counting
    while !attached.load(Ordering::Relaxed) && !recording.is_finished() {
        std::thread::sleep(Duration::from_millis(10));
    }
    errln!(
        "exporter: serving http://{}/metrics; counts drained every {}",
        a.listen,
        humantime::format_duration(a.interval)
    );
    while !recording.is_finished() {
        let req = match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                errln!("statstorm: warning: exporter: {e}");
                continue;
            }
        };
        let get = matches!(
            req.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        );
        let path = req.url().split('?').next().unwrap_or("").to_string();
        let resp = match (get, path.as_str()) {
            (false, _) => {
                tiny_http::Response::from_string("only GET and HEAD\n").with_status_code(405)
            }
            (true, "/metrics") => {
                let nfs = std::fs::read_to_string("/proc/self/mountstats")
                    .ok()
                    .and_then(|t| statstorm_nfs::mountstats::parse(&t).ok());
                let body = match metrics.lock() {
                    Ok(m) => m.render(nfs.as_ref(), &SelfStats::now()),
                    Err(_) => String::new(),
                };
                let ct =
                    tiny_http::Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes())
                        .map_err(|_| anyhow::anyhow!("content type header"))?;
                tiny_http::Response::from_string(body).with_header(ct)
            }
            (true, "/") => {
                tiny_http::Response::from_string("statstorm exporter: metrics at /metrics\n")
            }
            (true, _) => tiny_http::Response::from_string("not found: metrics are at /metrics\n")
                .with_status_code(404),
        };
        let _ = req.respond(resp);
    }
    match recording.join() {
        Ok(Ok(s)) => {
            errln!(
                "exporter: stopped after {:.0} s, {} calls counted",
                s.elapsed.as_secs_f64(),
                s.calls
            );
            Ok(0)
        }
        Ok(Err(
            e @ (recorder::Error::Privilege(_)
            | recorder::Error::Kernel(_)
            | recorder::Error::NoProcess(_)
            | recorder::Error::Comm(_)
            | recorder::Error::Counts
            | recorder::Error::MaxCpu(_)),
        )) => {
            errln!("statstorm: error: {e}");
            Ok(2)
        }
        Ok(Err(e)) => Err(e.into()),
        Err(_) => anyhow::bail!("the recording thread panicked"),
    }
}
