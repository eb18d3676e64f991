//! Watch streams: protobuf frames (4-byte big-endian length + `WatchEvent`) and JSON lines (one
//! `{"type":..,"object":..}` per line), decoded incrementally from chunks cut anywhere.

mod chunks;
mod decode;
mod encode;
mod event;
mod frame;
mod line;
mod stream;

pub use chunks::{DEFAULT_COMPACT_RATIO, SHARED_BUFFER_SPAN};
pub use encode::{encode_watch_frame, encode_watch_line};
pub use event::{WatchEvent, WatchEventType};
pub use frame::FrameDecoder;
pub use line::LineDecoder;
pub use stream::{DEFAULT_FRAME_LIMIT, WatchDecoder, WatchFormat};
pub(crate) use stream::{FrameCache, WatchFrame};
