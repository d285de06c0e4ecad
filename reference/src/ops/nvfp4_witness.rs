//! NVFP4 inputs that pin a scale order: a global scale `g` and one (code, block scale) pair on
//! which the order a case asks for gives other output bits than each of the other exact-product
//! orders (A, B, C; see [`ScaleOrder`]), or, for order D (the combined scale handed over as
//! bf16), than each of A, B and C.
//!
//! Orders A, B and C agree almost everywhere for bf16/f16 outputs: f32 carries more than
//! 2p + 2 bits, so their different f32 roundings change the final rounding only when the
//! product lies within an f32 ulp of a rounding midpoint of the output type. Random inputs hit
//! that about once per 10^4 global scales. This module constructs it: for a pair (q, s) whose
//! product has an odd mantissa, it takes a midpoint m of the output type and the f32 values of
//! `g` next to m / (q * s), and keeps the first `g` on which the asked order differs from both
//! others under the asked rounding. The candidates are drawn from the case's stream, so the
//! seed chooses which witness, never whether there is one.

use super::GenContext;
use crate::dequant::{nvfp4, Fp4DequantRecipe, HalfType, ScaleOrder};
use crate::formats::{Rounding, RoundingMode};

/// E2M1 codes whose value has an odd mantissa (1.5, 3, 6).
const ODD_CODES: [u8; 3] = [3, 5, 7];
/// Candidates tried before giving up.
const MAX_CANDIDATES: usize = 20_000;

/// The orders a witness separates: A, B and C from each other, and D from A, B and C.
const ORDERS: [ScaleOrder; 4] = [
    ScaleOrder::BlockThenGlobalF32,
    ScaleOrder::CombinedScaleF32,
    ScaleOrder::ExactOnce,
    ScaleOrder::CombinedScaleBf16,
];

/// Whether order `j` must differ from order `which` (indices into [`ORDERS`]): every other
/// exact-product order (A, B, C), and for D all three of them.
fn rival(which: usize, j: usize) -> bool {
    j != which && (j < 3 || which == 3)
}

/// A global scale and a (code, block scale) pair on which `order` under `mode` gives other
/// output bits than each of the other orders of A, B, C.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Witness {
    pub global_scale: f32,
    pub code: u8,
    pub block_scale: u8,
}

fn outputs(code: u8, s: u8, g: f32, out: HalfType, mode: RoundingMode) -> [u16; 4] {
    let mut r = Fp4DequantRecipe::vllm_nvfp4();
    r.output = out;
    r.rounding = Rounding::ieee(mode);
    ORDERS.map(|o| {
        r.order = o;
        nvfp4::element(code, s, g, &r)
    })
}

/// Searches the stream for a witness of `order` (A, B, C or D) under `mode`; `None` when
/// nothing was found within the bound. The stream is read the same way for every order.
pub fn find(
    ctx: &mut GenContext,
    order: ScaleOrder,
    mode: RoundingMode,
    out: HalfType,
) -> Option<Witness> {
    let which = ORDERS.iter().position(|&o| o == order)?;
    let mantissa_bits = match out {
        HalfType::Bf16 => 7,
        HalfType::F16 => 10,
    };
    for _ in 0..MAX_CANDIDATES / 25 {
        let code = ODD_CODES[ctx.below(ODD_CODES.len() as u64) as usize];
        // E4M3FN scales near 1 with an odd mantissa: exponent field 6..8, mantissa 1, 3, 5, 7.
        let block_scale = ((6 + ctx.below(3) as u8) << 3) | (1 + 2 * ctx.below(4) as u8);
        let q = crate::formats::fp4_e2m1::e2m1_to_f64(code);
        let s = crate::formats::fp8_e4m3fn::e4m3fn_to_f64(block_scale);
        // A midpoint of the output type in [1, 2), scaled into the weights' usual range.
        let i = ctx.below(1 << mantissa_bits) as f64;
        let m = (1.0 + (i + 0.5) / f64::from(1u32 << mantissa_bits)) * 0.25;
        let g0 = crate::formats::f32::f64_to_f32(m / (q * s), Rounding::RNE);
        for k in -12i32..=12 {
            let g = f32::from_bits((g0.to_bits() as i64 + k as i64) as u32);
            let o = outputs(code, block_scale, g, out, mode);
            if (0..ORDERS.len()).all(|j| !rival(which, j) || o[j] != o[which]) {
                return Some(Witness {
                    global_scale: g,
                    code,
                    block_scale,
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ValueDist;

    #[test]
    fn every_order_has_a_witness_under_both_tie_rules() {
        for out in [HalfType::Bf16, HalfType::F16] {
            for mode in [
                RoundingMode::NearestTiesToEven,
                RoundingMode::NearestTiesAway,
            ] {
                for (n, order) in ORDERS.iter().enumerate() {
                    for seed in 0..8u64 {
                        let mut state = seed * 7919 + n as u64 + 1;
                        let mut next = move || {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            state
                        };
                        let mut ctx = GenContext::new(&mut next, ValueDist::default());
                        let w = find(&mut ctx, *order, mode, out)
                            .unwrap_or_else(|| panic!("{out:?} {mode:?} {order:?} seed {seed}"));
                        let o = outputs(w.code, w.block_scale, w.global_scale, out, mode);
                        for j in 0..ORDERS.len() {
                            if rival(n, j) {
                                assert_ne!(o[j], o[n], "{order:?} vs {:?}", ORDERS[j]);
                            }
                        }
                    }
                }
            }
        }
    }
}
