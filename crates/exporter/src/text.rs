//! The Prometheus text exposition format (version 0.0.4): `# HELP`,
//! `# TYPE`, then one sample per line, label values escaped.
//!
//! Written here rather than with a client library: the metrics are
//! folded from the recorder's windows and mountstats, not updated in
//! place, and the one Rust client made for it writes OpenMetrics, whose
//! counter families are named without `_total` — `promtool check
//! metrics` (Debian 12's prometheus 2.42) rejects such a scrape.

use std::fmt::Write as _;

/// A metric family's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Writes families into one exposition.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A sample value: integers as integers, the rest as Rust prints an
/// f64 (shortest form that reads back the same).
fn value(v: f64, out: &mut String) {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        let _ = write!(out, "{v}");
    }
}

impl Exposition {
    /// Starts a family: its help line and type.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(k);
                self.out.push_str("=\"");
                escape(val, &mut self.out);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        value(v, &mut self.out);
        self.out.push('\n');
    }

    /// A histogram's samples from per-bucket counts: `buckets` are
    /// (upper bound, count in the bucket alone), in increasing order, the
    /// last one `+Inf`.
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        buckets: &[(f64, u64)],
        sum: f64,
    ) {
        let mut cum = 0u64;
        let bucket = format!("{name}_bucket");
        for &(le, n) in buckets {
            cum += n;
            let mut le_s = String::new();
            value(le, &mut le_s);
            let mut l: Vec<(&str, &str)> = labels.to_vec();
            l.push(("le", &le_s));
            self.sample(&bucket, &l, cum as f64);
        }
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, cum as f64);
    }

    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_escapes() {
        let mut e = Exposition::default();
        e.family("x_total", Kind::Counter, "Calls.\nSecond line.");
        e.sample("x_total", &[("dir", "/a\"b\\c\nd"), ("r", "ok")], 3.0);
        e.sample("x_total", &[], 0.25);
        e.family("h", Kind::Histogram, "H.");
        e.histogram(
            "h",
            &[("class", "stat")],
            &[(0.0, 1), (1.0, 2), (f64::INFINITY, 3)],
            9.0,
        );
        assert_eq!(
            e.finish(),
            "# HELP x_total Calls.\\nSecond line.\n# TYPE x_total counter\n\
             x_total{dir=\"/a\\\"b\\\\c\\nd\",r=\"ok\"} 3\n\
             x_total 0.25\n\
             # HELP h H.\n# TYPE h histogram\n\
             h_bucket{class=\"stat\",le=\"0\"} 1\n\
             h_bucket{class=\"stat\",le=\"1\"} 3\n\
             h_bucket{class=\"stat\",le=\"+Inf\"} 6\n\
             h_sum{class=\"stat\"} 9\n\
             h_count{class=\"stat\"} 6\n"
        );
    }
}
