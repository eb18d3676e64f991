//! Subcommands of the `informer` binary.

pub(crate) mod decode;
