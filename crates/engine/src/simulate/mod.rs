//! `simulate`: scenario files (the PHP vocabulary over the simulator's
//! requests and parameters) and the explanation of a run as typed causes.

pub mod explain;
pub mod scenario;
