//! Hostile input to the simulator and the NFS model (issue 24: 1-4).
