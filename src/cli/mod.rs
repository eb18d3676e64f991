//! Subcommands of the `informer` binary.

pub(crate) mod decode;
pub(crate) mod flood;
pub(crate) mod serve;
pub(crate) mod sim_args;
pub(crate) mod watch;
