//! Whether [`super::Compressor::register`] touches the pages of the state it allocates.
//!
//! Benchmarks want the touch at setup (first touch of fresh pages is about 4x slower, and
//! must not land in a timed region). The simulator registers shapes only to read their
//! wire capacities and device kernels, for every method, world size and shape of a sweep:
//! there the touch is all of its cost (page faults and unmapping, four fifths of a large
//! sweep's CPU time). [`untouched_registration`] turns the touch off on this thread while
//! its guard lives; the state is the same zeros either way (`vec!` of zeros maps fresh
//! zero pages).

use std::cell::Cell;

thread_local! {
    static TOUCH: Cell<bool> = const { Cell::new(true) };
}

/// Whether registrations on this thread touch their state (true unless an
/// [`Untouched`] guard lives).
pub fn touching() -> bool {
    TOUCH.with(Cell::get)
}

/// While alive, registrations on this thread allocate without touching; dropping it
/// restores the previous setting.
#[must_use = "the setting lasts as long as the guard"]
pub struct Untouched {
    before: bool,
}

/// Registrations on this thread stop touching their state until the guard drops.
pub fn untouched_registration() -> Untouched {
    let before = TOUCH.with(|t| t.replace(false));
    Untouched { before }
}

impl Drop for Untouched {
    fn drop(&mut self) {
        TOUCH.with(|t| t.set(self.before));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_is_scoped_and_per_thread() {
        assert!(touching());
        {
            let _g = untouched_registration();
            assert!(!touching());
            std::thread::spawn(|| assert!(touching())).join().unwrap();
            {
                let _h = untouched_registration();
                assert!(!touching());
            }
            assert!(!touching());
        }
        assert!(touching());
    }
}
