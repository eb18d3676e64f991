//! A small deterministic random number generator (SplitMix64), so that a simulation is a pure
//! function of its seed on every platform and every version of the `rand` crates.

/// SplitMix64 (Steele, Lea, Flood 2014): 64 bits of state, passes BigCrush, one multiply-xorshift
/// round per output. Plenty for choosing operations, keys and chunk cuts.
#[derive(Clone, Debug)]
pub(crate) struct SimRng(u64);

impl SimRng {
    /// A generator seeded with `seed` (any value, including 0).
    pub(crate) fn new(seed: u64) -> Self {
        SimRng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// A uniform value in `0..n` (`n > 0`), by multiply-shift (bias below 2^-32 for the small
    /// `n` used here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform value in `lo..=hi`.
    pub(crate) fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// A random version-4 UUID string.
    /// A generator for the objects of `resource` (its plural), distinct per resource for one
    /// `seed`.
    pub(crate) fn for_resource(seed: u64, resource: &str) -> Self {
        SimRng::new(resource.bytes().fold(seed, |h, b| mix(h ^ u64::from(b))))
    }

    pub(crate) fn uuid(&mut self) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0x0fff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }
}

/// The SplitMix64 output function; also a good 64-bit hash for deriving sub-seeds.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
