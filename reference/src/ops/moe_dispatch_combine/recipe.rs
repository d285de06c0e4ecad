//! `moe_dispatch_combine`'s recipe ([`MoeRecipe`]): the knobs of the dispatch/combine v2
//! kernels' arithmetic (expert placement, send order, the quantisation on dispatch, the
//! combine's order and accumulator) and its preset.

use crate::formats::{Rounding, RoundingMode};
use crate::knob::Knob;
use crate::ops::dynamic_quant::{DqRecipe, ScaleForm};

/// Where a routed expert lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Expert e on rank `e / L + S`, local expert `e % L` (the kernel).
    Contiguous,
    /// Rank `S + (e / L + 1) mod (W - S)`: the expert-to-rank map off by one (a bug).
    OffByOne,
}

/// The order of a rank's received rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpandOrder {
    /// By local expert, then source rank, then the source's (token, k) order (the kernel).
    ExpertSourceToken,
    /// By source rank, then token, then k: the rows left in arrival order (a bug).
    SourceToken,
}

/// What the receive loop does at an (expert, source) block with no rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmptyBlocks {
    /// Skips it (the kernel's loop over every block).
    Skipped,
    /// Stops receiving: every later block of the rank is dropped (a bug).
    StopReceiving,
}

/// Whose scale a quantised row carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleSource {
    /// Its own (the kernel writes the scale after the row it quantised).
    OwnToken,
    /// The previous token's of the same source and destination expert (a bug).
    PreviousToken,
}

/// How `expert_token_nums` is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenNums {
    /// Counts for type 1, running sums for type 0 (the kernel).
    AsAsked,
    /// The other one (a bug).
    Swapped,
}

/// How often each routed row is multiplied by its weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightUse {
    Once,
    Twice,
    Ignored,
}

/// The order of the combine's weighted sum over k.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SumOrder {
    /// k = 0, 1, ..., K - 1 (the kernel's loop), then the shared experts.
    TopKAscending,
    /// k = K - 1, ..., 0 (a bug).
    TopKDescending,
}

/// The combine's accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulator {
    /// f32 throughout, rounded to the dtype once at the end (the kernel).
    F32,
    /// Rounded to the dtype after every add (a bug).
    DtypePerStep,
    /// f32, but each weighted routed row taken in by one fused multiply-add, the product never
    /// rounded on its own (a bug: the kernel's Muls then Add round twice, `moe.claim.no_fma`).
    FusedMultiplyAdd,
}

/// The numerics of one dispatch/combine round trip.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeRecipe {
    /// The per-token INT8 quantisation of `quant_mode` 2 (the `dynamic_quant` recipe).
    pub quant: DqRecipe,
    pub placement: Placement,
    pub expand_order: ExpandOrder,
    pub empty_blocks: EmptyBlocks,
    pub scale_source: ScaleSource,
    pub token_nums: TokenNums,
    pub weights: WeightUse,
    /// The weights divided by their f32 sum before use (a bug: the API takes them as given).
    pub renormalise: bool,
    pub order: SumOrder,
    pub accumulator: Accumulator,
    /// The final cast of the f32 sum to the dtype.
    pub output_rounding: RoundingMode,
}

/// The recipe presets.
pub const PRESETS: [&str; 1] = ["ascend_v2"];

impl MoeRecipe {
    /// A preset by name.
    pub fn preset(name: &str) -> Option<MoeRecipe> {
        match name {
            "ascend_v2" => Some(MoeRecipe {
                quant: DqRecipe::kernel(ScaleForm::QuotientThenReciprocal),
                placement: Placement::Contiguous,
                expand_order: ExpandOrder::ExpertSourceToken,
                empty_blocks: EmptyBlocks::Skipped,
                scale_source: ScaleSource::OwnToken,
                token_nums: TokenNums::AsAsked,
                weights: WeightUse::Once,
                renormalise: false,
                order: SumOrder::TopKAscending,
                accumulator: Accumulator::F32,
                output_rounding: RoundingMode::NearestTiesToEven,
            }),
            _ => None,
        }
    }

    /// The ledger knobs of this recipe as preset `preset` (docs/ascend.md, ids
    /// `moe.<preset>.<field>`, and the dispatch kernel's quantisation as
    /// `moe.<preset>.quant.<field>`); destructures the struct, so a new field does not compile
    /// until it has a knob.
    pub fn knobs(&self, preset: &str) -> Vec<Knob> {
        let MoeRecipe {
            quant,
            placement,
            expand_order,
            empty_blocks,
            scale_source,
            token_nums,
            weights,
            renormalise,
            order,
            accumulator,
            output_rounding,
        } = self;
        let mut k = vec![
            Knob::new(format!("moe.{preset}.placement"), format!("{placement:?}")),
            Knob::new(
                format!("moe.{preset}.expand_order"),
                format!("{expand_order:?}"),
            ),
            Knob::new(
                format!("moe.{preset}.empty_blocks"),
                format!("{empty_blocks:?}"),
            ),
            Knob::new(
                format!("moe.{preset}.scale_source"),
                format!("{scale_source:?}"),
            ),
            Knob::new(
                format!("moe.{preset}.token_nums"),
                format!("{token_nums:?}"),
            ),
            Knob::new(format!("moe.{preset}.weights"), format!("{weights:?}")),
            Knob::new(
                format!("moe.{preset}.renormalise"),
                format!("{renormalise}"),
            ),
            Knob::new(format!("moe.{preset}.order"), format!("{order:?}")),
            Knob::new(
                format!("moe.{preset}.accumulator"),
                format!("{accumulator:?}"),
            ),
            Knob::new(
                format!("moe.{preset}.output_rounding"),
                crate::knob::rounding_name(&Rounding::ieee(*output_rounding)),
            ),
        ];
        k.extend(quant.knobs_under(&format!("moe.{preset}.quant")));
        k
    }
}
