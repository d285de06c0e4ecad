//! Faults of `moe_dispatch_combine` (the expert-parallel dispatch/combine round trip): the
//! weights (applied twice, not at all, renormalised), the combine's order, precision, fused
//! multiply-add and final tie rule, the expert-to-rank map, the receive order and the receive loop at an empty
//! block, the scale a quantised row carries and the quantisation's tie rule, and the form of
//! `expert_token_nums`.

use crate::formats::RoundingMode;
use crate::ops::fault::{Edit, Fault, Requirement};
use crate::ops::moe_dispatch_combine::{
    Accumulator, EmptyBlocks, ExpandOrder, MoeRecipe, Placement, ScaleSource, SumOrder, TokenNums,
    WeightUse,
};

const OPS: &[&str] = &["moe_dispatch_combine"];

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "moe-weights-twice",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the combine multiplies each routed row by its weight twice (the weight applied in the expert and again in the sum)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.weights != WeightUse::Once {
                return false;
            }
            r.weights = WeightUse::Twice;
            true
        })),
    },
    Fault {
        name: "moe-weights-ignored",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the combine sums the routed rows without their weights",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.weights != WeightUse::Once {
                return false;
            }
            r.weights = WeightUse::Ignored;
            true
        })),
    },
    Fault {
        name: "moe-weights-renormalised",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the combine divides each token's weights by their sum (as if the router's top-k weights had to sum to 1); the API takes them as given",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.renormalise {
                return false;
            }
            r.renormalise = true;
            true
        })),
    },
    Fault {
        name: "moe-sum-reversed",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the combine sums the weighted rows from k = K - 1 down to 0 instead of in k order",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.order != SumOrder::TopKAscending {
                return false;
            }
            r.order = SumOrder::TopKDescending;
            true
        })),
    },
    Fault {
        name: "moe-sum-in-dtype",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the combine's accumulator is rounded to the output dtype after every add instead of kept in f32",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.accumulator != Accumulator::F32 {
                return false;
            }
            r.accumulator = Accumulator::DtypePerStep;
            true
        })),
    },
    Fault {
        name: "moe-combine-fma",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the combine takes each weighted routed row into the f32 accumulator by a fused multiply-add (one rounding) where the kernel rounds the product (Muls) and then the add (Add)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.accumulator != Accumulator::F32 {
                return false;
            }
            r.accumulator = Accumulator::FusedMultiplyAdd;
            true
        })),
    },
    Fault {
        name: "moe-out-ties-away",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the combine's final cast to the dtype rounds exact ties away from zero (CAST_ROUND) instead of to even (CAST_RINT)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.output_rounding != RoundingMode::NearestTiesToEven {
                return false;
            }
            r.output_rounding = RoundingMode::NearestTiesAway;
            true
        })),
    },
    Fault {
        name: "moe-rank-map-off-by-one",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "routed expert e is sent to the rank after e / L + S (wrapping over the routed ranks): every row lands at another rank's expert",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.placement != Placement::Contiguous {
                return false;
            }
            r.placement = Placement::OffByOne;
            true
        })),
    },
    Fault {
        name: "moe-expand-by-token",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "a rank's received rows are laid out by source and token (arrival order) instead of by local expert, then source",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.expand_order != ExpandOrder::ExpertSourceToken {
                return false;
            }
            r.expand_order = ExpandOrder::SourceToken;
            true
        })),
    },
    Fault {
        name: "moe-empty-block-stops-receive",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the receive loop stops at the first (expert, source) block with no rows: the tokens after an empty expert or an empty source rank are dropped",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.empty_blocks != EmptyBlocks::Skipped {
                return false;
            }
            r.empty_blocks = EmptyBlocks::StopReceiving;
            true
        })),
    },
    Fault {
        name: "moe-scale-of-previous-token",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "a quantised row carries the dynamic scale of the previous token of its source (same destination) instead of its own",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.scale_source != ScaleSource::OwnToken {
                return false;
            }
            r.scale_source = ScaleSource::PreviousToken;
            true
        })),
    },
    Fault {
        name: "moe-quant-ties-away",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the dispatch's f32 -> int8 cast rounds exact .5 ties away from zero instead of to even",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.quant.rounding != RoundingMode::NearestTiesToEven {
                return false;
            }
            r.quant.rounding = RoundingMode::NearestTiesAway;
            true
        })),
    },
    Fault {
        name: "moe-token-nums-swapped",
        family: "moe",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "expert_token_nums holds counts where expert_token_nums_type asks for running sums (0), or running sums where it asks for counts (1)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r: &mut MoeRecipe| {
            if r.token_nums != TokenNums::AsAsked {
                return false;
            }
            r.token_nums = TokenNums::Swapped;
            true
        })),
    },
];
