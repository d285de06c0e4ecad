//! CANN release numbers, as CANN and its open operator repositories write them, and ranges of
//! them.
//!
//! Spellings seen in the wild: `8.0.RC3` (a release candidate of 8.0), `8.0.0` (the release),
//! `8.5.0.alpha001` (a community alpha build), `9.0.0-beta.1`, `9.0.0-rc.1` (the pre-releases
//! of the open repositories' tags, written with or without a leading `v`). Within one
//! `major.minor.patch`, alphas come before betas, betas before release candidates and those
//! before the release. The `RC` form has no patch number: `8.0.RC3` sorts with `8.0.0`'s
//! candidates.

use std::cmp::Ordering;
use std::fmt;

/// How far a release is from its final form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    Alpha(u16),
    Beta(u16),
    Candidate(u16),
    Final,
}

/// One CANN release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
    pub stage: Stage,
}

impl Release {
    /// A final release `major.minor.patch`.
    pub const fn new(major: u16, minor: u16, patch: u16) -> Release {
        Release {
            major,
            minor,
            patch,
            stage: Stage::Final,
        }
    }

    /// The same release at another stage.
    pub const fn at(self, stage: Stage) -> Release {
        Release { stage, ..self }
    }

    /// Parses a release number (see the module docs); `None` for anything else (a directory
    /// name such as `latest` or `cann`, a build suffix conform does not know).
    pub fn parse(s: &str) -> Option<Release> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let num = |p: &str| -> Option<u16> {
            (!p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        };
        let staged = |word: &str, n: &str| -> Option<Stage> {
            let n = num(n)?;
            match word.to_ascii_lowercase().as_str() {
                "alpha" => Some(Stage::Alpha(n)),
                "beta" => Some(Stage::Beta(n)),
                "rc" => Some(Stage::Candidate(n)),
                _ => None,
            }
        };
        // `9.0.0-beta.1`: the pre-release after a dash.
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (s, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        let (major, minor) = (num(parts.first()?)?, num(parts.get(1)?)?);
        let mut rel = Release::new(major, minor, 0);
        match parts.get(2..).unwrap_or(&[]) {
            // `8.0.RC3`
            [rc] if rc.len() > 2 && rc[..2].eq_ignore_ascii_case("rc") => {
                rel.stage = Stage::Candidate(num(&rc[2..])?);
            }
            [patch] => rel.patch = num(patch)?,
            // `8.5.0.alpha001`
            [patch, tag] => {
                rel.patch = num(patch)?;
                let split = tag.find(|c: char| c.is_ascii_digit())?;
                rel.stage = staged(&tag[..split], &tag[split..])?;
            }
            _ => return None,
        }
        if let Some(pre) = pre {
            if rel.stage != Stage::Final {
                return None;
            }
            let (word, n) = pre.split_once('.')?;
            rel.stage = staged(word, n)?;
        }
        Some(rel)
    }
}

impl PartialOrd for Release {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Release {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch, self.stage).cmp(&(
            other.major,
            other.minor,
            other.patch,
            other.stage,
        ))
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stage {
            Stage::Candidate(n) if self.patch == 0 => {
                write!(f, "{}.{}.RC{n}", self.major, self.minor)
            }
            Stage::Final => write!(f, "{}.{}.{}", self.major, self.minor, self.patch),
            Stage::Alpha(n) => write!(
                f,
                "{}.{}.{}.alpha{n:03}",
                self.major, self.minor, self.patch
            ),
            Stage::Beta(n) => write!(f, "{}.{}.{}-beta.{n}", self.major, self.minor, self.patch),
            Stage::Candidate(n) => write!(f, "{}.{}.{}-rc.{n}", self.major, self.minor, self.patch),
        }
    }
}

/// The releases from `from` (included) up to `until` (excluded; `None`: every later release
/// conform has read, and those after them, until a source says otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleaseRange {
    pub from: Release,
    pub until: Option<Release>,
}

impl ReleaseRange {
    /// Every release: a kernel built from its own repository against whatever CANN is
    /// installed.
    pub const EVERY: ReleaseRange = ReleaseRange::new(Release::new(0, 0, 0), None);

    pub const fn new(from: Release, until: Option<Release>) -> ReleaseRange {
        ReleaseRange { from, until }
    }

    pub fn contains(&self, r: Release) -> bool {
        r >= self.from && self.until.is_none_or(|u| r < u)
    }
}

impl fmt::Display for ReleaseRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.until {
            None if *self == ReleaseRange::EVERY => {
                f.write_str("every CANN release (built against the one installed)")
            }
            Some(u) => write!(f, "CANN {} up to (not including) {u}", self.from),
            None => write!(f, "CANN {} and later", self.from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spellings_parse_and_sort_in_release_order() {
        let order = [
            "8.0.RC1",
            "8.0.RC3",
            "8.0.0",
            "8.3.RC1",
            "8.5.0.alpha001",
            "v8.5.0-beta.1",
            "8.5.0",
            "9.0.0-beta.1",
            "9.0.0-rc.1",
            "v9.0.0",
            "9.0.1",
            "9.2.0-beta.1",
        ];
        let parsed: Vec<Release> = order
            .iter()
            .map(|s| Release::parse(s).unwrap_or_else(|| panic!("{s}")))
            .collect();
        for w in parsed.windows(2) {
            assert!(w[0] < w[1], "{} < {}", w[0], w[1]);
        }
        for (s, r) in order.iter().zip(&parsed) {
            assert_eq!(Release::parse(&r.to_string()), Some(*r), "{s}");
        }
        for bad in [
            "latest",
            "cann",
            "8",
            "8.x.0",
            "9.0.0-gamma.1",
            "8.0.RC",
            "",
            "8.5.0.alpha001-beta.1",
        ] {
            assert_eq!(Release::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_range_excludes_its_end() {
        let r = ReleaseRange::new(Release::new(8, 0, 0), Some(Release::new(8, 5, 0)));
        assert!(r.contains(Release::parse("8.3.RC1").unwrap()));
        assert!(r.contains(Release::new(8, 0, 0)));
        assert!(!r.contains(Release::parse("8.0.RC3").unwrap()));
        assert!(!r.contains(Release::new(8, 5, 0)));
        assert!(r.contains(Release::parse("8.5.0.alpha001").unwrap()));
        let open = ReleaseRange::new(Release::new(9, 0, 0).at(Stage::Beta(1)), None);
        assert!(open.contains(Release::new(10, 0, 0)));
        assert_eq!(open.to_string(), "CANN 9.0.0-beta.1 and later");
    }
}
