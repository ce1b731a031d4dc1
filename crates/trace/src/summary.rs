//! `strace -c` / `-w` / `-C` summary tables: totals per syscall.
//!
//! ```text
//! % time     seconds  usecs/call     calls    errors syscall
//! ------ ----------- ----------- --------- --------- ----------------
//!  23.51    0.000460          13        34        13 openat
//! ------ ----------- ----------- --------- --------- ----------------
//! 100.00    0.001957          13       144        19 total
//! ```

use serde::Serialize;

/// One row of a summary table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    pub name: String,
    pub calls: u64,
    pub errors: u64,
    /// The `seconds` column (system time with `-c`, wall time with `-w`).
    pub seconds: f64,
}

impl SummaryRow {
    /// Parses `% time, seconds, usecs/call, calls, [errors,] syscall`.
    pub(crate) fn parse(line: &[u8]) -> Option<SummaryRow> {
        let line = std::str::from_utf8(line).ok()?;
        let t: Vec<&str> = line.split_ascii_whitespace().collect();
        let (errors, name) = match t.len() {
            6 => (t[4].parse().ok()?, t[5]),
            5 => (0, t[4]),
            _ => return None,
        };
        let _pct: f64 = t[0].parse().ok()?;
        let seconds: f64 = t[1].parse().ok()?;
        let _usecs: u64 = t[2].parse().ok()?;
        let calls: u64 = t[3].parse().ok()?;
        if !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            return None;
        }
        Some(SummaryRow {
            name: name.to_string(),
            calls,
            errors,
            seconds,
        })
    }
}

/// The table of one input (or the sum over several inputs).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub rows: Vec<SummaryRow>,
    /// The `total` row as printed.
    pub total: Option<SummaryRow>,
}

impl Summary {
    /// Adds another table's rows (several inputs).
    pub fn merge(&mut self, other: &Summary) {
        for r in &other.rows {
            match self.rows.iter_mut().find(|x| x.name == r.name) {
                Some(x) => {
                    x.calls += r.calls;
                    x.errors += r.errors;
                    x.seconds += r.seconds;
                }
                None => self.rows.push(r.clone()),
            }
        }
        match (&mut self.total, &other.total) {
            (Some(t), Some(o)) => {
                t.calls += o.calls;
                t.errors += o.errors;
                t.seconds += o.seconds;
            }
            (None, Some(o)) => self.total = Some(o.clone()),
            _ => {}
        }
    }
}
