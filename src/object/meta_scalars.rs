//! [`MetaScalars`]: an [`ObjectMeta`](super::ObjectMeta)'s optional numbers and times, packed.

use super::time::Time;

/// The scalar fields of an [`ObjectMeta`], packed: 32 bytes where four `Option`s took 80 (a
/// `Time` is 16 bytes and has no spare bit for `None`). Absent fields hold zeros and the
/// deletion fields are boxed exactly when one is present, so derived equality is field
/// equality.
///
/// The deletion timestamp and grace period are set only on objects being deleted, for the
/// seconds until they go: boxed, they cost every other object 8 bytes instead of 20, which
/// with the other squeezes of `ObjectMeta` puts `Object` in a 192-byte block, not 224.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct MetaScalars {
    generation: i64,
    created: i64,
    created_nanos: i32,
    present: u8,
    deletion: Option<Box<Deletion>>,
}

/// `deletionTimestamp` and `deletionGracePeriodSeconds` (zeros when absent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Deletion {
    deleted: i64,
    grace: i64,
    deleted_nanos: i32,
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
        if t.is_none() && self.deletion.is_none() {
            return;
        }
        let t = t.unwrap_or_default();
        let d = self.deletion_mut();
        (d.deleted, d.deleted_nanos) = (t.seconds, t.nanos);
        self.drop_empty_deletion();
    }

    pub(crate) fn set_deletion_grace_period_seconds(&mut self, v: Option<i64>) {
        self.flag(GRACE, v.is_some());
        if v.is_none() && self.deletion.is_none() {
            return;
        }
        self.deletion_mut().grace = v.unwrap_or(0);
        self.drop_empty_deletion();
    }

    /// Bytes of the boxed deletion fields (0 when none is set).
    pub(crate) fn heap_len(&self) -> usize {
        self.deletion.as_ref().map_or(0, |_| size_of::<Deletion>())
    }

    /// The deletion fields, boxed now if need be.
    fn deletion_mut(&mut self) -> &mut Deletion {
        self.deletion.get_or_insert_default()
    }

    /// Keeps the box only while a deletion field is present (equality compares it).
    fn drop_empty_deletion(&mut self) {
        if self.present & (DELETED | GRACE) == 0 {
            self.deletion = None;
        }
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
        let d = self
            .deletion
            .as_deref()
            .filter(|_| self.present & DELETED != 0)?;
        Some(Time {
            seconds: d.deleted,
            nanos: d.deleted_nanos,
        })
    }

    pub(crate) fn deletion_grace_period_seconds(&self) -> Option<i64> {
        let d = self
            .deletion
            .as_deref()
            .filter(|_| self.present & GRACE != 0)?;
        Some(d.grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_fields_are_boxed_only_while_one_is_set() {
        let t = Time {
            seconds: 1_700_000_000,
            nanos: 5,
        };
        let mut s = MetaScalars::new(Some(3), Some(t), None, None);
        assert!(s.deletion.is_none());
        s.set_deletion_grace_period_seconds(Some(30));
        s.set_deletion_timestamp(Some(t));
        assert_eq!(s.deletion_timestamp(), Some(t));
        assert_eq!(s.deletion_grace_period_seconds(), Some(30));
        assert_eq!(s, MetaScalars::new(Some(3), Some(t), Some(t), Some(30)));
        // One cleared: the other stays, the cleared one reads as absent and compares as such.
        s.set_deletion_timestamp(None);
        assert_eq!(s.deletion_timestamp(), None);
        assert_eq!(s, MetaScalars::new(Some(3), Some(t), None, Some(30)));
        // Both cleared: equal to never set (no box left behind).
        s.set_deletion_grace_period_seconds(None);
        assert!(s.deletion.is_none());
        assert_eq!(s, MetaScalars::new(Some(3), Some(t), None, None));
        assert_eq!(size_of::<MetaScalars>(), 32);
        assert_eq!(s.heap_len(), 0);
        s.set_deletion_timestamp(Some(t));
        assert_eq!(s.heap_len(), size_of::<Deletion>());
    }
}
