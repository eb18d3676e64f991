//! [`default_identity`]: a candidate name when the caller has none.

/// A name for this process in an election or a shard group: `<hostname>-<pid>`.
///
/// The hostname is `$HOSTNAME` when set (a Pod's name inside Kubernetes), else the kernel's
/// (`/proc/sys/kernel/hostname`), else `fallback`; lower-cased, so that it fits a Lease name.
/// Two processes on one host differ by pid. In a container the pid is usually 1, so a
/// restarted container keeps its name (the Pod's); it then waits out the term its previous
/// run left in the Lease, as any other candidate would, since it cannot tell that the run has
/// stopped. A new Pod gets a new name. Two candidates that share a name do not take each
/// other's renewals for their own (a record counts as a candidate's only if it wrote it),
/// but `holderIdentity` and the logs cannot tell them apart: give each process its own name
/// when several run in one network namespace.
///
/// # Examples
/// ```
/// let id = informer::election::default_identity("informer");
/// assert!(id.ends_with(&format!("-{}", std::process::id())));
/// ```
pub fn default_identity(fallback: &str) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| fallback.to_owned());
    format!("{}-{}", host.to_lowercase(), std::process::id())
}
