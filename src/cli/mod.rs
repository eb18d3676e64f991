//! Subcommands of the `informer` binary.

pub(crate) mod decode;
pub(crate) mod flood;
