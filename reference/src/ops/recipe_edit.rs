//! A change of a family's recipe, as [`super::OpFamily::run_with_recipe_edit`] applies it. The
//! fault catalogue (`crate::faults`) holds the edits; the op families only know this type, so
//! the catalogue sits above the ops and never the reverse.

use crate::attention::Recipe;
use crate::dequant::Fp4DequantRecipe;
use crate::mc2::Mc2Numerics;

/// A change of a family's recipe; `false` when the recipe already has the faulty value.
#[derive(Clone, Copy, Debug)]
pub enum RecipeEdit {
    Attention(fn(&mut Recipe) -> bool),
    Fp4(fn(&mut Fp4DequantRecipe) -> bool),
    Mc2(fn(&mut Mc2Numerics) -> bool),
    DynamicQuant(fn(&mut super::dynamic_quant::DqRecipe) -> bool),
    C8(fn(&mut super::pa_decode_int8::C8Recipe) -> bool),
    QuantMatmul(fn(&mut super::quant_matmul::QmmRecipe) -> bool),
    Moe(fn(&mut super::moe_dispatch_combine::MoeRecipe) -> bool),
    Mla(fn(&mut super::mla_decode::MlaRecipe) -> bool),
}
