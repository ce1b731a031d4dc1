//! statstorm-nfs: which RPCs the Linux NFS client sends for a stream of
//! syscalls, under given mount options. Rules: ../shared/design/SEMANTICS.md
//! parts A and C.
