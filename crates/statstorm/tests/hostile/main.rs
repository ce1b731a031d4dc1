//! The hostile suite: every input that once panicked, hung, lost data
//! silently or took memory by the file's size, kept as a regression test
//! with its expected exit code and message. Each module covers one part of
//! the chain; `common` runs the binary with limits (a memory cap set on the
//! child with `prlimit`, never a timed assertion).

mod common;
mod reader;
mod side_files;
mod sim_nfs;
