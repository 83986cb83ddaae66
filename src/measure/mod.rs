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
