//! The bit-changing choices of the Ascend recipes, each with the edit that flips it: the
//! reduction trees, the P V order, the exp and ln implementations, the order of the scale
//! multiplications, the tie rule of every cast (docs/ascend.md, "Conventions"). The harness's
//! knob-coverage test flips each one on the quick cases whose recipe has that knob and requires
//! some case's bits to change: a choice that changes no bits of any case is a knob the suites
//! cannot see, and the ledger row for it would be untested.

use crate::attention::recipe::{MathImpl, PvOrder, ReductionOrder};
use crate::formats::{Rounding, RoundingMode};
use crate::ops::RecipeEdit;

/// One flip: the knob field it changes in every preset of a family, and how.
#[derive(Clone, Copy, Debug)]
pub struct KnobFlip {
    /// The knob id's family (`fa`, `dynq`, ...).
    pub family: &'static str,
    /// The knob's field (the last part of its id).
    pub field: &'static str,
    /// The value it flips to, in words.
    pub to: &'static str,
    pub edit: RecipeEdit,
    /// Presets whose knob of this field the flip cannot change, with the reason (the ledger
    /// row says the same).
    pub inert: &'static [(&'static str, &'static str)],
}

fn other_tie(r: Rounding) -> Rounding {
    match r.mode {
        RoundingMode::NearestTiesToEven => Rounding::RNA,
        _ => Rounding::RNE,
    }
}

fn other_tie_mode(m: RoundingMode) -> RoundingMode {
    match m {
        RoundingMode::NearestTiesToEven => RoundingMode::NearestTiesAway,
        _ => RoundingMode::NearestTiesToEven,
    }
}

/// Every flip.
pub static KNOB_FLIPS: &[KnobFlip] = &[
    KnobFlip {
        family: "fa",
        field: "qk_order",
        to: "Sequential",
        edit: crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.qk_order = ReductionOrder::Sequential;
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "fa",
        field: "rowsum_order",
        to: "Sequential",
        edit: crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.rowsum_order = ReductionOrder::Sequential;
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "fa",
        field: "pv_order",
        to: "Lanes16",
        edit: crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.pv_order = PvOrder::Lanes16;
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "fa",
        field: "exp_impl",
        to: "F64Rounded",
        edit: crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.exp_impl = MathImpl::F64Rounded;
            true
        }),
        inert: &[(
            "ascend_pfa_f16_high_perf",
            "exp of an f16 argument rounded to f16: the two implementations give the same f16 on every argument (tested exhaustively)",
        )],
    },
    KnobFlip {
        family: "fa",
        field: "ln_impl",
        to: "F64Rounded",
        edit: crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.ln_impl = MathImpl::F64Rounded;
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "fa",
        field: "p_rounding",
        to: "the other tie rule",
        edit: crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.p_rounding = other_tie(r.p_rounding);
            true
        }),
        inert: &[(
            "ascend_pfa_f16_high_perf",
            "P is already f16 (the softmax runs in f16): the cast is the identity",
        )],
    },
    KnobFlip {
        family: "fa",
        field: "output_rounding",
        to: "the other tie rule",
        edit: crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.output_rounding = other_tie(r.output_rounding);
            true
        }),
        inert: &[(
            "ascend_pfa_f16_high_perf",
            "the f16 quotient is written as it is: no cast",
        )],
    },
    KnobFlip {
        family: "dynq",
        field: "rounding",
        to: "ties away",
        edit: crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r| {
            r.rounding = other_tie_mode(r.rounding);
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "dynq",
        field: "scale",
        to: "the sibling kernels' form",
        edit: crate::recipe_edit!(crate::ops::dynamic_quant::DqRecipe, |r| {
            r.scale = r.scale.swapped();
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "qmm",
        field: "scale_order",
        to: "the other order",
        edit: crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r| {
            r.scale_order = r.scale_order.swapped();
            true
        }),
        inert: &[
            ("a2_dequant", "no per-token scale reaches the kernel"),
            ("a2_fixpipe", "no per-token scale reaches the kernel"),
        ],
    },
    KnobFlip {
        family: "qmm",
        field: "output_rounding",
        to: "ties away",
        edit: crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r| {
            r.output_rounding = other_tie_mode(r.output_rounding);
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "qmm",
        field: "requant_rounding",
        to: "ties away",
        edit: crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r| {
            r.requant_rounding = other_tie_mode(r.requant_rounding);
            true
        }),
        inert: &[
            ("a2_pertoken_opt", "the int8 output runs the fixpipe kernel"),
            ("a2_pertoken", "the int8 output runs the fixpipe kernel"),
            ("a2_dequant", "the int8 output runs the fixpipe kernel"),
        ],
    },
    KnobFlip {
        family: "c8",
        field: "rounding",
        to: "ties away",
        edit: crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r| {
            r.rounding = other_tie_mode(r.rounding);
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "moe",
        field: "output_rounding",
        to: "ties away",
        edit: crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r| {
            r.output_rounding = other_tie_mode(r.output_rounding);
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "moe",
        field: "quant.rounding",
        to: "ties away",
        edit: crate::recipe_edit!(crate::ops::moe_dispatch_combine::MoeRecipe, |r| {
            r.quant.rounding = other_tie_mode(r.quant.rounding);
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "mla",
        field: "p_rounding",
        to: "ties to even",
        edit: crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r| {
            r.kernel.p_rounding = other_tie(r.kernel.p_rounding);
            true
        }),
        inert: &[],
    },
    KnobFlip {
        family: "mla",
        field: "output_rounding",
        to: "the other tie rule",
        edit: crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r| {
            r.kernel.output_rounding = other_tie(r.kernel.output_rounding);
            true
        }),
        inert: &[],
    },
];

/// The flip of knob `id` (`<family>.<preset>.<field>`), if the knob is a listed choice, and
/// whether it is inert for that preset (with the reason).
pub fn flip_of(id: &str) -> Option<(&'static KnobFlip, Option<&'static str>)> {
    let (family, rest) = id.split_once('.')?;
    let (preset, field) = rest.split_once('.')?;
    let f = KNOB_FLIPS
        .iter()
        .find(|f| f.family == family && f.field == field)?;
    let inert = f
        .inert
        .iter()
        .find(|(p, _)| *p == preset)
        .map(|(_, why)| *why);
    Some((f, inert))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::f16;

    /// The f16 high-performance kernel takes exp of f16 arguments (s - m rounded to f16) and
    /// rounds the result to f16: over every such argument the two f32 implementations give the
    /// same f16, so `exp_impl` cannot change that preset's bits (it is listed as inert there).
    #[test]
    fn the_exp_implementation_is_inert_under_f16_rounding() {
        let r16 = |x: f32| f16::quantize_f32_f16(x, Rounding::RNE);
        for bits in 0u16..=0xFFFF {
            let x = f16::f16_to_f32(bits);
            if !x.is_finite() || x > 0.0 {
                continue;
            }
            assert_eq!(
                r16(MathImpl::LibmF32.exp_of(x)).to_bits(),
                r16(MathImpl::F64Rounded.exp_of(x)).to_bits(),
                "{x}"
            );
        }
        let (f, inert) = flip_of("fa.ascend_pfa_f16_high_perf.exp_impl").unwrap();
        assert_eq!(f.field, "exp_impl");
        assert!(inert.is_some());
        assert!(flip_of("fa.ascend_pfa_bf16.exp_impl").unwrap().1.is_none());
        assert!(flip_of("fa.ascend_pfa_bf16.block_order").is_none());
    }
}
