//! Evidence readers: configuration and counter files of the recording
//! machine, each read into typed values; bad lines are counted and named
//! by file:line, never a panic.

pub mod fpm;
pub mod nfs_counters;
