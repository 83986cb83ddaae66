//! Transparent huge pages for the large buffers (gradients, residuals, outputs, wires,
//! the bandwidth probe): [`HugePageAlloc`], the binary's global allocator.
//!
//! A compression kernel streams arrays of tens to hundreds of megabytes once per step.
//! On 4 KiB pages every page of every stream costs a TLB miss (in a virtual machine a
//! two-level page walk) and the hardware prefetchers stop at each page boundary. Linux
//! backs a region with 2 MiB pages when it is asked to (`madvise(MADV_HUGEPAGE)`) and the
//! system's mode allows it (`/sys/kernel/mm/transparent_hugepage/enabled`: `always` backs
//! every large region anyway, `madvise` only the advised ones, `never` none). This is what
//! glibc's `glibc.malloc.hugetlb=1` tunable and PyTorch's `THP_MEM_ALLOC_ENABLE=1` do.
//! Measured (docs/performance.md, "Compression kernels"): on a KVM guest in `madvise`
//! mode the read probe went from 22-25 to 27-28 GB/s and most kernels ran 10-25% faster.
//!
//! Only allocations of at least [`HUGE_MIN_BYTES`] are advised, and only the whole 2 MiB
//! pages inside them: a small allocation never shares a huge page it did not ask for.
//! `GRADCOMP_HUGE_PAGES=0` in the environment turns the advice off ([`configure`]);
//! run.json records the system's mode and whether gradcomp advised.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Allocations of at least this many bytes are advised (two huge pages: smaller ones
/// could hold at most one whole 2 MiB page).
pub const HUGE_MIN_BYTES: usize = 4 << 20;

/// The transparent huge page size on x86-64 and the usual arm64 configuration.
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Whether large allocations are advised (on unless [`configure`] turned it off).
static ADVISE: AtomicBool = AtomicBool::new(true);

/// The system allocator, with `madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages of every
/// allocation of at least [`HUGE_MIN_BYTES`] (Linux; elsewhere the system allocator
/// alone).
pub struct HugePageAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees (layout, alignment, validity) are this allocator's; `advise` only
// changes the paging advice of memory inside the block `System` just returned.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        let p = unsafe { System.alloc(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed` is `System.alloc_zeroed`'s.
        let p = unsafe { System.alloc_zeroed(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc` is `System.realloc`'s (`ptr` came
        // from `System` with `layout`).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        advise(p, new_size);
        p
    }
}

/// Advise the whole 2 MiB pages of the block `[p, p + len)` just returned by `System`
/// (nothing for a null `p`, a small block, or when advice is off).
#[inline]
fn advise(p: *mut u8, len: usize) {
    if p.is_null() || len < HUGE_MIN_BYTES || !ADVISE.load(Ordering::Relaxed) {
        return;
    }
    let (start, end) = whole_pages(p as usize, len);
    if end > start {
        #[cfg(target_os = "linux")]
        // SAFETY: `[start, end)` lies inside the live block `System` just returned for
        // this allocation (`whole_pages`), so no other allocation's memory is touched;
        // MADV_HUGEPAGE changes neither contents nor mappings (it only marks the range as
        // eligible for huge pages), and its failure (EINVAL on a kernel without THP)
        // leaves the memory as it was, so the result is ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// The whole huge pages inside `[addr, addr + len)`: `(start, end)`, `start >= end`
/// when there is none.
fn whole_pages(addr: usize, len: usize) -> (usize, usize) {
    let start = addr.div_ceil(HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES;
    let end = (addr + len) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    (start, end)
}

/// Read `GRADCOMP_HUGE_PAGES` (`0` turns the advice off; anything else, or unset,
/// leaves it on). Called once at the start of `main`, before any large allocation.
pub fn configure() {
    if std::env::var_os("GRADCOMP_HUGE_PAGES").is_some_and(|v| v == "0") {
        ADVISE.store(false, Ordering::Relaxed);
    }
}

/// Whether large allocations are advised in this process.
pub fn advised() -> bool {
    ADVISE.load(Ordering::Relaxed)
}

/// The system's transparent huge page mode (the bracketed word of
/// `/sys/kernel/mm/transparent_hugepage/enabled`: `always`, `madvise` or `never`); `None`
/// where the file is missing (no THP support, not Linux).
pub fn system_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    mode_of(&s)
}

/// The bracketed word of a THP `enabled` file's line (`always [madvise] never`).
fn mode_of(s: &str) -> Option<String> {
    let open = s.find('[')?;
    let close = open + s[open..].find(']')?;
    Some(s[open + 1..close].to_string())
}

/// Bytes of this process's anonymous memory backed by huge pages now (`AnonHugePages` in
/// /proc/self/smaps_rollup); `None` where unreadable.
pub fn anon_huge_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    s.lines()
        .find(|l| l.starts_with("AnonHugePages:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_pages_lie_inside_the_block() {
        const M: usize = 1 << 20;
        // Aligned block of 4 MiB: both pages.
        assert_eq!(whole_pages(4 * M, 4 * M), (4 * M, 8 * M));
        // Starts 4 KiB past a boundary: the first whole page starts at the next one.
        assert_eq!(whole_pages(2 * M + 4096, 5 * M), (4 * M, 6 * M));
        // 3 MiB straddling one boundary: no whole page.
        let (s, e) = whole_pages(M, 3 * M - 1);
        assert!(s >= e);
    }

    #[test]
    fn mode_is_the_bracketed_word() {
        assert_eq!(
            mode_of("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(mode_of("[always] madvise never").as_deref(), Some("always"));
        assert_eq!(mode_of("always madvise never"), None);
    }
}
