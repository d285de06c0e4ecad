//! `paged_kv`: reshape-and-cache (vLLM `reshape_and_cache`, torch_npu `npu_reshape_and_cache`)
//! as an op family: write new K and V rows into a paged cache at the slots of a slot mapping.
//!
//! Parameters (JSON, unknown fields rejected):
//!
//! | name | meaning |
//! |---|---|
//! | `dtype` | cache and row dtype: `bf16`, `f16` or `f32` |
//! | `layout` | `BnBsH`, `BnNBsD` (Ascend; K and V alike) or `vllm` (K `[blocks, N, D/x, bs, x]` with `x` = 16 bytes of elements, V `[blocks, N, D, bs]`) |
//! | `num_blocks`, `block_size` | cache size |
//! | `num_key_value_heads`, `head_dim` | row shape `[N, D]` |
//! | `num_tokens` | rows in `key`/`value` (and entries in `slot_mapping`) |
//! | `padding` | how many of them are padding (slot `-1`, skipped); default 0 |
//! | `slot_mapping_dtype` | `i32` (default, torch_npu) or `i64` (vLLM) |
//!
//! Tensors: inputs `key`, `value` `[num_tokens, N, D]`, `slot_mapping` `[num_tokens]`,
//! `key_cache_in`, `value_cache_in` (layout shapes); outputs `key_cache_out`, `value_cache_out`:
//! the input caches with the non-padding rows written in. The kernel works in place; the
//! harness passes the `_in` tensors and reads the result back as `_out`.
//!
//! Generated cases: `num_tokens - padding` distinct random slots, padding entries at random
//! positions; caches filled with a quiet NaN (bf16 `0x7FC0`, f16 `0x7E00`, f32 `0x7FC00000`)
//! except that each slot not written by the case holds older finite-or-special values with
//! probability 1/4, so a kernel that writes the wrong slot, skips a row or touches a neighbour
//! is caught bitwise.
//!
//! Recipes: `reference` returns the caches in their dtype, bitwise (NaN payloads preserved).
//! `oracle` returns the same data decoded exactly to F64 (as every family's oracle does); a NaN
//! there is f64 NaN, so NaN payload bits are only checked through `reference`. Data movement
//! has no reduction, so the thread count is irrelevant.

pub(crate) mod faults;
use super::path::{odd_above_one, ParamPath};
use super::{
    input, parse_params, special_values, ElemType, GenContext, OpCost, OpDescription, OpError,
    OpFamily, Tensor, TensorMap, TensorSpec, ORACLE,
};
use crate::formats::{DType, Rounding};
use crate::kv::{scatter, CacheGeometry, KvCacheLayout, KvError};
use crate::parallel::Threads;

/// The op name.
pub const NAME: &str = "paged_kv";
/// The bitwise data-movement recipe.
pub const REFERENCE: &str = "reference";
/// Largest cache (elements per K or V cache) a case may ask for: 2^28 (512 MiB of bf16).
pub const MAX_CACHE_ELEMENTS: usize = 1 << 28;
/// The slot value of padding tokens in generated slot mappings.
pub const PAD_SLOT: i64 = -1;

/// Cache layout choice of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub enum CacheLayoutParam {
    #[serde(rename = "BnBsH")]
    BnBsH,
    #[serde(rename = "BnNBsD")]
    BnNBsD,
    /// vLLM: key `[blocks, N, D/x, bs, x]`, value `[blocks, N, D, bs]`.
    #[serde(rename = "vllm")]
    Vllm,
}

/// Integer type of `slot_mapping`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotMappingDtype {
    #[default]
    I32,
    I64,
}

/// Parameters of one `paged_kv` case.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PagedKvParams {
    pub dtype: DType,
    pub layout: CacheLayoutParam,
    pub num_blocks: usize,
    pub block_size: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub num_tokens: usize,
    #[serde(default)]
    pub padding: usize,
    #[serde(default)]
    pub slot_mapping_dtype: SlotMappingDtype,
}

/// A validated case.
#[derive(Clone, Copy, Debug)]
struct Case {
    dtype: ElemType,
    geometry: CacheGeometry,
    key_layout: KvCacheLayout,
    value_layout: KvCacheLayout,
    num_tokens: usize,
    padding: usize,
    slot_dtype: ElemType,
}

/// The `paged_kv` family.
pub struct PagedKv;

fn invalid(param: &str, message: impl Into<String>) -> OpError {
    OpError::invalid_param(NAME, param, message)
}

impl PagedKvParams {
    fn case(&self) -> Result<Case, OpError> {
        for (name, v) in [
            ("num_blocks", self.num_blocks),
            ("block_size", self.block_size),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
        ] {
            if v == 0 {
                return Err(invalid(name, "must be positive"));
            }
        }
        let geometry = CacheGeometry {
            num_blocks: self.num_blocks,
            block_size: self.block_size,
            kv_heads: self.num_key_value_heads,
            head_dim: self.head_dim,
        };
        let elements = (self.num_blocks as u128)
            * (self.block_size as u128)
            * (self.num_key_value_heads as u128)
            * (self.head_dim as u128);
        if elements > MAX_CACHE_ELEMENTS as u128 {
            return Err(invalid(
                "num_blocks",
                format!("the cache would hold {elements} elements, more than {MAX_CACHE_ELEMENTS}"),
            ));
        }
        let (key_layout, value_layout) = match self.layout {
            CacheLayoutParam::BnBsH => (KvCacheLayout::BnBsH, KvCacheLayout::BnBsH),
            CacheLayoutParam::BnNBsD => (KvCacheLayout::BnNBsD, KvCacheLayout::BnNBsD),
            CacheLayoutParam::Vllm => (
                KvCacheLayout::vllm_key_for(self.dtype.size_bytes()),
                KvCacheLayout::VllmValue,
            ),
        };
        for layout in [key_layout, value_layout] {
            layout
                .validate(&geometry)
                .map_err(|e| invalid("head_dim", e.to_string()))?;
        }
        if self.padding > self.num_tokens {
            return Err(invalid(
                "padding",
                format!(
                    "{} padding tokens of only {} tokens",
                    self.padding, self.num_tokens
                ),
            ));
        }
        let written = self.num_tokens - self.padding;
        if written > geometry.num_slots() {
            return Err(invalid(
                "num_tokens",
                format!(
                    "{written} non-padding tokens need distinct slots; the cache has {}",
                    geometry.num_slots()
                ),
            ));
        }
        let rows = (self.num_tokens as u128) * (geometry.row_len() as u128);
        if rows > MAX_CACHE_ELEMENTS as u128 {
            return Err(invalid(
                "num_tokens",
                format!("{rows} row elements, more than {MAX_CACHE_ELEMENTS}"),
            ));
        }
        Ok(Case {
            dtype: self.dtype.into(),
            geometry,
            key_layout,
            value_layout,
            num_tokens: self.num_tokens,
            padding: self.padding,
            slot_dtype: match self.slot_mapping_dtype {
                SlotMappingDtype::I32 => ElemType::I32,
                SlotMappingDtype::I64 => ElemType::I64,
            },
        })
    }
}

impl Case {
    fn row_spec(&self, name: &str) -> TensorSpec {
        TensorSpec::new(
            name,
            self.dtype,
            vec![
                self.num_tokens,
                self.geometry.kv_heads,
                self.geometry.head_dim,
            ],
            &["t", "n", "d"],
        )
    }

    fn cache_spec(&self, name: &str, layout: KvCacheLayout) -> TensorSpec {
        TensorSpec::new(
            name,
            self.dtype,
            layout.shape(&self.geometry),
            layout.axes(),
        )
    }

    fn slot_spec(&self) -> TensorSpec {
        TensorSpec::new(
            "slot_mapping",
            self.slot_dtype,
            vec![self.num_tokens],
            &["t"],
        )
    }

    fn description(&self) -> OpDescription {
        let elem = self.dtype.size_bytes() as f64;
        let row = self.geometry.row_len() as f64;
        let tokens = self.num_tokens as f64;
        let written = (self.num_tokens - self.padding) as f64;
        OpDescription {
            inputs: vec![
                self.row_spec("key"),
                self.row_spec("value"),
                self.slot_spec(),
                self.cache_spec("key_cache_in", self.key_layout),
                self.cache_spec("value_cache_in", self.value_layout),
            ],
            outputs: vec![
                self.cache_spec("key_cache_out", self.key_layout),
                self.cache_spec("value_cache_out", self.value_layout),
            ],
            // The kernel updates the caches in place: it reads the K and V rows and the slot
            // mapping and writes the non-padding rows; untouched cache slots cost nothing.
            cost: OpCost {
                flops: 0.0,
                bytes: 2.0 * tokens * row * elem
                    + tokens * self.slot_dtype.size_bytes() as f64
                    + 2.0 * written * row * elem,
                compute: self.dtype,
            },
        }
    }
}

/// The quiet NaN a fresh cache is filled with, as the dtype's bits.
fn cache_nan_bits(dtype: ElemType) -> u32 {
    match dtype {
        ElemType::Bf16 => 0x7FC0,
        ElemType::F16 => 0x7E00,
        _ => 0x7FC0_0000,
    }
}

/// Little-endian words of `N` bytes.
fn words<const N: usize>(data: &[u8]) -> Vec<[u8; N]> {
    data.chunks_exact(N)
        .map(|c| {
            let mut w = [0u8; N];
            w.copy_from_slice(c);
            w
        })
        .collect()
}

fn unwords<const N: usize>(w: &[[u8; N]]) -> Vec<u8> {
    w.iter().flatten().copied().collect()
}

/// The names of a scatter's row input and cache input, for error messages.
#[derive(Clone, Copy)]
struct Names {
    rows: &'static str,
    cache: &'static str,
}

/// Maps a scatter error to the input it blames.
fn scatter_error(names: Names, e: KvError) -> OpError {
    let input = match e {
        KvError::SlotOutOfRange { .. } | KvError::DuplicateSlot { .. } => "slot_mapping",
        KvError::WrongLength { .. } => names.rows,
        _ => names.cache,
    };
    OpError::InvalidInput {
        op: NAME.to_string(),
        input: input.to_string(),
        message: e.to_string(),
    }
}

/// Writes `rows` into `cache` (both raw little-endian bytes of `N`-byte elements).
fn scatter_bytes<const N: usize>(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache: &[u8],
    rows: &[u8],
    slots: &[i64],
    names: Names,
) -> Result<Vec<u8>, OpError> {
    let mut c = words::<N>(cache);
    scatter(layout, g, &mut c, &words::<N>(rows), slots).map_err(|e| scatter_error(names, e))?;
    Ok(unwords(&c))
}

fn scatter_tensor(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache: &Tensor,
    rows: &Tensor,
    slots: &[i64],
    names: Names,
) -> Result<Vec<u8>, OpError> {
    match cache.dtype.size_bytes() {
        2 => scatter_bytes::<2>(layout, g, &cache.data, &rows.data, slots, names),
        4 => scatter_bytes::<4>(layout, g, &cache.data, &rows.data, slots, names),
        _ => Err(OpError::InvalidInput {
            op: NAME.to_string(),
            input: names.cache.to_string(),
            message: format!("unsupported cache dtype {}", cache.dtype.name()),
        }),
    }
}

/// A cache of `layout` filled with NaN, with each slot outside `targets` holding older values
/// from `ctx` with probability 1/4.
fn generate_cache(
    case: &Case,
    layout: KvCacheLayout,
    targets: &[bool],
    ctx: &mut GenContext,
) -> Result<Tensor, OpError> {
    let g = &case.geometry;
    let old: Vec<i64> = (0..g.num_slots())
        .filter(|&s| !targets[s] && ctx.below(4) == 0)
        .map(|s| s as i64)
        .collect();
    let values = ctx.values(old.len() * g.row_len(), &special_values(case.dtype));
    let rows = Tensor::round_values(
        case.dtype,
        vec![old.len(), g.row_len()],
        &values,
        Rounding::RNE,
    );
    let nan = cache_nan_bits(case.dtype).to_le_bytes();
    let data = match case.dtype.size_bytes() {
        2 => nan_cache_with_rows::<2>(layout, g, &nan, &rows.data, &old)?,
        _ => nan_cache_with_rows::<4>(layout, g, &nan, &rows.data, &old)?,
    };
    Ok(Tensor {
        dtype: case.dtype,
        shape: layout.shape(g),
        data,
    })
}

/// The bytes of a cache of `N`-byte elements, all `nan` (its low `N` bytes) except `rows`
/// written at `slots`.
fn nan_cache_with_rows<const N: usize>(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    nan: &[u8],
    rows: &[u8],
    slots: &[i64],
) -> Result<Vec<u8>, OpError> {
    let mut fill = [0u8; N];
    fill.copy_from_slice(&nan[..N]);
    let mut cache = vec![fill; g.len()];
    scatter(layout, g, &mut cache, &words::<N>(rows), slots).map_err(|e| OpError::Failed {
        op: NAME.to_string(),
        message: e.to_string(),
    })?;
    Ok(unwords(&cache))
}

/// Claims about the paged KV cache (this op and the PagedAttention path), fixed in the code
/// rather than a recipe field: each is a row of the fidelity ledger (`docs/ascend.md`).
pub const PAGED_KV_CLAIMS: [&str; 6] = [
    "kv.layout.bnbsh",
    "kv.layout.bnnbsd",
    "kv.block_size.range",
    "kv.slot_mapping.dtype",
    "kv.slot_mapping.padding",
    "kv.cache.untouched",
];

impl OpFamily for PagedKv {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        faults::FAULTS.iter().collect()
    }

    fn knob_family(&self) -> &'static str {
        "kv"
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        let _ = (dtype, edit);
        (preset == "reference").then(|| {
            PAGED_KV_CLAIMS
                .iter()
                .map(|&id| crate::knob::Knob::claim(id))
                .collect()
        })
    }
    fn knob_ids(&self) -> Vec<String> {
        PAGED_KV_CLAIMS.iter().map(|id| id.to_string()).collect()
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn recipes(&self) -> Vec<&'static str> {
        vec![REFERENCE]
    }

    fn paths(&self, params: &serde_json::Value) -> Result<Vec<ParamPath>, OpError> {
        let p: PagedKvParams = parse_params(NAME, params)?;
        Ok(vec![
            ParamPath::new(
                "padding_slots",
                "padding tokens (slot -1) that must write nothing",
                p.padding > 0,
            ),
            ParamPath::new(
                "odd_kv_heads",
                "an odd KV head count above 1: the head stride of every cache layout",
                odd_above_one(p.num_key_value_heads),
            ),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let p: PagedKvParams = parse_params(NAME, params)?;
        Ok(p.case()?.description())
    }

    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let p: PagedKvParams = parse_params(NAME, params)?;
        let case = p.case()?;
        let g = case.geometry;
        let written = case.num_tokens - case.padding;

        // Distinct slots: a partial Fisher-Yates shuffle of all slots.
        let mut all: Vec<u32> = (0..g.num_slots() as u32).collect();
        for i in 0..written {
            let j = i + ctx.below((all.len() - i) as u64) as usize;
            all.swap(i, j);
        }
        let mut slots: Vec<i64> = all[..written].iter().map(|&s| s as i64).collect();
        slots.extend(std::iter::repeat_n(PAD_SLOT, case.padding));
        ctx.shuffle(&mut slots);
        let mut targets = vec![false; g.num_slots()];
        for &s in &slots {
            if s >= 0 {
                targets[s as usize] = true;
            }
        }

        let mut out = TensorMap::new();
        let special = special_values(case.dtype);
        let row_shape = vec![case.num_tokens, g.kv_heads, g.head_dim];
        for name in ["key", "value"] {
            let v = ctx.values(case.num_tokens * g.row_len(), &special);
            out.insert(
                name.to_string(),
                Tensor::round_values(case.dtype, row_shape.clone(), &v, Rounding::RNE),
            );
        }
        let slot_tensor = match case.slot_dtype {
            ElemType::I64 => Tensor {
                dtype: ElemType::I64,
                shape: vec![case.num_tokens],
                data: slots.iter().flat_map(|s| s.to_le_bytes()).collect(),
            },
            _ => {
                let s32: Vec<i32> = slots.iter().map(|&s| s as i32).collect();
                Tensor::from_i32(vec![case.num_tokens], &s32)
            }
        };
        out.insert("slot_mapping".to_string(), slot_tensor);
        out.insert(
            "key_cache_in".to_string(),
            generate_cache(&case, case.key_layout, &targets, ctx)?,
        );
        out.insert(
            "value_cache_in".to_string(),
            generate_cache(&case, case.value_layout, &targets, ctx)?,
        );
        Ok(out)
    }

    fn run(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        inputs: &TensorMap,
        _threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let p: PagedKvParams = parse_params(NAME, params)?;
        let case = p.case()?;
        if recipe != ORACLE && recipe != REFERENCE {
            return Err(OpError::UnknownRecipe {
                op: NAME.to_string(),
                recipe: recipe.to_string(),
                known: format!("{ORACLE}, {REFERENCE}"),
            });
        }
        let desc = case.description();
        let key = input(NAME, inputs, &desc.inputs[0])?;
        let value = input(NAME, inputs, &desc.inputs[1])?;
        let slots = input(NAME, inputs, &desc.inputs[2])?
            .to_i64_vec()
            .map_err(|e| OpError::InvalidInput {
                op: NAME.to_string(),
                input: "slot_mapping".to_string(),
                message: e.to_string(),
            })?;
        let key_cache = input(NAME, inputs, &desc.inputs[3])?;
        let value_cache = input(NAME, inputs, &desc.inputs[4])?;
        let g = &case.geometry;
        let key_names = Names {
            rows: "key",
            cache: "key_cache_in",
        };
        let value_names = Names {
            rows: "value",
            cache: "value_cache_in",
        };
        let k = scatter_tensor(case.key_layout, g, key_cache, key, &slots, key_names)?;
        let v = scatter_tensor(
            case.value_layout,
            g,
            value_cache,
            value,
            &slots,
            value_names,
        )?;

        let mut out = TensorMap::new();
        for (spec, data) in desc.outputs.iter().zip([k, v]) {
            let t = Tensor {
                dtype: spec.dtype,
                shape: spec.shape.clone(),
                data,
            };
            let t = if recipe == ORACLE {
                Tensor::of_f64(t.shape.clone(), &t.to_f64_vec())
            } else {
                t
            };
            out.insert(spec.name.clone(), t);
        }
        Ok(out)
    }
}
