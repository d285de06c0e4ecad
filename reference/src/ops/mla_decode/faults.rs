//! Faults of `mla_decode` (MLA decode over the paged latent cache): how the rope term enters
//! the score, the value width, the scale, the sharing of the one KV head, the block table and
//! the write's slots, the LSE, and the A2 MLA kernel's numerics (the AMLA rescale, its casts,
//! the score's order, the softmax step).

use crate::attention::mla::{KeyOrder, MlaRescale, KEY};
use crate::formats::Rounding;
use crate::ops::fault::{Edit, Fault, Requirement};
use crate::ops::mla_decode::{MlaRecipe, RopeUse};

const OPS: &[&str] = &["mla_decode"];

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "mla-rope-halves-swapped",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the key's rope halves (0..32, 32..64) exchanged, as if the kernel's two permuted K groups took each other's rope half",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.rope != RopeUse::Added { return false; } r.rope = RopeUse::KeyHalvesSwapped; true
        })),
    },
    Fault {
        name: "mla-rope-wrong-half",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "q_rope multiplied with the first 64 columns of c_kv instead of k_rope (rope applied to the latent half)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.rope != RopeUse::Added { return false; } r.rope = RopeUse::AgainstLatent; true
        })),
    },
    Fault {
        name: "mla-rope-dropped",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the rope term q_rope . k_rope left out of the score",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.rope != RopeUse::Added { return false; } r.rope = RopeUse::Dropped; true
        })),
    },
    Fault {
        name: "mla-latent-as-head-dim",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "values (and the output) from only the first 128 latent columns, the latent width taken as a 128 head_dim; the rest of the output 0",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.value_width != 512 { return false; } r.value_width = 128; true
        })),
    },
    Fault {
        name: "mla-scale-from-width",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the softmax scale recomputed as 1/sqrt(576) from the key width instead of the caller's scale",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.scale_from_width { return false; } r.scale_from_width = true; true
        })),
    },
    Fault {
        name: "mla-kv-head-not-shared",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "query head h reads KV head h of a [blocks, N, block_size, D] view of the one-head cache instead of sharing KV head 0",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kv_head_per_query_head { return false; } r.kv_head_per_query_head = true; true
        })),
    },
    Fault {
        name: "mla-block-table-off-by-one",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "every physical block read through the block table is the next one (block + 1)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.table_shift != 0 { return false; } r.table_shift = 1; true
        })),
    },
    Fault {
        name: "mla-slot-off-by-one",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the cache write puts each new latent and rope row at slot + 1",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.slot_shift != 0 { return false; } r.slot_shift = 1; true
        })),
    },
    Fault {
        name: "mla-lse-without-max",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "softmax_lse written as ln(sum) without the row max",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if !r.kernel.lse_with_max { return false; } r.kernel.lse_with_max = false; true
        })),
    },
    Fault {
        name: "mla-classic-rescale",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the running output rescaled by exp(m_old - m_new) and P cast without the AMLA factor (the generic flash kernel's rescale) instead of the MLA kernel's AMLA",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kernel.rescale != MlaRescale::Amla { return false; } r.kernel.rescale = MlaRescale::Classic; true
        })),
    },
    Fault {
        name: "mla-p-ties-even",
        family: "mla_decode",
        ops: OPS,
        // rounding_ties plants 8 exact ties of this cast per case (and the f16 full case holds
        // thousands).
        requirement: Requirement::Quick,
        description: "P (times the AMLA factor) cast to the KV dtype ties-to-even instead of ties-away (CAST_ROUND)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kernel.p_rounding != Rounding::RNA { return false; } r.kernel.p_rounding = Rounding::RNE; true
        })),
    },
    Fault {
        name: "mla-factor-ties-even",
        family: "mla_decode",
        ops: OPS,
        // One factor per row and softmax step, a natural tie about one in 2^14 (f16) or 2^17
        // (bf16) of them: rounding_ties builds one per case, under the P ties' slot.
        requirement: Requirement::Quick,
        description: "the AMLA factor cast to the KV dtype ties-to-even instead of ties-away",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kernel.factor_rounding != Rounding::RNA { return false; } r.kernel.factor_rounding = Rounding::RNE; true
        })),
    },
    Fault {
        name: "mla-score-natural-order",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the 576-long score summed latent then rope in index order instead of the kernel's permuted K order",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kernel.key_order != KeyOrder::KernelPermuted { return false; } r.kernel.key_order = KeyOrder::Natural; true
        })),
    },
    Fault {
        name: "mla-softmax-step-128",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "softmax steps of 128 keys instead of 512 (a different rescale schedule)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kernel.step == 128 { return false; } r.kernel.step = 128; true
        })),
    },
    Fault {
        name: "mla-score-one-chunk",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the 576-long score summed as one sequential chain instead of chunks of 96 added to the accumulator",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kernel.k_chunk == KEY {
                return false;
            }
            r.kernel.k_chunk = KEY;
            true
        })),
    },
    Fault {
        name: "mla-output-other-tie-rule",
        family: "mla_decode",
        ops: OPS,
        // rounding_ties plants 16 exact ties of the output cast per case (natural ones are about
        // one in 2^16 (bf16) or 2^13 (f16) outputs).
        requirement: Requirement::Quick,
        description: "the output cast with the other tie rule (ties-away for bf16, ties-to-even for f16) than the kernel's",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            r.kernel.output_rounding = if r.kernel.output_rounding == Rounding::RNE {
                Rounding::RNA
            } else {
                Rounding::RNE
            };
            true
        })),
    },
    Fault {
        name: "mla-amla-correction-lagged",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the AMLA correction of O (the integer added to its f32 bits) applied one softmax step late, the row sum on time: a moderate rise of the running max (moderate_late_max) leaves the earlier steps over-weighted",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kernel.rescale != MlaRescale::Amla { return false; } r.kernel.rescale = MlaRescale::AmlaLagged; true
        })),
    },
    Fault {
        name: "mla-running-max-falls",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the running max replaced by each softmax step's own maximum, O and the row sum corrected only when it rises: a later step below an early maximum (moderate_early_max) is weighted up",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.kernel.rescale != MlaRescale::Amla { return false; } r.kernel.rescale = MlaRescale::AmlaStepMaxNotCarried; true
        })),
    },
    Fault {
        name: "mla-subnormal-inputs-flushed",
        family: "mla_decode",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "subnormal query, latent and rope elements read as zero of their sign (denormals-are-zero on the inputs): the latent columns of subnormal_outputs then give zeros",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::mla_decode::MlaRecipe, |r: &mut MlaRecipe| {
            if r.flushes_subnormal_inputs { return false; } r.flushes_subnormal_inputs = true; true
        })),
    },
];
