//! Faults of `dynamic_quant` (per-token INT8 quantisation): the tie rule of the cast, the
//! constant the row max is mapped to, the scale's form and reach, the smooth scales, all-zero
//! rows, the sign of the row max, subnormal inputs and the MoE group boundaries.

use crate::formats::RoundingMode;
use crate::ops::dynamic_quant::{DqRecipe, GroupLookup, ScaleForm, SmoothOrder, ZeroRow};
use crate::ops::fault::{Edit, Fault, Requirement};

const OPS: &[&str] = &["dynamic_quant"];

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "dq-rounding-ties-away",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the f32 -> int8 cast rounds exact .5 ties away from zero (CAST_ROUND) instead of to even (CAST_RINT)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.rounding != RoundingMode::NearestTiesToEven {
                return false;
            }
            r.rounding = RoundingMode::NearestTiesAway;
            true
        })),
    },
    Fault {
        name: "dq-scale-max-over-128",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the row max is mapped to 128 instead of 127 (scale = max / 128, the int8 range's width taken for its largest value)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            r.qmax = 128.0;
            true
        })),
    },
    Fault {
        name: "dq-scale-per-tensor",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "one scale from the whole tensor's max instead of one per token (row)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.per_tensor {
                return false;
            }
            r.per_tensor = true;
            true
        })),
    },
    Fault {
        name: "dq-scale-as-max-over-127",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the stored scale is fl32(max / 127), the API formula taken literally, instead of the recipe's own form (the A2 kernel's 1 / fl32(127 / max), the golden's max * fl32(1 / 127)): one f32 ulp off on about a third of the rows",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.scale == ScaleForm::MaxDivided {
                return false;
            }
            r.scale = ScaleForm::MaxDivided;
            true
        })),
    },
    Fault {
        name: "dq-scale-form-swapped",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the stored scale takes the sibling kernels' form: 1 / fl32(127 / max) where the variant's kernel stores fl32(max x fl32(1/127)) (the multi-row, single-row and 9.x db kernels), and the other way round (the plain, large-shape and MoE kernels); the model that read one kernel file for every shape",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            r.scale = r.scale.swapped();
            true
        })),
    },
    Fault {
        name: "dq-smooth-skipped",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "smooth_scales are ignored",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.smooth != SmoothOrder::BeforeMax {
                return false;
            }
            r.smooth = SmoothOrder::Skipped;
            true
        })),
    },
    Fault {
        name: "dq-smooth-after-max",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the row max and scale are taken of x before the smooth scales are applied, and x * smooth is quantised with that scale",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.smooth != SmoothOrder::BeforeMax {
                return false;
            }
            r.smooth = SmoothOrder::AfterMax;
            true
        })),
    },
    Fault {
        name: "dq-zero-row-scale-nan",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "an all-zero row gets a NaN scale (a division by its zero max left unguarded) instead of 0",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.zero_row == ZeroRow::NanScale {
                return false;
            }
            r.zero_row = ZeroRow::NanScale;
            true
        })),
    },
    Fault {
        name: "dq-max-not-abs",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the row max is taken of the signed values (ReduceMax without Abs), so a row whose largest magnitude is negative gets too small a scale and saturates",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.signed_max {
                return false;
            }
            r.signed_max = true;
            true
        })),
    },
    Fault {
        name: "dq-input-subnormals-flushed",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "subnormal inputs are read as zero (a denormals-are-zero load): a row of f16 subnormals quantises to zeros with scale 0",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.flush_input_subnormals {
                return false;
            }
            r.flush_input_subnormals = true;
            true
        })),
    },
    Fault {
        name: "dq-group-boundary-off-by-one",
        family: "dynamic_quant",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "MoE group_index: the first row of each group takes the previous group's smooth row (end >= row instead of end > row)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r: &mut DqRecipe| {
            if r.group_lookup != GroupLookup::FirstEndAbove {
                return false;
            }
            r.group_lookup = GroupLookup::FirstEndAtOrAbove;
            true
        })),
    },
];
