//! One module per subcommand. Each exposes `Args` (clap) and
//! `run(Args) -> anyhow::Result<i32>` returning the exit code.

pub mod analyze;
pub mod demo;
pub mod diagnose;
pub mod exporter;
pub mod lab;
pub mod predict;
pub mod record;
pub mod simulate;

use clap::builder::TypedValueParser as _;
use statstorm_render::{Export, Format};

/// The `--format` parser of a command whose result is `T`: the formats `T`
/// is written in ([`Export::FORMATS`]), by name (text, md, json).
pub fn format_parser<T: Export + 'static>() -> impl clap::builder::TypedValueParser<Value = Format>
{
    clap::builder::PossibleValuesParser::new(T::FORMATS.iter().map(|f| f.name())).map(|s| {
        T::FORMATS
            .iter()
            .copied()
            .find(|f| f.name() == s)
            .unwrap_or(Format::Text)
    })
}
