//! Facts about this host read from the launcher's environment and /proc.

/// Ranks sharing this node (from the launcher; the world size when unknown) and the
/// node's available memory (/proc/meminfo MemAvailable; `None` when unreadable).
pub fn node_memory(world_size: usize) -> (usize, Option<u64>) {
    let here = [
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
        "SLURM_NTASKS_PER_NODE",
    ]
    .iter()
    .find_map(|k| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
    })
    .unwrap_or(world_size);
    let avail = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    });
    (here, avail)
}

/// Peak resident memory of this process (VmHWM), bytes; 0 where /proc is unavailable.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}
