//! statstorm's renderers: the engine's typed values put into words for
//! people (text, Markdown) and written as JSON (the values' own
//! serialization, with the sentences of the findings added). Every
//! command's result goes out through one interface, [`Export`]. Shared
//! here: one [`Table`] rendered as aligned text or as a Markdown table, and
//! unit pickers for human output.

pub mod diagnose;
pub mod diagnose_html;
pub mod diagnose_md;
pub mod findings;
pub mod lab;
pub mod predict;
pub mod profile;
pub mod simulate;

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
    /// One self-contained HTML page (diagnose's report).
    Html,
}

impl Format {
    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Markdown => "md",
            Format::Json => "json",
            Format::Html => "html",
        }
    }
}

/// A command's result, written out in one of its formats.
pub trait Export {
    /// The formats it can be written in.
    const FORMATS: &'static [Format];
    /// Writes it in `format` (one of [`Export::FORMATS`]; another is an
    /// `InvalidInput` error).
    fn export(&self, format: Format, out: &mut dyn std::io::Write) -> std::io::Result<()>;
}

/// The error for a format a result cannot be written in.
fn unsupported(what: &str, f: Format, formats: &[Format]) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{what} is written as {}, not {}",
            formats
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(" or "),
            f.name()
        ),
    )
}

/// Column alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table of strings with a header row.
#[derive(Clone, Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns as (header, alignment).
    pub fn new(cols: &[(&str, Align)]) -> Self {
        Table {
            headers: cols.iter().map(|c| c.0.to_string()).collect(),
            align: cols.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        w
    }

    /// Aligned plain text, two spaces between columns.
    pub fn to_text(&self) -> String {
        let w = self.widths();
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = w[i] - c.chars().count();
                match self.align[i] {
                    Align::Left => {
                        s.push_str(c);
                        if i + 1 < cells.len() {
                            s.push_str(&" ".repeat(pad));
                        }
                    }
                    Align::Right => {
                        s.push_str(&" ".repeat(pad));
                        s.push_str(c);
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.headers, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        out
    }

    /// A GitHub-flavoured Markdown table (`|` in cells escaped).
    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let mut out = String::new();
        out.push('|');
        for h in &self.headers {
            out.push_str(&format!(" {} |", esc(h)));
        }
        out.push_str("\n|");
        for a in &self.align {
            out.push_str(match a {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        out.push('\n');
        for r in &self.rows {
            out.push('|');
            for c in r {
                out.push_str(&format!(" {} |", esc(c)));
            }
            out.push('\n');
        }
        out
    }
}

/// A duration in microseconds with a unit picked for people.
pub fn human_us(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{:.2} s", us / 1_000_000.0)
    } else if us >= 1_000.0 {
        format!("{:.2} ms", us / 1_000.0)
    } else {
        format!("{us:.1} us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_markdown() {
        let mut t = Table::new(&[("name", Align::Left), ("calls", Align::Right)]);
        t.row(vec!["lstat".into(), "12".into()]);
        t.row(vec!["a|b".into(), "3".into()]);
        assert_eq!(t.to_text(), "name   calls\nlstat     12\na|b        3\n");
        assert_eq!(
            t.to_markdown(),
            "| name | calls |\n|---|---:|\n| lstat | 12 |\n| a\\|b | 3 |\n"
        );
        assert_eq!(human_us(1500.0), "1.50 ms");
        assert_eq!(human_us(2_500_000.0), "2.50 s");
    }
}
