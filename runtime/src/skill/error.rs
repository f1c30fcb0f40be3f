//! The typed errors of mounting and unmounting. A failed call leaves the agent's state exactly as it was.

use crate::id::SkillId;
use semver::Version;

fn list(ids: &[SkillId]) -> String {
    ids.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(", ")
}

fn chain(ids: &[SkillId]) -> String {
    ids.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(" → ")
}

/// Why a mount or unmount was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MountError {
    /// The skill is mounted at another version; upgrading is an explicit unmount and mount.
    #[error(
        "skill `{skill}` is mounted at version {mounted}, not {requested}; expected the same version, or an \
         unmount first to change versions"
    )]
    VersionConflict {
        /// The skill.
        skill: SkillId,
        /// The version mounted now.
        mounted: Version,
        /// The version asked for.
        requested: Version,
    },
    /// Skills the skill requires are not mounted.
    #[error("skill `{skill}` requires {} which {} not mounted; expected them mounted first", list(.missing),
        if .missing.len() == 1 { "is" } else { "are" })]
    MissingDependency {
        /// The skill.
        skill: SkillId,
        /// The requirements that are not mounted.
        missing: Vec<SkillId>,
    },
    /// The initial state made from the mount options does not validate against the skill's state schema.
    #[error("skill `{skill}` cannot start from these mount options: {}; expected a state matching its state \
             schema", .errors.join("; "))]
    InvalidState {
        /// The skill.
        skill: SkillId,
        /// The validator's messages.
        errors: Vec<String>,
    },
    /// The agent's policy does not allow the skill.
    #[error("skill `{skill}` is denied: {reason}")]
    Denied {
        /// The skill.
        skill: SkillId,
        /// Which rule refused it.
        reason: String,
    },
    /// Mounted skills require the skill being unmounted.
    #[error("skill `{skill}` is required by {} which {} mounted; expected them unmounted first",
        list(.dependents), if .dependents.len() == 1 { "is" } else { "are" })]
    RequiredBy {
        /// The skill.
        skill: SkillId,
        /// The mounted skills that require it.
        dependents: Vec<SkillId>,
    },
    /// Skills given to `mount_all` require each other in a cycle.
    #[error("skills require each other in a cycle: {}; expected requirements without cycles", chain(.cycle))]
    Cycle {
        /// The cycle, starting and ending with the same skill.
        cycle: Vec<SkillId>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> SkillId {
        SkillId::new(s).unwrap()
    }

    #[test]
    fn every_message_names_the_skill_and_what_was_expected() {
        let cases = [
            (
                MountError::VersionConflict {
                    skill: id("math"),
                    mounted: Version::new(1, 0, 0),
                    requested: Version::new(2, 0, 0),
                },
                vec!["`math`", "1.0.0", "2.0.0", "expected the same version"],
            ),
            (
                MountError::MissingDependency { skill: id("calc"), missing: vec![id("math"), id("log")] },
                vec!["`calc`", "`math`, `log`", "are not mounted", "expected them mounted first"],
            ),
            (
                MountError::InvalidState {
                    skill: id("counter"),
                    errors: vec!["-1 is less than the minimum of 0".into()],
                },
                vec!["`counter`", "-1 is less than the minimum of 0", "expected a state matching"],
            ),
            (
                MountError::Denied { skill: id("shell"), reason: "skill `shell` is on the policy's deny list".into() },
                vec!["`shell` is denied", "deny list"],
            ),
            (
                MountError::RequiredBy { skill: id("math"), dependents: vec![id("calc")] },
                vec!["`math`", "`calc` which is mounted", "expected them unmounted first"],
            ),
            (
                MountError::Cycle { cycle: vec![id("a"), id("b"), id("a")] },
                vec!["`a` → `b` → `a`", "expected requirements without cycles"],
            ),
        ];
        for (err, needles) in cases {
            let text = err.to_string();
            for needle in needles {
                assert!(text.contains(needle), "{text:?} should contain {needle:?}");
            }
        }
    }
}
