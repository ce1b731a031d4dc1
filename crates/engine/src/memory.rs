//! Giving freed memory back to the system between stages.

/// Returns the heap's free memory to the system (glibc's `malloc_trim`).
/// Called where a stage has just freed much of what it built: the lift
/// replaces the templated requests' operations, and what it freed stays
/// in the allocator's main heap, while the stages after it allocate from
/// other threads' heaps (glibc gives each thread its own arena), so
/// without this the process holds both.
pub(crate) fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and only returns free pages of
    // the allocator's own heaps to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
