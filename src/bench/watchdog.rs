//! Per-case time limit (`--case-timeout`): a thread that ends the whole job when one case
//! runs too long, so a stuck collective never holds an allocation until the wall-clock
//! limit. It never calls MPI (only the MPI thread does); exiting the process makes the
//! launcher (mpirun, srun) tear down the other ranks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Armed {
    label: String,
    since: Instant,
}

pub struct Watchdog {
    state: Arc<Mutex<Option<Armed>>>,
}

/// Exit code of a job ended by the watchdog.
pub const EXIT_TIMEOUT: i32 = 3;

impl Watchdog {
    /// Start the watchdog thread with a limit of `limit_s` seconds per case.
    pub fn start(limit_s: f64) -> Watchdog {
        let state: Arc<Mutex<Option<Armed>>> = Arc::new(Mutex::new(None));
        let st = Arc::clone(&state);
        let limit = Duration::from_secs_f64(limit_s);
        // Rank 0 records the end in run.json before it exits; the other ranks give it
        // that long before they end the job themselves.
        let own_limit = if crate_rank() == "0" {
            limit
        } else {
            limit + Duration::from_secs(2)
        };
        std::thread::spawn(move || loop {
            std::thread::sleep(
                Duration::from_millis(100)
                    .min(limit / 4)
                    .max(Duration::from_millis(10)),
            );
            let guard = st.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(a) = guard.as_ref() {
                if a.since.elapsed() > own_limit {
                    eprintln!(
                        "gradcomp: error: case '{}' exceeded --case-timeout {limit_s}s (rank {}); ending the job (finished cases are in the CSV files; rerun with --resume to continue)",
                        a.label,
                        crate_rank()
                    );
                    // Rank 0: run.json says so (the others follow no record).
                    crate::record::meta::record_end(
                        "failed",
                        &format!(
                            "case '{}' exceeded --case-timeout {limit_s}s; the job was ended",
                            a.label
                        ),
                    );
                    std::process::exit(EXIT_TIMEOUT);
                }
            }
        });
        Watchdog { state }
    }

    /// Start timing a case.
    pub fn arm(&self, label: &str) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(Armed {
            label: label.to_string(),
            since: Instant::now(),
        });
    }

    /// The case finished.
    pub fn disarm(&self) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// This process's rank from the launcher's environment (the watchdog may not call MPI).
fn crate_rank() -> String {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok())
    .unwrap_or_else(|| "0".into())
}
