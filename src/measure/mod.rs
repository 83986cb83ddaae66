//! What every layer measures with (the bottom layer above `units`): the stopping rule and
//! statistics (`stats`), the stop-signal flag (`stop`), seeded random streams (`rng`),
//! tensor shapes (`shape`), the synthetic gradients and the memory-bandwidth probe
//! (`tensors`), facts about this host (`host`), huge pages for the large buffers
//! (`pages`: the binary's allocator), and time dilation (`dilation`: the emulated
//! cluster's clock against this machine's). Nothing here communicates.

pub mod dilation;
pub mod host;
pub mod pages;
pub mod rng;
pub mod shape;
pub mod stats;
pub mod stop;
pub mod tensors;

/// `s` seconds as a [`std::time::Duration`] that never panics: NaN and negative values
/// are zero, values past `Duration::MAX` are `Duration::MAX` (`Duration::from_secs_f64`
/// panics on both). Inputs are bounded where they are read; this is the last guard.
pub fn duration_s(s: f64) -> std::time::Duration {
    if s.is_nan() || s <= 0.0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::try_from_secs_f64(s).unwrap_or(std::time::Duration::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn duration_s_saturates_instead_of_panicking() {
        use std::time::Duration;
        assert_eq!(super::duration_s(1.5), Duration::from_millis(1500));
        assert_eq!(super::duration_s(-1.0), Duration::ZERO);
        assert_eq!(super::duration_s(f64::NAN), Duration::ZERO);
        assert_eq!(super::duration_s(1e30), Duration::MAX);
        assert_eq!(super::duration_s(f64::INFINITY), Duration::MAX);
    }
}
