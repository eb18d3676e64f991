//! [`MetaScalars`]: an [`ObjectMeta`](super::ObjectMeta)'s optional numbers and times, packed.

use super::time::Time;

/// The scalar fields of an [`ObjectMeta`], packed: 44 bytes where four `Option`s took 80 (a
/// `Time` is 16 bytes and has no spare bit for `None`). Absent fields hold zeros, so derived
/// equality is field equality. Aligned to 4 bytes, not 8: the presence byte's padding then
/// shares a word with the metadata's other 4-byte fields (`ObjectMeta` 144 bytes, not 152),
/// which with the 32-byte [`Body`](super::body) puts `Object` in a 224-byte block, not 256.
/// Fields are read and written by value (x86-64 and AArch64 load unaligned words at full
/// speed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, packed(4))]
pub(crate) struct MetaScalars {
    generation: i64,
    grace: i64,
    created: i64,
    deleted: i64,
    created_nanos: i32,
    deleted_nanos: i32,
    present: u8,
}

const GENERATION: u8 = 1;
const CREATED: u8 = 2;
const DELETED: u8 = 4;
const GRACE: u8 = 8;

impl MetaScalars {
    pub(crate) fn new(
        generation: Option<i64>,
        creation_timestamp: Option<Time>,
        deletion_timestamp: Option<Time>,
        deletion_grace_period_seconds: Option<i64>,
    ) -> Self {
        let mut s = MetaScalars::default();
        s.set_generation(generation);
        s.set_creation_timestamp(creation_timestamp);
        s.set_deletion_timestamp(deletion_timestamp);
        s.set_deletion_grace_period_seconds(deletion_grace_period_seconds);
        s
    }

    fn flag(&mut self, bit: u8, on: bool) {
        if on {
            self.present |= bit;
        } else {
            self.present &= !bit;
        }
    }

    pub(crate) fn set_generation(&mut self, v: Option<i64>) {
        self.flag(GENERATION, v.is_some());
        self.generation = v.unwrap_or(0);
    }

    pub(crate) fn set_creation_timestamp(&mut self, t: Option<Time>) {
        self.flag(CREATED, t.is_some());
        let t = t.unwrap_or_default();
        (self.created, self.created_nanos) = (t.seconds, t.nanos);
    }

    pub(crate) fn set_deletion_timestamp(&mut self, t: Option<Time>) {
        self.flag(DELETED, t.is_some());
        let t = t.unwrap_or_default();
        (self.deleted, self.deleted_nanos) = (t.seconds, t.nanos);
    }

    pub(crate) fn set_deletion_grace_period_seconds(&mut self, v: Option<i64>) {
        self.flag(GRACE, v.is_some());
        self.grace = v.unwrap_or(0);
    }

    pub(crate) fn generation(&self) -> Option<i64> {
        (self.present & GENERATION != 0).then_some(self.generation)
    }

    pub(crate) fn creation_timestamp(&self) -> Option<Time> {
        (self.present & CREATED != 0).then_some(Time {
            seconds: self.created,
            nanos: self.created_nanos,
        })
    }

    pub(crate) fn deletion_timestamp(&self) -> Option<Time> {
        (self.present & DELETED != 0).then_some(Time {
            seconds: self.deleted,
            nanos: self.deleted_nanos,
        })
    }

    pub(crate) fn deletion_grace_period_seconds(&self) -> Option<i64> {
        (self.present & GRACE != 0).then_some(self.grace)
    }
}
