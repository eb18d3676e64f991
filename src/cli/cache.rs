//! `--compression` of `informer watch` and `informer flood`, and the cache figures both report
//! (bytes per cached object, compression ratio, resident set).

use informer::informer::{CacheStats, Compression};

/// How the command's informer keeps its cached objects ([`Compression`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CompressionArg {
    /// As received.
    #[default]
    None,
    /// zstd level 3 with a dictionary trained from the first list, once the informer is idle.
    Zstd,
}

impl CompressionArg {
    pub(crate) fn config(self) -> Compression {
        match self {
            CompressionArg::None => Compression::None,
            CompressionArg::Zstd => Compression::zstd(),
        }
    }
}

/// The cache figures of a report (`cache` in `--json` output).
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct CacheReport {
    pub(crate) compression: &'static str,
    pub(crate) objects: usize,
    pub(crate) compressed_objects: usize,
    /// Received bytes per cached object (the objects' own bytes, decompressed).
    pub(crate) raw_bytes_per_object: f64,
    /// What those bytes take in the cache per object (compressed frames or received bytes).
    pub(crate) cached_bytes_per_object: f64,
    /// `cached ÷ raw`.
    pub(crate) ratio: f64,
    pub(crate) dictionary_bytes: usize,
    /// `VmRSS` now and `VmHWM` (peak), where `/proc/self/status` is readable.
    pub(crate) rss_bytes: Option<u64>,
    pub(crate) peak_rss_bytes: Option<u64>,
    /// `rss_bytes ÷ objects`: what a cached object costs the whole process.
    pub(crate) rss_bytes_per_object: Option<f64>,
}

impl CacheReport {
    pub(crate) fn new(compression: CompressionArg, s: &CacheStats) -> CacheReport {
        let per = |b: u64| b as f64 / (s.objects.max(1)) as f64;
        let rss = proc_status_bytes("VmRSS:");
        CacheReport {
            compression: match compression {
                CompressionArg::None => "none",
                CompressionArg::Zstd => "zstd",
            },
            objects: s.objects,
            compressed_objects: s.compressed,
            raw_bytes_per_object: per(s.raw_bytes),
            cached_bytes_per_object: per(s.cached_bytes),
            ratio: s.ratio(),
            dictionary_bytes: s.dictionary_bytes,
            rss_bytes: rss,
            peak_rss_bytes: proc_status_bytes("VmHWM:"),
            rss_bytes_per_object: rss.filter(|_| s.objects > 0).map(per),
        }
    }

    /// One line for a human.
    pub(crate) fn line(&self) -> String {
        let mib =
            |b: Option<u64>| b.map_or("?".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0));
        format!(
            "{} objects ({} compressed, {}), {:.0} B each as received, {:.0} B cached (ratio {:.3}), dictionary {} B; RSS {} ({} per object), peak {}",
            self.objects,
            self.compressed_objects,
            self.compression,
            self.raw_bytes_per_object,
            self.cached_bytes_per_object,
            self.ratio,
            self.dictionary_bytes,
            mib(self.rss_bytes),
            self.rss_bytes_per_object
                .map_or("?".into(), |b| format!("{b:.0} B")),
            mib(self.peak_rss_bytes),
        )
    }
}

/// A `kB` line of `/proc/self/status` (`VmRSS:`, `VmHWM:`), in bytes.
pub(crate) fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
