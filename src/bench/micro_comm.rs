//! `micro-comm`: one collective at one message size, OSU / nccl-tests style.
//! Measurement only: returns raw per-iteration times (max over ranks, and this rank's
//! own) and the check outcome; statistics and output live elsewhere.

use super::harness::{time_iterations, Compute, Times};
use crate::comm::ring::{ring_scratch_len, sum_merge};
use crate::comm::{mpi_count, World};
use crate::config::Collective;
use crate::error::{Error, Result};
use crate::measure::tensors::test_value;
use crate::record::samples::RankSeries;

/// Raw measurements of one case.
pub struct CommMeasurement {
    /// Per-iteration time (s), max over ranks; for the overlap test the overlapped
    /// iteration (post + compute + wait).
    pub times_s: Vec<f64>,
    /// Overlap test only: per-iteration pure collective and compute times (max over ranks).
    pub overlap: Option<OverlapRaw>,
    /// Number of wrong elements over all ranks, when `--check` was on.
    pub check_errors: Option<u64>,
    /// This rank's own per-iteration times (samples.csv): `time_s` (as `times_s`) and,
    /// for the overlap test, `t_pure_s` and `t_cpu_s`.
    pub local: RankSeries,
}

/// A case's measurement from the timed series of its collective.
fn measured(times: Times, check_errors: Option<u64>) -> CommMeasurement {
    let mut local = RankSeries::default();
    local.push("time_s", &times.local);
    CommMeasurement {
        times_s: times.max,
        overlap: None,
        check_errors,
        local,
    }
}

pub struct OverlapRaw {
    pub pure_s: Vec<f64>,
    pub cpu_s: Vec<f64>,
}

/// A page-aligned f32 buffer. Message buffers are page-aligned like the OSU benchmarks'
/// (posix_memalign): Open MPI's shared-memory all-reduce ran about 2x slower at 16-64 KiB
/// from glibc heap buffers than from one large page-aligned buffer (docs/performance.md,
/// "MPI library effects"), and where the allocator puts a buffer must not decide the
/// result.
pub struct PageBuf {
    ptr: std::ptr::NonNull<f32>,
    len: usize,
}

const PAGE: usize = 4096;
/// Buffers of 2 MiB and more are aligned to 2 MiB so transparent huge pages can back them.
const HUGE: usize = 2 << 20;

fn layout_for(len: usize) -> std::alloc::Layout {
    let bytes = (len.max(1) * 4).next_multiple_of(PAGE);
    let align = if bytes >= HUGE { HUGE } else { PAGE };
    std::alloc::Layout::from_size_align(bytes.next_multiple_of(align), align).expect("page layout")
}

impl PageBuf {
    /// `len` zeroed elements (at least one page), allocated and touched now.
    fn zeroed(len: usize) -> PageBuf {
        let layout = layout_for(len);
        // SAFETY: non-zero size; the pointer is checked for null below.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) } as *mut f32;
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        let mut b = PageBuf { ptr, len };
        b.iter_mut().for_each(|x| *x = 0.0); // touch: zeroed pages may be mapped lazily
        b
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: ptr points to `len` initialised f32 owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: as above, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with exactly this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, layout_for(self.len)) }
    }
}

/// Message buffers of a sweep: page-aligned, grown (never shrunk) outside timed regions;
/// each size uses a prefix, like the OSU benchmarks' single max-sized allocation.
#[derive(Default)]
pub struct CommBuffers {
    send: Option<PageBuf>,
    recv: Option<PageBuf>,
    scratch: Option<PageBuf>,
}

impl CommBuffers {
    /// Allocate for the largest case of a sweep up front (one allocation, as OSU does).
    pub fn reserve(&mut self, world_size: usize, cases: &[crate::config::Case]) {
        let (mut send, mut recv) = (0usize, 0usize);
        for c in cases {
            if let crate::config::Case::MicroComm {
                collective, bytes, ..
            } = c
            {
                let count = (*bytes / 4) as usize;
                send = send.max(count);
                recv = recv.max(if *collective == Collective::Allgather {
                    count * world_size
                } else {
                    count
                });
            }
        }
        if send > 0 {
            Self::grow(&mut self.send, send);
            Self::grow(&mut self.recv, recv);
            Self::grow(&mut self.scratch, ring_scratch_len(send, world_size));
        }
    }

    fn grow(v: &mut Option<PageBuf>, n: usize) -> &mut PageBuf {
        if v.as_ref().map_or(true, |b| b.len < n) {
            *v = Some(PageBuf::zeroed(n));
        }
        v.as_mut().expect("just allocated")
    }
}

/// Expected all-reduce sum of element `i`.
fn expected_sum(i: usize, n: usize) -> f32 {
    (0..n).map(|r| test_value(i, r)).sum()
}

/// Count (over all ranks) of elements of `got` that differ from `expected(i)`;
/// `corrupt` first damages this rank's copy (the self-test of `--check`).
fn count_errors(
    world: &World,
    got: &mut [f32],
    corrupt: bool,
    expected: impl Fn(usize) -> f32,
) -> u64 {
    if corrupt {
        if let Some(x) = got.first_mut() {
            *x += 1.0;
        }
    }
    let bad = got
        .iter()
        .enumerate()
        .filter(|(i, v)| **v != expected(*i))
        .count() as u64;
    world.sum_u64(bad)
}

/// Run one micro-comm case: allocate and touch buffers, warm up, time `iters`
/// iterations, then (optionally) validate the last result.
/// `inject_fault`: test hook proving `--check` catches errors — that rank corrupts the
/// first element of its result before the check.
#[allow(clippy::too_many_arguments)] // the fields of one `[[micro-comm]]` case plus its buffers
pub fn measure(
    world: &World,
    bufs: &mut CommBuffers,
    collective: Collective,
    bytes: u64,
    iters: u64,
    warmup: u64,
    check: bool,
    inject_fault: Option<usize>,
) -> Result<CommMeasurement> {
    let corrupt = inject_fault == Some(world.rank);
    let count = usize::try_from(bytes / 4)
        .map_err(|_| Error::Input(format!("{bytes} bytes is too large for this machine")))?;
    let n = world.size;
    let r = world.rank;
    let recv_len = count
        * if collective == Collective::Allgather {
            n
        } else {
            1
        };
    mpi_count(recv_len, collective.name())?;
    let CommBuffers {
        send,
        recv: recv_all,
        scratch,
    } = bufs;
    let send = &mut CommBuffers::grow(send, count)[..count];
    let recv_all = CommBuffers::grow(recv_all, recv_len);
    let scratch = CommBuffers::grow(scratch, ring_scratch_len(count, n));
    send.iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = test_value(i, r));
    let send = &*send;
    let recv = &mut recv_all[..recv_len];
    recv.iter_mut().for_each(|x| *x = 0.0);
    match collective {
        Collective::Allreduce => {
            let times = time_iterations(
                world,
                iters,
                warmup,
                recv,
                |_| {},
                |recv| {
                    world.allreduce_sum_f32(send, &mut recv[..]);
                    Ok(())
                },
            )?;
            let check_errors =
                check.then(|| count_errors(world, recv, corrupt, |i| expected_sum(i, n)));
            Ok(measured(times, check_errors))
        }
        Collective::Allgather => {
            let times = time_iterations(
                world,
                iters,
                warmup,
                recv,
                |_| {},
                |recv| {
                    world.allgather_f32(send, &mut recv[..]);
                    Ok(())
                },
            )?;
            let check_errors = check
                .then(|| count_errors(world, recv, corrupt, |j| test_value(j % count, j / count)));
            Ok(measured(times, check_errors))
        }
        Collective::RingAllreduce => {
            let mut state = (recv, &mut scratch[..]);
            // In place: the input is restored before every iteration, outside the timed region.
            let times = time_iterations(
                world,
                iters,
                warmup,
                &mut state,
                |(data, _)| data.copy_from_slice(send),
                |(data, scratch)| world.ring_allreduce(data, scratch, sum_merge),
            )?;
            let check_errors =
                check.then(|| count_errors(world, state.0, corrupt, |i| expected_sum(i, n)));
            Ok(measured(times, check_errors))
        }
        Collective::IallreduceOverlap => {
            measure_overlap(world, send, recv, iters, warmup, check, corrupt)
        }
    }
}

/// OSU/IMB overlap test of MPI_Iallreduce: time the pure collective (post + wait), then
/// post it, run calibrated compute of the same length (t_cpu ~= t_pure), and wait.
/// OSU overlap % = 100 * (1 - (t_overall - t_cpu) / t_pure); IMB overlap % =
/// 100 * (t_pure + t_cpu - t_overall) / min(t_pure, t_cpu) (computed by the caller).
fn measure_overlap(
    world: &World,
    send: &[f32],
    recv: &mut [f32],
    iters: u64,
    warmup: u64,
    check: bool,
    corrupt: bool,
) -> Result<CommMeasurement> {
    let n = world.size;
    let pure = time_iterations(
        world,
        iters,
        warmup,
        recv,
        |_| {},
        |recv| {
            world.iallreduce_sum_f32_during(send, &mut recv[..], || {});
            Ok(())
        },
    )?;
    // Target compute time: the median pure collective time (identical on all ranks).
    let mut sorted = pure.max.clone();
    sorted.sort_by(f64::total_cmp);
    let target_s = sorted[sorted.len() / 2];
    let mut compute = Compute::calibrate(target_s);
    let iters_total = (warmup + iters) as usize;
    let mut overall_s = Vec::with_capacity(iters_total);
    let mut cpu_s = Vec::with_capacity(iters_total);
    recv.iter_mut().for_each(|x| *x = 0.0);
    for i in 0..warmup + iters {
        world.sync_or_stop()?;
        let t0 = world.time();
        let (c0, c1) = world.iallreduce_sum_f32_during(send, &mut recv[..], || {
            let c0 = world.time();
            compute.run();
            (c0, world.time())
        });
        let t1 = world.time();
        if i >= warmup {
            overall_s.push(t1 - t0);
            cpu_s.push(c1 - c0);
        }
    }
    let (overall, cpu) = (Times::reduce(world, overall_s), Times::reduce(world, cpu_s));
    let check_errors = check.then(|| count_errors(world, recv, corrupt, |i| expected_sum(i, n)));
    let mut m = measured(overall, check_errors);
    m.local.push("t_pure_s", &pure.local);
    m.local.push("t_cpu_s", &cpu.local);
    m.overlap = Some(OverlapRaw {
        pure_s: pure.max,
        cpu_s: cpu.max,
    });
    Ok(m)
}
