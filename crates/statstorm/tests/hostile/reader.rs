//! Hostile input to the trace reader (issue 24: 5, 6, 9, 10).
