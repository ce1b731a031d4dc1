//! statstorm-sim: a deterministic discrete-event simulator of the path from
//! request arrival through PHP workers, RPC slots and the NFS server.
//! Knows requests and RPCs only; nothing of strace or PHP.
