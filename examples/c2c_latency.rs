//! Core-to-core cache-line round trip over time: two threads pinned to CPUs A and B
//! pass a counter in one cache line back and forth; for each burst the mean round trip
//! is printed (`t_s round_trip_ns`). On a virtual machine whose vCPUs the host moves
//! between cores that share a last-level cache and cores that do not, the round trip
//! switches between two levels; the likely cause of the two speeds of all-reduce on
//! such a guest (docs/performance.md, "What a 2-core machine can judge").
//!
//! `cargo run --release --example c2c_latency -- SECONDS [CPU_A CPU_B]` (Linux; default
//! CPUs 0 and 1). A burst is 200000 round trips (tens of ms), one every 200 ms.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The line the two threads pass: the counter alone in its 64-byte line.
#[repr(align(64))]
struct Line(AtomicU64);

/// Pin the calling thread to `cpu`.
fn pin(cpu: usize) -> std::io::Result<()> {
    // SAFETY: `set` is a plain bit set, zeroed then filled by the libc macros' functions;
    // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        Err(std::io::Error::other(format!(
            "cannot pin a thread to CPU {cpu}: {e} (give two CPUs this process may run on)"
        )))
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("c2c_latency: {e}");
        std::process::exit(2);
    }
}

fn run() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: usize| -> std::io::Result<usize> {
        args.get(i).map_or(Ok(default), |s| {
            s.parse().map_err(|_| {
                std::io::Error::other(format!(
                    "argument {}: {s:?} is not a whole number; usage: c2c_latency SECONDS [CPU_A CPU_B]",
                    i + 1
                ))
            })
        })
    };
    let (secs, a, b) = (num(0, 10)?, num(1, 0)?, num(2, 1)?);
    // Both CPUs must be usable before the answering thread starts: a thread that cannot
    // pin would leave the measuring one waiting for answers forever.
    pin(b)?;
    pin(a)?;
    const BURST: u64 = 200_000;
    let line = Arc::new(Line(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let pong = {
        let (line, stop) = (Arc::clone(&line), Arc::clone(&stop));
        std::thread::spawn(move || -> std::io::Result<()> {
            pin(b)?;
            // Answer every odd value with the next even one.
            while !stop.load(Ordering::Relaxed) {
                let v = line.0.load(Ordering::Acquire);
                if v % 2 == 1 {
                    line.0.store(v + 1, Ordering::Release);
                }
            }
            Ok(())
        })
    };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs as u64) {
        let start = Instant::now();
        for _ in 0..BURST {
            let v = line.0.load(Ordering::Acquire);
            line.0.store(v + 1, Ordering::Release);
            // No `spin_loop` hint: a pause would add to every round trip.
            while line.0.load(Ordering::Acquire) == v + 1 {}
        }
        let rt_ns = start.elapsed().as_secs_f64() / BURST as f64 * 1e9;
        println!("{:.2} {:.0}", t0.elapsed().as_secs_f64(), rt_ns);
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    pong.join().expect("the answering thread")?;
    Ok(())
}
