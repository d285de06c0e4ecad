//! Attention configuration, named as torch_npu's `npu_fused_infer_attention_score` names it,
//! and its validation into a [`Geometry`]: per-batch lengths and the element offsets of every
//! query, key, value, output and LSE row in the chosen layout.
//!
//! Facts used (docs/numerics.md, "The FIA call"): layouts
//! BSND, BNSD, BSH, TND (cumulative `actual_seq_lengths`) and the mixed BNSD_BSND; N <= 256,
//! D <= 512, Q_N / KV_N integral with ratio <= 64; `num_key_value_heads = 0` means "equal to
//! `num_heads`"; sparse_mode 0 (none / explicit mask), 2 (top-left causal), 3 (bottom-right
//! causal), 4 (band with pre_tokens / next_tokens); softmax_lse shape (B, N, Q_S, 1) or
//! (T, N, 1); default scale 1/sqrt(D).

use super::error::AttentionError;
use crate::formats::{f32::f64_to_f32, DType, Rounding};
use crate::math;

/// The largest head_dim the Ascend kernels accept.
pub const MAX_HEAD_DIM: usize = 512;
/// The largest rope part a key may carry beyond [`MAX_HEAD_DIM`] when key and value widths
/// differ (FIA's MLA path: a 512-wide latent plus a 64-wide rope key, values 512 wide).
pub const MAX_ROPE_DIM: usize = 64;
/// The most query heads the MLA path's one KV head serves (FIA page: N up to 128).
pub const MAX_MLA_GROUP: usize = 128;
/// The largest query-to-KV head ratio the Ascend kernels accept.
pub const MAX_GQA_RATIO: usize = 64;
/// The largest head count the Ascend kernels accept.
pub const MAX_HEADS: usize = 256;

/// Query (and key/value) layout, and the output layout it implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum InputLayout {
    /// `[B, S, N, D]`, output `[B, S, N, D]`.
    #[serde(rename = "BSND")]
    Bsnd,
    /// `[B, N, S, D]`, output `[B, N, S, D]`.
    #[serde(rename = "BNSD")]
    Bnsd,
    /// `[B, S, N*D]`, output `[B, S, N*D]`.
    #[serde(rename = "BSH")]
    Bsh,
    /// Varlen `[T, N, D]` with cumulative `actual_seq_lengths`; output `[T, N, D]`.
    #[serde(rename = "TND")]
    Tnd,
    /// Inputs `[B, N, S, D]`, output `[B, S, N, D]`.
    #[serde(rename = "BNSD_BSND")]
    BnsdBsnd,
}

impl InputLayout {
    /// The torch_npu name.
    pub fn name(self) -> &'static str {
        match self {
            InputLayout::Bsnd => "BSND",
            InputLayout::Bnsd => "BNSD",
            InputLayout::Bsh => "BSH",
            InputLayout::Tnd => "TND",
            InputLayout::BnsdBsnd => "BNSD_BSND",
        }
    }

    /// Whether rows are indexed by a flat token index (varlen).
    pub fn is_varlen(self) -> bool {
        self == InputLayout::Tnd
    }
}

/// The structured mask of `sparse_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SparseMode {
    /// 0: no structured mask (an explicit `atten_mask` may still apply).
    None,
    /// 2: causal, aligned top-left: key j allowed iff j <= i.
    TopLeftCausal,
    /// 3: causal, aligned bottom-right: key j allowed iff j <= i + (Lk - Lq).
    BottomRightCausal,
    /// 4: band, aligned bottom-right: i + (Lk - Lq) - pre_tokens <= j <= i + (Lk - Lq) +
    /// next_tokens.
    Band { pre_tokens: i64, next_tokens: i64 },
}

/// One attention case, with torch_npu's parameter names.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionConfig {
    pub dtype: DType,
    pub input_layout: InputLayout,
    pub batch: usize,
    /// Padded query length S (ignored for TND, where T comes from `actual_seq_lengths`).
    pub q_seq: usize,
    /// Padded key/value length S_kv (ignored for TND).
    pub kv_seq: usize,
    pub num_heads: usize,
    /// 0 means equal to `num_heads`.
    pub num_key_value_heads: usize,
    /// Width of query and key rows.
    pub head_dim: usize,
    /// Width of value and output rows; 0 means equal to `head_dim` (MLA: keys 576 = latent
    /// 512 + rope 64, values 512).
    pub value_head_dim: usize,
    /// None: 1/sqrt(head_dim).
    pub scale: Option<f64>,
    /// 0, 2, 3 or 4.
    pub sparse_mode: u32,
    pub pre_tokens: i64,
    pub next_tokens: i64,
    /// Whether an explicit boolean `atten_mask` `[B, q_seq, kv_seq]` (1 = masked) is given.
    pub atten_mask: bool,
    /// Per-batch query lengths (cumulative for TND).
    pub actual_seq_lengths: Option<Vec<i64>>,
    /// Per-batch key/value lengths (cumulative for TND).
    pub actual_seq_lengths_kv: Option<Vec<i64>>,
    pub softmax_lse_flag: bool,
}

impl AttentionConfig {
    /// A plain BSND configuration without mask or per-batch lengths.
    pub fn new(
        dtype: DType,
        batch: usize,
        q_seq: usize,
        kv_seq: usize,
        num_heads: usize,
        num_key_value_heads: usize,
        head_dim: usize,
    ) -> AttentionConfig {
        AttentionConfig {
            dtype,
            input_layout: InputLayout::Bsnd,
            batch,
            q_seq,
            kv_seq,
            num_heads,
            num_key_value_heads,
            head_dim,
            value_head_dim: 0,
            scale: None,
            sparse_mode: 0,
            pre_tokens: i32::MAX as i64,
            next_tokens: i32::MAX as i64,
            atten_mask: false,
            actual_seq_lengths: None,
            actual_seq_lengths_kv: None,
            softmax_lse_flag: false,
        }
    }

    /// Validates the configuration into its [`Geometry`].
    pub fn geometry(&self) -> Result<Geometry, AttentionError> {
        Geometry::new(self)
    }
}

/// A validated configuration: lengths and offsets, all checked to fit the tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub dtype: DType,
    pub layout: InputLayout,
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    /// Width of query and key rows.
    pub head_dim: usize,
    /// Width of value and output rows (equal to `head_dim` except on the MLA path).
    pub value_dim: usize,
    /// Query heads per KV head.
    pub group: usize,
    /// The scale as the kernels receive it: rounded to f32 once (RNE) from the f64 parameter.
    pub scale: f32,
    pub sparse: SparseMode,
    pub atten_mask: bool,
    pub softmax_lse_flag: bool,
    /// Padded query / KV lengths (max per-batch lengths for TND).
    pub q_seq: usize,
    pub kv_seq: usize,
    /// Per-batch valid query / KV lengths.
    pub lq: Vec<usize>,
    pub lk: Vec<usize>,
    /// TND: first token of each batch (query / KV).
    q_start: Vec<usize>,
    kv_start: Vec<usize>,
    /// Total tokens (TND) or B * S.
    pub q_tokens: usize,
    pub kv_tokens: usize,
}

fn lengths(
    name: &str,
    given: &Option<Vec<i64>>,
    batch: usize,
    cumulative: bool,
    capacity: Option<usize>,
) -> Result<(Vec<usize>, Vec<usize>), AttentionError> {
    let Some(v) = given else {
        if cumulative {
            return Err(AttentionError::param(
                name,
                "required (cumulative lengths) for input_layout TND",
            ));
        }
        let cap = capacity.unwrap_or(0);
        return Ok((vec![cap; batch], (0..batch).map(|b| b * cap).collect()));
    };
    if v.len() != batch {
        return Err(AttentionError::param(
            name,
            format!("has {} entries, batch is {batch}", v.len()),
        ));
    }
    let mut lens = Vec::with_capacity(batch);
    let mut starts = Vec::with_capacity(batch);
    let mut prev = 0i64;
    for (b, &x) in v.iter().enumerate() {
        if x < 0 {
            return Err(AttentionError::param(
                format!("{name}[{b}]"),
                format!("{x} is negative"),
            ));
        }
        let len = if cumulative {
            if x < prev {
                return Err(AttentionError::param(
                    format!("{name}[{b}]"),
                    format!("cumulative lengths must not decrease ({x} < {prev})"),
                ));
            }
            (x - prev) as usize
        } else {
            x as usize
        };
        if let Some(cap) = capacity
            && len > cap
        {
            return Err(AttentionError::param(
                format!("{name}[{b}]"),
                format!("length {len} exceeds the sequence capacity {cap}"),
            ));
        }
        starts.push(if cumulative {
            prev as usize
        } else {
            b * capacity.unwrap_or(0)
        });
        lens.push(len);
        prev = x;
    }
    Ok((lens, starts))
}

/// The per-batch lengths and starts of the query and KV rows, with the padded lengths and
/// token totals they imply.
struct Extents {
    lq: Vec<usize>,
    q_start: Vec<usize>,
    lk: Vec<usize>,
    kv_start: Vec<usize>,
    q_seq: usize,
    kv_seq: usize,
    q_tokens: usize,
    kv_tokens: usize,
}

/// Checks batch, head counts and head_dim; returns the KV head count and the group size.
fn validate_heads(c: &AttentionConfig) -> Result<(usize, usize), AttentionError> {
    if c.batch == 0 {
        return Err(AttentionError::param("batch", "must be positive"));
    }
    if c.num_heads == 0 || c.num_heads > MAX_HEADS {
        return Err(AttentionError::param(
            "num_heads",
            format!("{} is outside 1..={MAX_HEADS}", c.num_heads),
        ));
    }
    let kv_heads = if c.num_key_value_heads == 0 {
        c.num_heads
    } else {
        c.num_key_value_heads
    };
    if !c.num_heads.is_multiple_of(kv_heads) {
        return Err(AttentionError::param(
            "num_key_value_heads",
            format!("num_heads {} is not a multiple of {kv_heads}", c.num_heads),
        ));
    }
    let group = c.num_heads / kv_heads;
    // The MLA path (distinct value width) shares its one KV head with up to 128 query heads.
    let split = c.value_head_dim != 0 && c.value_head_dim != c.head_dim;
    let max_group = if split { MAX_MLA_GROUP } else { MAX_GQA_RATIO };
    if group > max_group {
        return Err(AttentionError::param(
            "num_key_value_heads",
            format!("num_heads / num_key_value_heads = {group} exceeds {max_group}"),
        ));
    }
    // With distinct value width (MLA), keys may carry a rope part beyond MAX_HEAD_DIM.
    let max_key = if split {
        MAX_HEAD_DIM + MAX_ROPE_DIM
    } else {
        MAX_HEAD_DIM
    };
    if c.head_dim == 0 || c.head_dim > max_key {
        return Err(AttentionError::param(
            "head_dim",
            format!("{} is outside 1..={max_key}", c.head_dim),
        ));
    }
    if c.value_head_dim > MAX_HEAD_DIM {
        return Err(AttentionError::param(
            "value_head_dim",
            format!("{} is outside 1..={MAX_HEAD_DIM}", c.value_head_dim),
        ));
    }
    Ok((kv_heads, group))
}

/// The scale as the kernels receive it: the given one or 1/sqrt(head_dim), rounded to f32 (RNE).
fn derive_scale(c: &AttentionConfig) -> Result<f32, AttentionError> {
    let scale64 = match c.scale {
        Some(s) if !s.is_finite() => {
            return Err(AttentionError::param("scale", format!("{s} is not finite")))
        }
        Some(s) => s,
        None => 1.0 / math::sqrt_f64(c.head_dim as f64),
    };
    let scale = f64_to_f32(scale64, Rounding::RNE);
    if !scale.is_finite() {
        return Err(AttentionError::param("scale", "overflows f32"));
    }
    Ok(scale)
}

/// The structured mask that `sparse_mode` names.
fn derive_sparse(c: &AttentionConfig) -> Result<SparseMode, AttentionError> {
    match c.sparse_mode {
        0 => Ok(SparseMode::None),
        2 => Ok(SparseMode::TopLeftCausal),
        3 => Ok(SparseMode::BottomRightCausal),
        4 => Ok(SparseMode::Band {
            pre_tokens: c.pre_tokens,
            next_tokens: c.next_tokens,
        }),
        m => Err(AttentionError::param(
            "sparse_mode",
            format!("{m} is not supported (0, 2, 3 or 4)"),
        )),
    }
}

/// The query and KV sequence capacities: none for varlen (TND), else the positive padded
/// lengths. Also rejects an explicit mask with TND.
fn capacities(
    c: &AttentionConfig,
    varlen: bool,
) -> Result<(Option<usize>, Option<usize>), AttentionError> {
    if varlen && c.atten_mask {
        return Err(AttentionError::param(
            "atten_mask",
            "an explicit mask is not supported with input_layout TND",
        ));
    }
    if varlen {
        return Ok((None, None));
    }
    if c.q_seq == 0 {
        return Err(AttentionError::param("q_seq", "must be positive"));
    }
    if c.kv_seq == 0 {
        return Err(AttentionError::param("kv_seq", "must be positive"));
    }
    Ok((Some(c.q_seq), Some(c.kv_seq)))
}

/// The per-batch lengths and starts, the padded lengths and the token totals.
fn derive_extents(c: &AttentionConfig, varlen: bool) -> Result<Extents, AttentionError> {
    let (qcap, kvcap) = capacities(c, varlen)?;
    let (lq, q_start) = lengths(
        "actual_seq_lengths",
        &c.actual_seq_lengths,
        c.batch,
        varlen,
        qcap,
    )?;
    let (lk, kv_start) = lengths(
        "actual_seq_lengths_kv",
        &c.actual_seq_lengths_kv,
        c.batch,
        varlen,
        kvcap,
    )?;
    let (q_seq, kv_seq, q_tokens, kv_tokens) = if varlen {
        let qt = q_start[c.batch - 1] + lq[c.batch - 1];
        let kt = kv_start[c.batch - 1] + lk[c.batch - 1];
        if qt == 0 {
            return Err(AttentionError::param(
                "actual_seq_lengths",
                "the total token count is zero",
            ));
        }
        if kt == 0 {
            return Err(AttentionError::param(
                "actual_seq_lengths_kv",
                "the total token count is zero",
            ));
        }
        (
            lq.iter().copied().max().unwrap_or(0),
            lk.iter().copied().max().unwrap_or(0),
            qt,
            kt,
        )
    } else {
        (c.q_seq, c.kv_seq, c.batch * c.q_seq, c.batch * c.kv_seq)
    };
    Ok(Extents {
        lq,
        q_start,
        lk,
        kv_start,
        q_seq,
        kv_seq,
        q_tokens,
        kv_tokens,
    })
}

/// Every tensor size (and the mask's, when given) must fit usize arithmetic.
fn check_sizes(c: &AttentionConfig, e: &Extents) -> Result<(), AttentionError> {
    for (name, tokens) in [("q_seq", e.q_tokens), ("kv_seq", e.kv_tokens)] {
        tokens
            .checked_mul(c.num_heads)
            .and_then(|x| x.checked_mul(c.head_dim.max(c.value_head_dim)))
            .and_then(|x| x.checked_mul(8))
            .ok_or_else(|| AttentionError::param(name, "tensor size overflows"))?;
    }
    if c.atten_mask {
        c.batch
            .checked_mul(e.q_seq)
            .and_then(|x| x.checked_mul(e.kv_seq))
            .ok_or_else(|| AttentionError::param("atten_mask", "mask size overflows"))?;
    }
    Ok(())
}

impl Geometry {
    fn new(c: &AttentionConfig) -> Result<Geometry, AttentionError> {
        let (kv_heads, group) = validate_heads(c)?;
        let scale = derive_scale(c)?;
        let sparse = derive_sparse(c)?;
        let e = derive_extents(c, c.input_layout.is_varlen())?;
        check_sizes(c, &e)?;
        Ok(Geometry {
            dtype: c.dtype,
            layout: c.input_layout,
            batch: c.batch,
            heads: c.num_heads,
            kv_heads,
            head_dim: c.head_dim,
            value_dim: if c.value_head_dim == 0 {
                c.head_dim
            } else {
                c.value_head_dim
            },
            group,
            scale,
            sparse,
            atten_mask: c.atten_mask,
            softmax_lse_flag: c.softmax_lse_flag,
            q_seq: e.q_seq,
            kv_seq: e.kv_seq,
            lq: e.lq,
            lk: e.lk,
            q_start: e.q_start,
            kv_start: e.kv_start,
            q_tokens: e.q_tokens,
            kv_tokens: e.kv_tokens,
        })
    }

    /// The units of work of a whole pass: for each batch and query head, the query rows in
    /// chunks of at most `rows`, as `(b, h, r0, r1)`, in that order.
    pub(crate) fn row_tasks(&self, rows: usize) -> Vec<(usize, usize, usize, usize)> {
        let mut tasks = Vec::new();
        for b in 0..self.batch {
            for h in 0..self.heads {
                let mut r0 = 0;
                while r0 < self.lq[b] {
                    let r1 = (r0 + rows).min(self.lq[b]);
                    tasks.push((b, h, r0, r1));
                    r0 = r1;
                }
            }
        }
        tasks
    }

    /// The recipe algorithms ([`super::flash`], [`super::paged`]) take one width for query,
    /// key and value; the MLA path ([`super::mla`]) and the oracle take two.
    pub(crate) fn require_one_width(&self) -> Result<(), AttentionError> {
        if self.value_dim != self.head_dim {
            return Err(AttentionError::param(
                "value_head_dim",
                format!(
                    "{} differs from head_dim {}: only the oracle and the MLA recipe take distinct key and value widths",
                    self.value_dim, self.head_dim
                ),
            ));
        }
        Ok(())
    }

    /// The KV head that query head `h` reads (`h / (Hq / Hkv)`).
    #[inline]
    pub fn kv_head(&self, h: usize) -> usize {
        h / self.group
    }

    /// Shape of the query tensor.
    pub fn q_shape(&self) -> Vec<usize> {
        self.shape(
            self.layout,
            self.q_seq,
            self.q_tokens,
            self.heads,
            self.head_dim,
        )
    }

    /// Shape of the key (and value) tensor.
    pub fn kv_shape(&self) -> Vec<usize> {
        self.shape(
            self.layout,
            self.kv_seq,
            self.kv_tokens,
            self.kv_heads,
            self.head_dim,
        )
    }

    /// Shape of the value tensor (the key's, with the value width).
    pub fn v_shape(&self) -> Vec<usize> {
        self.shape(
            self.layout,
            self.kv_seq,
            self.kv_tokens,
            self.kv_heads,
            self.value_dim,
        )
    }

    /// Shape of `attention_out`.
    pub fn out_shape(&self) -> Vec<usize> {
        let layout = match self.layout {
            InputLayout::BnsdBsnd => InputLayout::Bsnd,
            l => l,
        };
        self.shape(
            layout,
            self.q_seq,
            self.q_tokens,
            self.heads,
            self.value_dim,
        )
    }

    /// Axis names of [`Geometry::q_shape`] / [`Geometry::kv_shape`].
    pub fn in_axes(&self) -> &'static [&'static str] {
        Self::axes(self.layout)
    }

    /// Axis names of [`Geometry::out_shape`].
    pub fn out_axes(&self) -> &'static [&'static str] {
        match self.layout {
            InputLayout::BnsdBsnd => Self::axes(InputLayout::Bsnd),
            l => Self::axes(l),
        }
    }

    fn axes(layout: InputLayout) -> &'static [&'static str] {
        match layout {
            InputLayout::Bsnd | InputLayout::BnsdBsnd => &["b", "s", "n", "d"],
            InputLayout::Bnsd => &["b", "n", "s", "d"],
            InputLayout::Bsh => &["b", "s", "h"],
            InputLayout::Tnd => &["t", "n", "d"],
        }
    }

    fn shape(
        &self,
        layout: InputLayout,
        seq: usize,
        tokens: usize,
        heads: usize,
        d: usize,
    ) -> Vec<usize> {
        match layout {
            InputLayout::Bsnd => vec![self.batch, seq, heads, d],
            InputLayout::Bnsd | InputLayout::BnsdBsnd => vec![self.batch, heads, seq, d],
            InputLayout::Bsh => vec![self.batch, seq, heads * d],
            InputLayout::Tnd => vec![tokens, heads, d],
        }
    }

    /// Shape of `softmax_lse`: `[B, N, S, 1]`, or `[T, N, 1]` for TND.
    pub fn lse_shape(&self) -> Vec<usize> {
        if self.layout.is_varlen() {
            vec![self.q_tokens, self.heads, 1]
        } else {
            vec![self.batch, self.heads, self.q_seq, 1]
        }
    }

    /// Shape of the explicit `atten_mask`: `[B, q_seq, kv_seq]`.
    pub fn mask_shape(&self) -> Vec<usize> {
        vec![self.batch, self.q_seq, self.kv_seq]
    }

    /// Element count of the query / KV / output / LSE tensors.
    pub fn q_len(&self) -> usize {
        self.q_tokens * self.heads * self.head_dim
    }
    pub fn kv_len(&self) -> usize {
        self.kv_tokens * self.kv_heads * self.head_dim
    }
    /// Element count of the value tensor.
    pub fn v_len(&self) -> usize {
        self.kv_tokens * self.kv_heads * self.value_dim
    }
    pub fn out_len(&self) -> usize {
        self.q_tokens * self.heads * self.value_dim
    }
    pub fn lse_len(&self) -> usize {
        self.q_tokens * self.heads
    }

    #[allow(clippy::too_many_arguments)]
    fn row_offset(
        &self,
        layout: InputLayout,
        starts: &[usize],
        seq: usize,
        heads: usize,
        b: usize,
        i: usize,
        n: usize,
        d: usize,
    ) -> usize {
        match layout {
            InputLayout::Bsnd | InputLayout::Bsh => ((b * seq + i) * heads + n) * d,
            InputLayout::Bnsd | InputLayout::BnsdBsnd => ((b * heads + n) * seq + i) * d,
            InputLayout::Tnd => ((starts[b] + i) * heads + n) * d,
        }
    }

    /// Offset of query row (b, i, head h) (its `head_dim` values are contiguous).
    #[inline]
    pub fn q_offset(&self, b: usize, i: usize, h: usize) -> usize {
        self.row_offset(
            self.layout,
            &self.q_start,
            self.q_seq,
            self.heads,
            b,
            i,
            h,
            self.head_dim,
        )
    }

    /// Distance between query rows i and i + 1 of one (b, h).
    pub fn q_stride(&self) -> usize {
        self.row_stride(self.heads)
    }

    /// Offset of key/value row (b, j, kv head).
    #[inline]
    pub fn kv_offset(&self, b: usize, j: usize, kvh: usize) -> usize {
        self.row_offset(
            self.layout,
            &self.kv_start,
            self.kv_seq,
            self.kv_heads,
            b,
            j,
            kvh,
            self.head_dim,
        )
    }

    /// Offset of value row (b, j, kv head) (its `value_dim` values are contiguous).
    #[inline]
    pub fn v_offset(&self, b: usize, j: usize, kvh: usize) -> usize {
        self.row_offset(
            self.layout,
            &self.kv_start,
            self.kv_seq,
            self.kv_heads,
            b,
            j,
            kvh,
            self.value_dim,
        )
    }

    /// Distance between key rows j and j + 1 of one (b, kv head).
    pub fn kv_stride(&self) -> usize {
        self.row_stride(self.kv_heads)
    }

    /// Distance between consecutive sequence rows of one (b, head) of a tensor with `heads`
    /// heads in the input layout.
    fn row_stride(&self, heads: usize) -> usize {
        match self.layout {
            InputLayout::Bnsd | InputLayout::BnsdBsnd => self.head_dim,
            _ => heads * self.head_dim,
        }
    }

    /// Offset of output row (b, i, head h).
    #[inline]
    pub fn out_offset(&self, b: usize, i: usize, h: usize) -> usize {
        let layout = match self.layout {
            InputLayout::BnsdBsnd => InputLayout::Bsnd,
            l => l,
        };
        self.row_offset(
            layout,
            &self.q_start,
            self.q_seq,
            self.heads,
            b,
            i,
            h,
            self.value_dim,
        )
    }

    /// Index of the LSE of (b, i, head h).
    #[inline]
    pub fn lse_index(&self, b: usize, i: usize, h: usize) -> usize {
        if self.layout.is_varlen() {
            (self.q_start[b] + i) * self.heads + h
        } else {
            (b * self.heads + h) * self.q_seq + i
        }
    }

    /// Rows of a batch that exist in the query tensor (padded length, or the TND length).
    pub fn q_rows(&self, b: usize) -> usize {
        if self.layout.is_varlen() {
            self.lq[b]
        } else {
            self.q_seq
        }
    }

    /// Offset of mask element (b, i, j).
    #[inline]
    pub fn mask_offset(&self, b: usize, i: usize, j: usize) -> usize {
        (b * self.q_seq + i) * self.kv_seq + j
    }

    /// Checks the sizes of the query, key, value and optional mask buffers.
    pub fn check_inputs(
        &self,
        q: usize,
        k: usize,
        v: usize,
        mask: Option<usize>,
    ) -> Result<(), AttentionError> {
        let check = |tensor: &str, shape: Vec<usize>, actual: usize| {
            let expected: usize = shape.iter().product();
            if expected != actual {
                Err(AttentionError::WrongInputSize {
                    tensor: tensor.to_string(),
                    shape,
                    expected,
                    actual,
                })
            } else {
                Ok(())
            }
        };
        check("query", self.q_shape(), q)?;
        check("key", self.kv_shape(), k)?;
        check("value", self.v_shape(), v)?;
        match (self.atten_mask, mask) {
            (true, Some(m)) => check("atten_mask", self.mask_shape(), m),
            (true, None) => Err(AttentionError::param(
                "atten_mask",
                "the configuration asks for an explicit mask but none was given",
            )),
            (false, Some(_)) => Err(AttentionError::param(
                "atten_mask",
                "a mask was given but the configuration has atten_mask = false",
            )),
            (false, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_cover_each_tensor_exactly_once() {
        for layout in [
            InputLayout::Bsnd,
            InputLayout::Bnsd,
            InputLayout::Bsh,
            InputLayout::BnsdBsnd,
        ] {
            let mut c = AttentionConfig::new(DType::Bf16, 2, 3, 5, 4, 2, 8);
            c.input_layout = layout;
            let g = c.geometry().unwrap();
            let mut seen = vec![false; g.q_len()];
            for b in 0..2 {
                for i in 0..3 {
                    for h in 0..4 {
                        let o = g.q_offset(b, i, h);
                        assert!(!seen[o]);
                        seen[o] = true;
                        if i > 0 {
                            assert_eq!(o - g.q_offset(b, i - 1, h), g.q_stride());
                        }
                    }
                }
            }
            assert!(seen.iter().step_by(8).all(|&x| x));
        }
    }

    #[test]
    fn tnd_uses_cumulative_lengths() {
        let mut c = AttentionConfig::new(DType::Bf16, 3, 0, 0, 2, 1, 8);
        c.input_layout = InputLayout::Tnd;
        c.actual_seq_lengths = Some(vec![2, 2, 7]);
        c.actual_seq_lengths_kv = Some(vec![3, 4, 9]);
        let g = c.geometry().unwrap();
        assert_eq!(g.lq, vec![2, 0, 5]);
        assert_eq!(g.lk, vec![3, 1, 5]);
        assert_eq!(g.q_shape(), vec![7, 2, 8]);
        assert_eq!(g.kv_shape(), vec![9, 1, 8]);
        assert_eq!(g.q_offset(2, 1, 1), (3 * 2 + 1) * 8);
        c.actual_seq_lengths = Some(vec![2, 1, 7]);
        assert_eq!(c.geometry().unwrap_err().subject(), "actual_seq_lengths[1]");
    }
}
