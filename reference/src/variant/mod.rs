//! Kernel variants: which CANN kernel a case runs on a device.
//!
//! A CANN op is not one kernel. Its host tiling (`op_host/*_tiling.cpp`) picks a tiling key
//! from the shape, the dtypes, the options, the SoC and the release, and each key runs its own
//! kernel file, which may round differently from its siblings. conform models an op the same
//! way: a *dispatch* function of the op family maps (SoC, CANN release, dtype, shape, options)
//! to a [`KernelVariant`] (the tiling function, the key and the kernel file), and each variant
//! is a recipe preset with its own knobs and ledger rows (docs/ascend.md). The recipe a suite
//! names for a CANN kernel (`ascend_a2`, `ascend_pfa_bf16`, ...) is the dispatch itself, on the
//! [`Platform`] the recipe describes; `conform explain` and the report name the variant a case
//! lands on.
//!
//! A variant states the releases and SoCs it was read for. A target that reports a release (or
//! a device) outside them is not judged against the variant's bits: the harness judges it by
//! the case's checks for a target with its own arithmetic (`checks_without_recipe`), and says
//! why. The same holds for a variant whose bits rest on a convention of conform's own that no
//! device is known to share ([`KernelVariant::conventions`]).

mod release;
mod soc;

pub use release::{Release, ReleaseRange, Stage};
pub use soc::Soc;

use std::fmt;

/// The device a dispatch is asked about: its SoC family and CANN release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Platform {
    pub soc: Soc,
    pub release: Release,
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, CANN {}", self.soc, self.release)
    }
}

/// One kernel variant of a CANN op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelVariant {
    /// The variant's name: its ledger row is `<family>.<id>.variant` (the preset's name where
    /// one preset is one variant).
    pub id: &'static str,
    /// The recipe preset that computes it (its knobs are `<family>.<preset>.<field>`); empty
    /// for a kernel conform has no recipe for.
    pub preset: &'static str,
    /// The host tiling that selects it: file and function.
    pub tiling: &'static str,
    /// The tiling key (or the template the tiling key encodes) it sets.
    pub key: &'static str,
    /// The kernel file that runs (repository path).
    pub kernel: &'static str,
    /// The SoC families it was read for.
    pub socs: &'static [Soc],
    /// The releases it was read for.
    pub releases: ReleaseRange,
    /// Ledger knob ids of assumed conventions the variant's bits rest on that no device is
    /// known to share (a reduction tree of conform's, an exp implementation): a device target
    /// is judged by error ratio, and the results name these knobs.
    pub conventions: &'static [&'static str],
}

impl KernelVariant {
    /// Whether conform computes this kernel's bits.
    pub fn modelled(&self) -> bool {
        !self.preset.is_empty()
    }

    /// Whether the variant was read for `p`; otherwise why not.
    pub fn covers(&self, p: &Platform) -> Result<(), NotCovered> {
        if !self.socs.contains(&p.soc) {
            return Err(NotCovered::Soc {
                soc: p.soc,
                described: self.socs,
            });
        }
        if !self.releases.contains(p.release) {
            return Err(NotCovered::Release {
                release: p.release,
                described: self.releases,
            });
        }
        Ok(())
    }
}

/// Why a variant was not read for a platform; `Display` says so in words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotCovered {
    /// The SoC is not one the variant describes.
    #[error("{soc} is not among the SoCs it describes ({})", soc_list(described))]
    Soc { soc: Soc, described: &'static [Soc] },
    /// The release is outside the range the variant describes.
    #[error("CANN {release} is outside the releases it describes ({described})")]
    Release {
        release: Release,
        described: ReleaseRange,
    },
}

fn soc_list(socs: &[Soc]) -> String {
    socs.iter()
        .map(Soc::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for KernelVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (tiling key {}, {}); {}; {}",
            self.kernel,
            self.key,
            self.tiling,
            soc_list(self.socs),
            self.releases
        )?;
        if self.modelled() {
            write!(f, "; preset {}", self.preset)
        } else {
            f.write_str("; not modelled")
        }
    }
}

/// What a dispatch found for one case: the variant, and the values the tiling gives this shape
/// that the variant's recipe uses (a KV tile, a base block), in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub variant: &'static KernelVariant,
    /// The dispatch's reasoning for this shape: which branch it took and the tiling values.
    pub detail: String,
}

impl Dispatch {
    /// The variant of `variants` whose preset `recipe` names, for a case that names it
    /// directly (an op whose host dispatch is not modelled further).
    pub fn named(variants: &[&'static KernelVariant], recipe: &str) -> Option<Dispatch> {
        variants
            .iter()
            .find(|v| v.preset == recipe)
            .map(|&variant| Dispatch {
                variant,
                detail: "the case names this variant's preset".to_string(),
            })
    }
}

impl fmt::Display for Dispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.variant, self.detail)
    }
}
