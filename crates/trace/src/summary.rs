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
    /// The `seconds` column (system time with `-c`, wall time with `-w`);
    /// without it (`-U`), `usecs/call` times `calls`; `None` when the table
    /// has neither.
    pub seconds: Option<f64>,
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
            seconds: Some(seconds),
        })
    }
}

/// A column of a summary table, by its header word (strace's `-U`
/// column names in parentheses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Col {
    /// `% time` (time-percent)
    Percent,
    /// `seconds` (total-time)
    Seconds,
    /// `shortest` (min-time)
    Shortest,
    /// `longest` (max-time)
    Longest,
    /// `usecs/call` (avg-time)
    UsecsPerCall,
    /// `calls`
    Calls,
    /// `errors`
    Errors,
    /// `syscall` (name)
    Syscall,
}

/// The columns of a table as its header names them (`strace -c -U ...`
/// picks and orders them) and, once its dashed rule is read, where each
/// column lies: rows are cut by position, since an empty `errors` cell is
/// blank.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Layout {
    cols: Vec<Col>,
    /// Byte spans of the rule's dash runs, one per column.
    spans: Vec<(usize, usize)>,
}

impl Layout {
    /// The columns of a header line: every word a column name (`% time`
    /// is one), a `syscall` and a `calls` column among them.
    pub(crate) fn header(line: &[u8]) -> Option<Layout> {
        let line = std::str::from_utf8(line).ok()?;
        let mut cols = Vec::new();
        let mut words = line.split_ascii_whitespace();
        while let Some(w) = words.next() {
            cols.push(match w {
                "%" if words.next() == Some("time") => Col::Percent,
                "seconds" => Col::Seconds,
                "shortest" => Col::Shortest,
                "longest" => Col::Longest,
                "usecs/call" => Col::UsecsPerCall,
                "calls" => Col::Calls,
                "errors" => Col::Errors,
                "syscall" => Col::Syscall,
                _ => return None,
            });
        }
        (cols.contains(&Col::Syscall) && cols.contains(&Col::Calls)).then_some(Layout {
            cols,
            spans: Vec::new(),
        })
    }

    /// Whether the rule under the header was read.
    pub(crate) fn has_spans(&self) -> bool {
        !self.spans.is_empty()
    }

    /// Takes the column spans from the rule under the header (`------
    /// ----------- ...`); false when it does not have one run per column.
    pub(crate) fn rule(&mut self, line: &[u8]) -> bool {
        let mut spans = Vec::new();
        let mut i = 0;
        while i < line.len() {
            if line[i] == b'-' {
                let start = i;
                while i < line.len() && line[i] == b'-' {
                    i += 1;
                }
                spans.push((start, i));
            } else {
                i += 1;
            }
        }
        if spans.len() != self.cols.len() {
            return false;
        }
        self.spans = spans;
        true
    }

    /// A row cut by the rule's spans: each blank-separated word goes to
    /// the column whose span holds its last byte (numbers are right-aligned
    /// and may run left past their span), the syscall name to its column
    /// from where it starts.
    pub(crate) fn row(&self, line: &[u8]) -> Option<SummaryRow> {
        if self.spans.is_empty() {
            return None;
        }
        let line = std::str::from_utf8(line).ok()?;
        let mut cells: Vec<Option<&str>> = vec![None; self.cols.len()];
        let mut pos = 0;
        for w in line.split_ascii_whitespace() {
            let start = pos + line[pos..].find(w)?;
            pos = start + w.len();
            let last = pos - 1;
            let k = self
                .spans
                .iter()
                .position(|&(a, b)| a <= last && last < b)
                .or_else(|| {
                    // Past every span (a long name) or in a gap: the column
                    // that starts last at or before the word.
                    self.spans.iter().rposition(|&(a, _)| a <= start)
                })?;
            if cells[k].is_some() {
                return None;
            }
            cells[k] = Some(w);
        }
        let cell = |c: Col| {
            self.cols
                .iter()
                .position(|&x| x == c)
                .and_then(|k| cells[k])
        };
        let name = cell(Col::Syscall)?;
        if !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            return None;
        }
        let calls: u64 = cell(Col::Calls)?.parse().ok()?;
        let errors: u64 = match cell(Col::Errors) {
            Some(e) => e.parse().ok()?,
            None => 0,
        };
        // Every present numeric cell must read as a number.
        for c in [Col::Percent, Col::Shortest, Col::Longest, Col::UsecsPerCall] {
            if let Some(v) = cell(c) {
                v.parse::<f64>().ok()?;
            }
        }
        let seconds = match (cell(Col::Seconds), cell(Col::UsecsPerCall)) {
            (Some(s), _) => Some(s.parse().ok()?),
            // Without the total, the mean times the calls (the mean is
            // printed in whole microseconds).
            (None, Some(u)) => Some(u.parse::<f64>().ok()? * calls as f64 / 1e6),
            (None, None) => None,
        };
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
    /// Adds another table's rows (several inputs). Counts saturate: two
    /// tables of counts near 2^64 (hostile input, found by fuzzing) give
    /// u64::MAX, not an overflow.
    pub fn merge(&mut self, other: &Summary) {
        for r in &other.rows {
            match self.rows.iter_mut().find(|x| x.name == r.name) {
                Some(x) => {
                    x.calls = x.calls.saturating_add(r.calls);
                    x.errors = x.errors.saturating_add(r.errors);
                    x.seconds = add_secs(x.seconds, r.seconds);
                }
                None => self.rows.push(r.clone()),
            }
        }
        match (&mut self.total, &other.total) {
            (Some(t), Some(o)) => {
                t.calls = t.calls.saturating_add(o.calls);
                t.errors = t.errors.saturating_add(o.errors);
                t.seconds = add_secs(t.seconds, o.seconds);
            }
            (None, Some(o)) => self.total = Some(o.clone()),
            _ => {}
        }
    }
}

/// The sum of two tables' times, known when either is.
fn add_secs(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (None, None) => None,
        _ => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, calls: u64, errors: u64) -> SummaryRow {
        SummaryRow {
            name: name.into(),
            calls,
            errors,
            seconds: None,
        }
    }

    /// Two inputs' tables of counts near 2^64 (found by fuzzing: the merge
    /// overflowed) add up to u64::MAX.
    #[test]
    fn merged_counts_saturate() {
        let big = u64::MAX - 5;
        let t = Summary {
            rows: vec![row("stat", big, big)],
            total: Some(row("total", big, 1)),
        };
        let mut m = t.clone();
        m.merge(&t);
        assert_eq!(m.rows, vec![row("stat", u64::MAX, u64::MAX)]);
        assert_eq!(m.total, Some(row("total", u64::MAX, 2)));
        let mut small = Summary {
            rows: vec![row("stat", 3, 1)],
            total: None,
        };
        small.merge(&Summary {
            rows: vec![row("stat", 4, 0), row("open", 1, 1)],
            total: None,
        });
        assert_eq!(small.rows, vec![row("stat", 7, 1), row("open", 1, 1)]);
    }
}
