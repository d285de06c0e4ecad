//! `mla_decode`'s recipe ([`MlaRecipe`]): how the kernel uses the rope part of the keys, the
//! attention kernel's knobs it runs with, and its preset.

use crate::attention::mla::{MlaKernel, LATENT};
use crate::formats::DType;
use crate::knob::{rounding_name, Knob};

/// How the rope term enters the score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeUse {
    /// `q_rope . k_rope` (the API).
    Added,
    /// Left out (a bug).
    Dropped,
    /// The key's rope halves (0..32, 32..64) exchanged, as if the two K groups of the
    /// kernel's permuted load took each other's rope half (a bug).
    KeyHalvesSwapped,
    /// `q_rope` against the first 64 latent columns of the key instead of `k_rope` (a bug).
    AgainstLatent,
}

/// The numerics of one `mla_decode` step: the write, the way the inputs are read, and the
/// attention kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct MlaRecipe {
    pub kernel: MlaKernel,
    pub rope: RopeUse,
    /// Latent columns the values (and the output) use: 512; a smaller width models the latent
    /// width taken as the head_dim (the rest of the output is 0).
    pub value_width: usize,
    /// The scale recomputed as 1/sqrt(576) instead of the caller's (a bug).
    pub scale_from_width: bool,
    /// Query head h reads KV head h of a `[blocks, N, block_size, D]` cache (the one KV head
    /// not shared; a bug): offsets wrap around the cache.
    pub kv_head_per_query_head: bool,
    /// Added to every physical block the table gives (0; 1 is an off-by-one).
    pub table_shift: usize,
    /// Added to every slot of the slot mapping (0; 1 is an off-by-one).
    pub slot_shift: usize,
    /// Subnormal query, key and value elements read as zero of their sign (true: a kernel
    /// with denormals-are-zero on its inputs, a bug).
    pub flushes_subnormal_inputs: bool,
}

impl MlaRecipe {
    /// A preset by name for `dtype`.
    pub fn preset(name: &str, dtype: DType) -> Option<MlaRecipe> {
        match name {
            "ascend_mla" => Some(MlaRecipe {
                kernel: MlaKernel::ascend(dtype),
                rope: RopeUse::Added,
                value_width: LATENT,
                scale_from_width: false,
                kv_head_per_query_head: false,
                table_shift: 0,
                slot_shift: 0,
                flushes_subnormal_inputs: false,
            }),
            _ => None,
        }
    }

    /// The ledger knobs of the preset (ids `mla.<preset>.<field>`, docs/ascend.md).
    pub fn knobs(&self, preset: &str) -> Vec<Knob> {
        let MlaRecipe {
            kernel,
            rope,
            value_width,
            scale_from_width,
            kv_head_per_query_head,
            table_shift,
            slot_shift,
            flushes_subnormal_inputs,
        } = self;
        let MlaKernel {
            key_order,
            k_chunk,
            step,
            rescale,
            factor_rounding,
            p_rounding,
            output_rounding,
            zero_huge,
            lse_with_max,
        } = kernel;
        let id = |f: &str| format!("mla.{preset}.{f}");
        vec![
            Knob::new(id("key_order"), format!("{key_order:?}")),
            Knob::new(id("k_chunk"), format!("{k_chunk}")),
            Knob::new(id("step"), format!("{step}")),
            Knob::new(id("rescale"), format!("{rescale:?}")),
            Knob::new(id("factor_rounding"), rounding_name(factor_rounding)),
            Knob::new(id("p_rounding"), rounding_name(p_rounding)),
            Knob::new(id("output_rounding"), rounding_name(output_rounding)),
            Knob::new(id("zero_huge"), format!("{zero_huge}")),
            Knob::new(id("lse_with_max"), format!("{lse_with_max}")),
            Knob::new(id("rope"), format!("{rope:?}")),
            Knob::new(id("value_width"), format!("{value_width}")),
            Knob::new(id("scale_from_width"), format!("{scale_from_width}")),
            Knob::new(
                id("kv_head_per_query_head"),
                format!("{kv_head_per_query_head}"),
            ),
            Knob::new(id("table_shift"), format!("{table_shift}")),
            Knob::new(id("slot_shift"), format!("{slot_shift}")),
            Knob::new(
                id("flushes_subnormal_inputs"),
                format!("{flushes_subnormal_inputs}"),
            ),
        ]
    }
}
