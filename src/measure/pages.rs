//! Transparent huge pages for the large buffers (gradients, residuals, outputs, wires,
//! the bandwidth probe): [`HugePageAlloc`], the binary's global allocator.
//!
//! A compression kernel streams arrays of tens to hundreds of megabytes once per step.
//! On 4 KiB pages every page of every stream costs a TLB miss (in a virtual machine a
//! two-level page walk) and the hardware prefetchers stop at each page boundary. Linux
//! backs a region with 2 MiB pages when it is asked to (`madvise(MADV_HUGEPAGE)`) and the
//! system's mode allows it (`/sys/kernel/mm/transparent_hugepage/enabled`: `always` backs
//! every large region anyway, `madvise` only the advised ones, `never` none). This is what
//! glibc's `glibc.malloc.hugetlb=1` tunable and PyTorch's `THP_MEM_ALLOC_ENABLE=1` do
//! (what it gains: docs/performance.md, "Compression kernels").
//!
//! Every allocation of at least [`HUGE_MIN_BYTES`] is a mapping of its own, aligned to
//! 2 MiB and advised *before* any of its pages is touched, and unmapped when freed: its
//! pages are huge from their first fault, a small allocation never shares a huge page it
//! did not ask for, and no advice outlives the block. Advising memory that was already
//! touched does not make it huge: `khugepaged` copies such pages into huge ones later, in
//! the background, at a time of its choosing (as it did with `malloc`, whose aligned
//! `alloc_zeroed` writes its zeros before any advice). `GRADCOMP_HUGE_PAGES=0` in the
//! environment turns the advice off ([`configure`]; the blocks are still mapped apart);
//! run.json records the system's mode and whether gradcomp advised.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Allocations of at least this many bytes are mapped apart and advised (two huge pages:
/// a smaller block spends a larger share of its mapping on alignment).
pub const HUGE_MIN_BYTES: usize = 4 << 20;

/// The transparent huge page size on x86-64 and the usual arm64 configuration.
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Whether large allocations are advised (on unless [`configure`] turned it off).
static ADVISE: AtomicBool = AtomicBool::new(true);

/// The system allocator for blocks under [`HUGE_MIN_BYTES`]; on Linux, larger blocks are
/// anonymous mappings of their own, 2 MiB-aligned and advised (`madvise(MADV_HUGEPAGE)`)
/// before their first touch. Elsewhere the system allocator alone.
pub struct HugePageAlloc;

/// Whether a block of `size` bytes is mapped apart (the same answer at allocation and at
/// release: it depends on the size alone).
#[inline]
fn is_mapped(size: usize) -> bool {
    cfg!(target_os = "linux") && size >= HUGE_MIN_BYTES
}

// SAFETY: blocks under HUGE_MIN_BYTES are `System`'s, with the caller's arguments
// unchanged, so `System`'s guarantees are this allocator's. Larger blocks come from
// `map` (a fresh private anonymous mapping of at least `size` bytes, aligned to
// `max(align, 2 MiB)`, zero-filled by the kernel, owned by nobody else) and go back
// through `unmap` with a layout of the same extent (`realloc` keeps a block in place only
// when its new size rounds to the same whole huge pages), which `is_mapped` routes by
// size alone, so a block is always released by the path that made it.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_mapped(layout.size()) {
            return map(layout);
        }
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_mapped(layout.size()) {
            return map(layout); // a fresh anonymous mapping reads as zeros
        }
        // SAFETY: the caller's contract for `alloc_zeroed` is `System.alloc_zeroed`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_mapped(layout.size()) {
            // SAFETY: a block of this size came from `map` with this layout.
            return unsafe { unmap(ptr, layout) };
        }
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !is_mapped(layout.size()) && !is_mapped(new_size) {
            // SAFETY: the caller's contract for `realloc` is `System.realloc`'s (`ptr`
            // came from `System` with `layout`).
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if is_mapped(layout.size())
            && is_mapped(new_size)
            && mapped_extent(layout).0 == new_size.next_multiple_of(HUGE_PAGE_BYTES)
        {
            // The mapping already holds `new_size` bytes, and `unmap` sees the same extent.
            return ptr;
        }
        // SAFETY: the caller guarantees `new_size`, rounded up to `layout.align()`, does
        // not overflow `isize`, which is what `Layout` checks.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_layout` has a non-zero size (the caller's contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: `ptr` is valid for `layout.size()` bytes and `new` for `new_size`;
            // they are distinct live blocks, so they do not overlap; `ptr` came from this
            // allocator with `layout`, and is not used after it is freed here.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

/// The bytes a mapped block of `layout` occupies (its size, rounded up to the huge page
/// so the mapping's last huge page is whole too) and its alignment (at least 2 MiB).
fn mapped_extent(layout: Layout) -> (usize, usize) {
    let align = layout.align().max(HUGE_PAGE_BYTES);
    (layout.size().next_multiple_of(HUGE_PAGE_BYTES), align)
}

/// A fresh anonymous mapping for `layout`, aligned to [`mapped_extent`]'s alignment (a
/// larger mapping is made and its unaligned head and the tail past the block are given
/// back), advised for huge pages before any page of it is touched. Null on failure.
#[cfg(target_os = "linux")]
fn map(layout: Layout) -> *mut u8 {
    let (len, align) = mapped_extent(layout);
    let Some(over) = len.checked_add(align) else {
        return std::ptr::null_mut();
    };
    // SAFETY: a private anonymous mapping at an address of the kernel's choosing aliases
    // no existing memory; the result is checked below.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    let base = raw as usize;
    let start = base.next_multiple_of(align);
    let head = start - base;
    let tail = over - head - len;
    // SAFETY: `[base, start)` and `[start + len, base + over)` lie inside the mapping just
    // made and outside the block handed out (both page-aligned: `base` is, `align` and
    // `len` are multiples of 2 MiB); nobody else refers to them. MADV_HUGEPAGE on the
    // block changes neither contents nor mappings (it marks the range as eligible for huge
    // pages); its failure (EINVAL on a kernel without THP) leaves 4 KiB pages, so its
    // result is ignored, as are the trims' (a failed trim leaves the slack mapped, and
    // `unmap` releases only the block).
    unsafe {
        if head > 0 {
            libc::munmap(raw, head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        if ADVISE.load(Ordering::Relaxed) {
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    start as *mut u8
}

/// Give a block from [`map`] back to the system.
///
/// # Safety
/// `ptr` came from [`map`] with `layout` and is not used afterwards.
#[cfg(target_os = "linux")]
unsafe fn unmap(ptr: *mut u8, layout: Layout) {
    let (len, _) = mapped_extent(layout);
    // SAFETY: `[ptr, ptr + len)` is exactly the block `map` kept for this layout.
    unsafe {
        libc::munmap(ptr as *mut libc::c_void, len);
    }
}

#[cfg(not(target_os = "linux"))]
fn map(_: Layout) -> *mut u8 {
    unreachable!("is_mapped is false off Linux")
}

#[cfg(not(target_os = "linux"))]
unsafe fn unmap(_: *mut u8, _: Layout) {
    unreachable!("is_mapped is false off Linux")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `AnonHugePages` bytes and the `VmFlags` of the mapping of /proc/self/smaps that
    /// holds `addr`.
    fn smaps_of(addr: usize) -> Option<(u64, String)> {
        let s = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        let mut huge = None;
        for line in s.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = head.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&addr);
                    continue;
                }
            }
            if !inside {
                continue;
            }
            if let Some(v) = line.strip_prefix("AnonHugePages:") {
                huge = v
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
                    .map(|k| k * 1024);
            }
            if let Some(v) = line.strip_prefix("VmFlags:") {
                return Some((huge?, v.to_string()));
            }
        }
        None
    }

    #[test]
    fn mapped_extent_rounds_to_whole_huge_pages() {
        const M: usize = 1 << 20;
        let l = |size, align| Layout::from_size_align(size, align).unwrap();
        assert_eq!(mapped_extent(l(4 * M, 8)), (4 * M, 2 * M));
        assert_eq!(mapped_extent(l(5 * M + 1, 64)), (6 * M, 2 * M));
        assert_eq!(mapped_extent(l(4 * M, 4 * M)), (4 * M, 4 * M));
    }

    /// The allocation pattern of the micro-comm buffers (`alloc_zeroed`, 2 MiB-aligned,
    /// then written): through `System`, whose aligned `alloc_zeroed` writes its zeros
    /// before any advice, the block had no huge page until `khugepaged` collapsed it.
    /// Here it is advised, aligned, reads as zeros, and (where the system's mode honours
    /// the advice) is on huge pages as soon as it is written; realloc keeps the contents
    /// across the small/large boundary both ways.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_large_block_is_advised_before_its_first_touch() {
        const SIZE: usize = 8 << 20;
        let layout = Layout::from_size_align(SIZE, HUGE_PAGE_BYTES).unwrap();
        // SAFETY: non-zero size; freed below with the same layout.
        let p = unsafe { HugePageAlloc.alloc_zeroed(layout) };
        assert!(!p.is_null());
        assert_eq!(p as usize % HUGE_PAGE_BYTES, 0);
        // SAFETY: `p` is valid for SIZE bytes, initialised (zeroed) by the allocator.
        let block = unsafe { std::slice::from_raw_parts_mut(p, SIZE) };
        assert!(block.iter().all(|&b| b == 0));
        block.fill(1);
        let (huge, flags) = smaps_of(p as usize).expect("the block's mapping in smaps");
        if system_mode().is_some() {
            assert!(
                flags.split_whitespace().any(|f| f == "hg"),
                "not advised: {flags}"
            );
        }
        if system_mode().as_deref() == Some("madvise") {
            // All four pages, unless the kernel had no free 2 MiB page at a fault.
            assert!(huge > 0, "no huge page in a block written after its advice");
        }
        // SAFETY: `p` came from this allocator with `layout`; shrunk inside its mapping,
        // grown past it, shrunk under HUGE_MIN_BYTES, grown back over it; each call gives
        // the layout the block has then, and each result replaces the block.
        unsafe {
            // Inside the mapping's whole huge pages: the same block.
            assert_eq!(HugePageAlloc.realloc(p, layout, SIZE - 4096), p);
            let shrunk = Layout::from_size_align(SIZE - 4096, HUGE_PAGE_BYTES).unwrap();
            let q = HugePageAlloc.realloc(p, shrunk, SIZE + 4096);
            assert!(!q.is_null());
            assert!(std::slice::from_raw_parts(q, SIZE - 4096)
                .iter()
                .all(|&b| b == 1));
            let small = Layout::from_size_align(SIZE + 4096, HUGE_PAGE_BYTES).unwrap();
            let r = HugePageAlloc.realloc(q, small, 1 << 20);
            assert!(!r.is_null());
            assert!(std::slice::from_raw_parts(r, 1 << 20)
                .iter()
                .all(|&b| b == 1));
            let tiny = Layout::from_size_align(1 << 20, HUGE_PAGE_BYTES).unwrap();
            let t = HugePageAlloc.realloc(r, tiny, SIZE);
            assert!(!t.is_null());
            assert!(std::slice::from_raw_parts(t, 1 << 20)
                .iter()
                .all(|&b| b == 1));
            HugePageAlloc.dealloc(t, layout);
        }
    }

    /// The boundary is inclusive: a block of exactly HUGE_MIN_BYTES (4 MiB, two huge
    /// pages) is mapped apart, one byte less is `System`'s. On Linux a 4 MiB block with
    /// 8-byte alignment then starts on a 2 MiB boundary (its own aligned mapping), which
    /// `System`'s mmap'd chunks, behind their header, do not.
    #[test]
    fn a_block_of_exactly_four_mib_is_mapped_apart() {
        const FOUR_MIB: usize = 4 * 1024 * 1024;
        let linux = cfg!(target_os = "linux");
        assert!(!is_mapped(FOUR_MIB - 1));
        assert_eq!(is_mapped(FOUR_MIB), linux);
        assert_eq!(is_mapped(FOUR_MIB + 1), linux);
        assert!(!is_mapped(0) && !is_mapped(1 << 20));
        if linux {
            let layout = Layout::from_size_align(FOUR_MIB, 8).unwrap();
            // SAFETY: non-zero size; freed below with the same layout.
            let p = unsafe { HugePageAlloc.alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(
                p as usize % HUGE_PAGE_BYTES,
                0,
                "4 MiB block not on its own mapping"
            );
            // SAFETY: `p` came from this allocator with `layout`.
            unsafe { HugePageAlloc.dealloc(p, layout) };
        }
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
