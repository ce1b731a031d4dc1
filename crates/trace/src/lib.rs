//! statstorm-trace: bytes of an strace log in, typed syscall events out.
//!
//! This crate knows strace's text formats and nothing of PHP, NFS or printing.
//! The parser core works on `&[u8]`; a slice path and a reader path feed it
//! and push records into a [`Sink`](crate::event) (see `parse`).
//!
//! [`op`] turns events into [`op::Op`]s, the normalized filesystem calls that
//! the PHP and NFS models exchange.

pub mod event;
pub mod op;
pub mod request;

pub use event::{Errno, Event, Flags, Interner, Kind, PathId, Ret};
