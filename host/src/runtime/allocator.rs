//! The process's memory tuning: glibc's thresholds fixed once at start-up,
//! free heap memory handed back to the kernel after the rare events that
//! free a lot of it (a plugin loaded, replaced, removed), and the pages of
//! mapped plugin code let go once a plugin is described.

/// Fixes glibc's thresholds for handing memory back, once at start-up.
/// By default glibc raises both as the process frees large blocks: after
/// a compile frees a 30 MiB buffer, blocks up to 32 MiB come from the
/// heap and up to 64 MiB of free space may stay at the top of a thread's
/// arena, which `malloc_trim` does not return for arenas other than the
/// main one. That held ~60 MiB after a large plugin was removed, in some
/// runs and not others (found with smaps: one 64 MiB-aligned arena heap).
/// Fixed values stop the drift: blocks from 1 MiB up are mapped on their
/// own and unmapped when freed, and free space past 128 KiB at an arena's
/// top is returned on the free that makes it.
pub fn configure_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
    }
}

/// Gives freed heap memory back to the kernel. Compiling a large component
/// and listing its tools allocate hundreds of MiB on short-lived threads;
/// glibc keeps what they freed in its per-thread arenas for reuse, so the
/// process would stay at its peak after the plugin is gone. Called after
/// the registry changes (a load, a replacement, a removal): rare events.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own
    // arenas to the kernel; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Unmaps from this process the pages it has touched of `len` bytes at
/// `start`, a read-only private mapping of a file that nobody writes
/// (a compile cache entry: wasmtime refuses images with relocations, so no
/// page of one is ever a private copy). The pages stay in the page cache,
/// and the next access maps them again, with their same contents.
pub(crate) fn release_mapped_file_pages(start: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: MADV_DONTNEED on a private file mapping without private
    // copies only drops page-table entries: the memory reads the same
    // afterwards. The range is a live mapping (its component is held).
    unsafe {
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, len);
}
