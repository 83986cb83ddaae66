//! The in-process backend of [`Collective`]: `n` ranks as threads of one process,
//! exchanging through a shared hub, so the e2e engine, the exchanges and the ring run in
//! plain `cargo test` without `mpirun` (docs/architecture.md, "Communication").
//!
//! Semantics are MPI's where gradcomp relies on them: every collective is entered by
//! every rank in the same order; results are identical on all ranks; reductions fold
//! the ranks' contributions in rank order (deterministic, like a fixed MPI algorithm);
//! gathers are in rank order. Point-to-point ([`Collective::send_receive`]) is supported
//! in the lockstep pattern gradcomp uses (every rank calls it together, as in a ring
//! step). Each operation copies its send buffer into the hub: the loopback checks
//! behaviour, it is not a performance backend. A rank that panics or aborts poisons the
//! hub, so the other ranks fail instead of waiting forever.

use super::collective::{typed, typed_pair, Buf, BufMut, Collective, Elem, ReduceOp};
use super::World;
use std::any::Any;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Run `f` on `n` ranks (threads), each with its own [`World`]; their results in rank
/// order. A panic on any rank (an assertion, [`Collective::abort`]) is re-raised here
/// after every rank has stopped, the first rank's own failure preferred over the other
/// ranks' "another rank failed".
pub fn run<R, F>(n: usize, f: F) -> Vec<R>
where
    R: Send,
    F: Fn(World) -> R + Sync,
{
    run_counted(n, f).0
}

/// [`run`], also returning how many data-moving collective operations the ranks entered
/// (each counted once, as rank 0 enters it; barriers not counted): tests count the
/// collectives a step really issues.
pub fn run_counted<R, F>(n: usize, f: F) -> (Vec<R>, usize)
where
    R: Send,
    F: Fn(World) -> R + Sync,
{
    assert!(n > 0, "loopback: at least one rank");
    let hub = Arc::new(Hub::new(n));
    let joined: Vec<std::thread::Result<R>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let hub = Arc::clone(&hub);
                let f = &f;
                sc.spawn(move || {
                    let _poison = PoisonOnPanic(Arc::clone(&hub));
                    f(World::new(Box::new(Loopback { hub, rank })))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut out = Vec::with_capacity(n);
    let mut errs = Vec::new();
    for r in joined {
        match r {
            Ok(v) => out.push(v),
            Err(e) => errs.push(e),
        }
    }
    if !errs.is_empty() {
        let own = errs
            .iter()
            .position(|e| !panic_text(e).contains(SECONDARY))
            .unwrap_or(0);
        std::panic::resume_unwind(errs.swap_remove(own));
    }
    (out, hub.ops.load(std::sync::atomic::Ordering::Relaxed))
}

const SECONDARY: &str = "loopback: another rank failed";

fn panic_text(e: &Box<dyn Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// One rank's deposit: its send buffer (a `Vec` of the element type) and, for
/// point-to-point, its destination.
struct Slot {
    data: Option<Box<dyn Any + Send>>,
    dest: usize,
}

struct GateState {
    arrived: usize,
    generation: u64,
    poisoned: bool,
}

/// What the ranks share: one slot each and a barrier that fails when poisoned.
struct Hub {
    n: usize,
    slots: Mutex<Vec<Slot>>,
    gate: Mutex<GateState>,
    cv: Condvar,
    start: Instant,
    /// Data-moving collectives entered (counted by rank 0).
    ops: std::sync::atomic::AtomicUsize,
}

impl Hub {
    fn new(n: usize) -> Hub {
        Hub {
            n,
            slots: Mutex::new(
                (0..n)
                    .map(|_| Slot {
                        data: None,
                        dest: 0,
                    })
                    .collect(),
            ),
            gate: Mutex::new(GateState {
                arrived: 0,
                generation: 0,
                poisoned: false,
            }),
            cv: Condvar::new(),
            start: Instant::now(),
            ops: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Barrier over all ranks; panics when another rank failed.
    fn wait(&self) {
        let mut st = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        if st.poisoned {
            panic!("{SECONDARY}");
        }
        let generation = st.generation;
        st.arrived += 1;
        if st.arrived == self.n {
            st.arrived = 0;
            st.generation += 1;
            self.cv.notify_all();
            return;
        }
        while st.generation == generation && !st.poisoned {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if st.poisoned {
            panic!("{SECONDARY}");
        }
    }

    fn poison(&self) {
        let mut st = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        st.poisoned = true;
        self.cv.notify_all();
    }
}

/// Poisons the hub when its rank's thread unwinds.
struct PoisonOnPanic(Arc<Hub>);

impl Drop for PoisonOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison();
        }
    }
}

/// One rank of a loopback world.
struct Loopback {
    hub: Arc<Hub>,
    rank: usize,
}

/// Rank `r`'s deposit as a `T` slice (the collective's element type).
fn deposit_of<T: Elem>(slots: &[Slot], r: usize) -> &[T] {
    slots[r]
        .data
        .as_ref()
        .and_then(|d| d.downcast_ref::<Vec<T>>())
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("loopback: rank {r} entered a different collective"))
}

impl Loopback {
    /// Deposit `send`, wait for every rank, run `read` over all deposits, wait again (so
    /// no rank overwrites its slot before every rank has read it).
    fn exchange<T: Elem>(&self, send: Option<&[T]>, dest: usize, read: impl FnOnce(&[Slot])) {
        self.deposit(send, dest);
        self.finish(read);
    }

    /// Copy `send` (if any) into this rank's slot.
    fn deposit<T: Elem>(&self, send: Option<&[T]>, dest: usize) {
        if self.rank == 0 {
            self.hub
                .ops
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.hub.slots()[self.rank] = Slot {
            data: send.map(|s| Box::new(s.to_vec()) as Box<dyn Any + Send>),
            dest,
        };
    }

    /// Wait for every rank's deposit, run `read` over them, wait again.
    fn finish(&self, read: impl FnOnce(&[Slot])) {
        self.hub.wait();
        read(&self.hub.slots());
        self.hub.wait();
    }

    fn reduce_into<T: Elem>(&self, slots: &[Slot], recv: &mut [T], op: ReduceOp) {
        recv.copy_from_slice(deposit_of::<T>(slots, 0));
        for r in 1..self.hub.n {
            for (x, y) in recv.iter_mut().zip(deposit_of::<T>(slots, r)) {
                *x = x.reduce(*y, op);
            }
        }
    }

    fn all_reduce_t<T: Elem>(&self, send: &[T], recv: &mut [T], op: ReduceOp) {
        self.exchange(Some(send), 0, |s| self.reduce_into(s, recv, op));
    }

    fn reduce_to_t<T: Elem>(&self, root: usize, send: &[T], recv: Option<&mut [T]>, op: ReduceOp) {
        self.exchange(Some(send), 0, |s| {
            if let Some(recv) = recv.filter(|_| self.rank == root) {
                self.reduce_into(s, recv, op);
            }
        });
    }

    fn gather_v_t<T: Elem>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        counts: Option<&[i32]>,
        displs: Option<&[i32]>,
    ) {
        self.exchange(Some(send), 0, |s| {
            let Some(recv) = recv else { return };
            let mut at = 0usize;
            for r in 0..self.hub.n {
                let d = deposit_of::<T>(s, r);
                let len = counts.map_or(d.len(), |c| c[r] as usize);
                let off = displs.map_or(at, |x| x[r] as usize);
                recv[off..off + len].copy_from_slice(&d[..len]);
                at = off + len;
            }
        });
    }

    fn broadcast_t<T: Elem>(&self, root: usize, buf: &mut [T]) {
        self.deposit((self.rank == root).then_some(&*buf), 0);
        self.finish(|s| {
            if self.rank != root {
                buf.copy_from_slice(deposit_of::<T>(s, root));
            }
        });
    }

    fn send_receive_t<T: Elem>(&self, send: &[T], dest: usize, recv: &mut [T], src: usize) {
        self.exchange(Some(send), dest, |s| {
            assert_eq!(
                s[src].dest, self.rank,
                "loopback: rank {src} sent to {} while rank {} receives from it",
                s[src].dest, self.rank
            );
            recv.copy_from_slice(deposit_of::<T>(s, src));
        });
    }
}

impl Collective for Loopback {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.hub.n
    }

    fn barrier(&self) {
        self.hub.wait();
    }

    fn time_s(&self) -> f64 {
        self.hub.start.elapsed().as_secs_f64()
    }

    fn all_reduce(&self, send: Buf, recv: BufMut, op: ReduceOp) {
        typed_pair!(send, recv, |s, r| self.all_reduce_t(s, r, op))
    }

    fn all_reduce_sum_during(&self, send: &[f32], recv: &mut [f32], during: &mut dyn FnMut()) {
        during();
        self.all_reduce_t(send, recv, ReduceOp::Sum);
    }

    fn all_gather(&self, send: Buf, recv: BufMut) {
        typed_pair!(send, recv, |s, r| self.gather_v_t(s, Some(r), None, None))
    }

    fn all_gather_v(&self, send: Buf, recv: BufMut, counts: &[i32], displs: &[i32]) {
        typed_pair!(send, recv, |s, r| self.gather_v_t(
            s,
            Some(r),
            Some(counts),
            Some(displs)
        ))
    }

    fn reduce_to(&self, root: usize, send: Buf, recv: Option<BufMut>, op: ReduceOp) {
        match recv {
            Some(recv) => typed_pair!(send, recv, |s, r| self.reduce_to_t(root, s, Some(r), op)),
            None => typed!(send, Buf, |s| self.reduce_to_t(root, s, None, op)),
        }
    }

    fn gather_v_to(
        &self,
        root: usize,
        send: Buf,
        recv: Option<BufMut>,
        counts: &[i32],
        displs: &[i32],
    ) {
        let mine = self.rank == root;
        match recv {
            Some(recv) => typed_pair!(send, recv, |s, r| self.gather_v_t(
                s,
                Some(r).filter(|_| mine),
                Some(counts),
                Some(displs)
            )),
            None => typed!(send, Buf, |s| self.gather_v_t(s, None, None, None)),
        }
    }

    fn broadcast(&self, root: usize, buf: BufMut) {
        typed!(buf, BufMut, |b| self.broadcast_t(root, b))
    }

    fn send_receive(&self, send: Buf, dest: usize, recv: BufMut, src: usize) {
        typed_pair!(send, recv, |s, r| self.send_receive_t(s, dest, r, src))
    }

    fn reduce_local_sum_f32(&self, input: &[f32], inout: &mut [f32]) {
        for (o, x) in inout.iter_mut().zip(input) {
            *o += *x;
        }
    }

    fn processor_name(&self) -> String {
        "loopback".into()
    }

    fn abort(&self, code: i32) -> ! {
        self.hub.poison();
        panic!("rank {}: MPI_Abort({code}) in a loopback world", self.rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_match_mpi_semantics_at_1_to_4_ranks() {
        for n in 1..=4 {
            let out = run(n, |w| {
                let r = w.rank;
                let mut s = [0f32; 2];
                w.allreduce_sum_f32(&[r as f32, 1.0], &mut s);
                let mut g = vec![0f32; 2 * n];
                w.allgather_f32(&[r as f32, -(r as f32)], &mut g);
                let mx = w.max_u64(r as u64 * 10);
                let b = w.broadcast_string_from(n - 1, &format!("from {r}"));
                (s, g, mx, b)
            });
            for (s, g, mx, b) in out {
                let sum: f32 = (0..n).map(|r| r as f32).sum();
                assert_eq!(s, [sum, n as f32]);
                let want: Vec<f32> = (0..n).flat_map(|r| [r as f32, -(r as f32)]).collect();
                assert_eq!(g, want);
                assert_eq!(mx, 10 * (n as u64 - 1));
                assert_eq!(b, format!("from {}", n - 1));
            }
        }
    }

    #[test]
    fn a_failing_rank_fails_the_run_instead_of_hanging() {
        let r = std::panic::catch_unwind(|| {
            run(3, |w| {
                if w.rank == 1 {
                    panic!("rank 1 broke");
                }
                w.barrier();
                w.barrier();
            })
        });
        let e = r.expect_err("the run must fail");
        assert!(
            panic_text(&e).contains("rank 1 broke"),
            "{}",
            panic_text(&e)
        );
    }
}
