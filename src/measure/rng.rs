//! Seeded random streams: the same arguments give the same stream on every rank.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// Seeded RNG for (run seed, step, tensor id, stream). `stream` separates independent
/// uses (e.g. the rank for per-worker noise, or a purpose tag); the same arguments give
/// the same stream on every worker (docs/methods.md, "The `Compressor` contract": never
/// thread-local entropy).
pub fn rng_for(seed: u64, step: u64, tensor: usize, stream: u64) -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(mix(mix(mix(seed, step), tensor as u64), stream))
}

/// SplitMix64-style mixing of two words (Steele et al., 2014).
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: u64 = rng_for(1, 2, 3, 4).gen();
        let b: u64 = rng_for(1, 2, 3, 4).gen();
        let c: u64 = rng_for(1, 2, 3, 5).gen();
        let d: u64 = rng_for(1, 3, 3, 4).gen();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }
}
