//! [`ShardConfig`]: a shard group, this member's identity, and the Lease timing.

use std::collections::BTreeMap;

use crate::election::{ConfigError, ElectionTiming};

/// The label every membership Lease of a group carries; its value is the group's name.
pub const GROUP_LABEL: &str = "sharding.informer.dev/group";

/// One member of a shard group.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// The group's name: members of one group share keys. A label value (63 characters at
    /// most, alphanumerics, `-`, `_`, `.`).
    pub group: String,
    /// This member's identity, unique among live members and stable for its lifetime (a Pod
    /// name). Its membership Lease is `<group>-<identity>`, so both must make a valid Lease
    /// name together.
    pub identity: String,
    /// Lease duration, renew deadline and retry period of the membership Lease (client-go's
    /// 15 s / 10 s / 2 s by default).
    pub timing: ElectionTiming,
}

impl ShardConfig {
    /// A member `identity` of `group` with the default timing.
    pub fn new(group: impl Into<String>, identity: impl Into<String>) -> Self {
        ShardConfig {
            group: group.into(),
            identity: identity.into(),
            timing: ElectionTiming::default(),
        }
    }

    /// Sets the timing.
    #[must_use]
    pub fn timing(mut self, timing: ElectionTiming) -> Self {
        self.timing = timing;
        self
    }

    /// The membership Lease's name: `<group>-<identity>`.
    pub fn lease_name(&self) -> String {
        format!("{}-{}", self.group, self.identity)
    }

    /// The member a Lease of this group stands for: its name without the `<group>-` prefix
    /// (`None` for a Lease not named as members name theirs). The ring is keyed by this, not
    /// by the Lease's `holderIdentity`, so a hand edit of the holder cannot move keys.
    pub(super) fn member_of<'a>(&self, lease_name: &'a str) -> Option<&'a str> {
        lease_name
            .strip_prefix(self.group.as_str())?
            .strip_prefix('-')
            .filter(|id| !id.is_empty())
    }

    /// The label selector of the group's Leases.
    pub fn selector(&self) -> String {
        format!("{GROUP_LABEL}={}", self.group)
    }

    pub(super) fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(GROUP_LABEL.to_owned(), self.group.clone())])
    }

    /// Checks the identity, the group and the timing.
    ///
    /// # Errors
    /// The first rule broken ([`ConfigError::EmptyName`] for an empty group,
    /// [`ConfigError::InvalidName`] when the group is not a label value or
    /// `<group>-<identity>` not a Lease name).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.identity.is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        if self.group.is_empty() {
            return Err(ConfigError::EmptyName);
        }
        if !crate::object::is_label_value(&self.group) {
            return Err(ConfigError::InvalidName {
                what: "group",
                value: self.group.clone(),
                rule: "a label value: at most 63 letters, digits, '-', '_' or '.', alphanumeric at both ends",
            });
        }
        crate::election::check_lease_name(&self.lease_name())?;
        self.timing.validate()
    }
}
