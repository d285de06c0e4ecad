//! Multi-head Latent Attention (DeepSeek MLA) decode, as the A2 MLA kernel of
//! FusedInferAttentionScore computes it when `query_rope` and `key_rope` are given: keys are
//! 576 wide (the 512-wide latent `c_kv` and the 64-wide rope key), values are the latent rows
//! (512 wide), and one KV head serves every query head.
//!
//! The arithmetic of one query row (one head of one batch entry), [`MlaKernel`] choosing each
//! step (sources and what is assumed: docs/ascend.md, rows `mla.*`):
//! 1. score `s_j = f32(q . k_j) * scale`: one 576-long dot product accumulated in f32, the K
//!    axis permuted as the kernel loads it (`[c_kv 0..256, rope 0..32]` then `[rope 32..64,
//!    c_kv 256..512]`) and cut into chunks of 96; each chunk is summed in order from 0 (the
//!    order inside a chunk is the hardware's: assumed sequential), and the chunk sums are
//!    added to the accumulator in order. Products of two bf16 or two f16 values are exact in
//!    f32, so only the additions round (RNE).
//! 2. keys in softmax steps of up to 512: `m_i = max(m_{i-1}, max_j s_j)`, `P = exp(s - m_i)`
//!    (f32, the crate's exp), `l_i = l_{i-1} * exp(m_{i-1} - m_i) + rowsum(P)` (the row sum in
//!    the 16-lane order the other attention recipes assume).
//! 3. AMLA ([`MlaRescale::Amla`]): `n_i = round_away(m_i * -1/ln2)`, the factor `f = exp((m_i
//!    / ln2 + n_i) ln2)` (f32 steps), rounded to the KV dtype ties-away (`fr`); `P * fr`
//!    rounded to the KV dtype ties-away is what the P V matmul reads. The running O is never
//!    multiplied: from the second step an integer is added to each element's f32 bit pattern,
//!    `round_away((max(n_i - n_{i-1}, -30) + (1.5 (cof_{i-1} / cof_i - 1) + 1e-6)) * 2^23)`
//!    with `cof = f / fr` (`cof_0 = 1`), then the step's P V (f32) is added. At the end
//!    elements with `|O| > 1e10` become 0 and `O / (l * fr_last)`.
//!    [`MlaRescale::Classic`] (a fault model: the generic flash kernel's rescale) rounds P
//!    without a factor, `O = O * exp(m_{i-1} - m_i) + P V`, and divides by `l`.
//! 4. the output rounded to the output dtype (bf16 RNE, f16 ties-away: the kernel's casts);
//!    LSE `ln(l) + m` in f32.
//!
//! Work runs per (batch entry, chunk of heads); each row's arithmetic never depends on the
//! other rows of its chunk, so the bits do not depend on the thread count.

use super::error::AttentionError;
use super::online::lane_sum;
use super::params::Geometry;
use crate::formats::{bf16, f16, DType, Rounding};
use crate::math;
use crate::parallel::{map_tasks, Threads};

/// Width of the latent `c_kv` (values, and the nope part of keys and queries).
pub const LATENT: usize = 512;
/// Width of the rope part of keys and queries.
pub const ROPE: usize = 64;
/// Width of a key row: latent then rope.
pub const KEY: usize = LATENT + ROPE;

/// How the running output is rescaled between softmax steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlaRescale {
    /// The MLA kernel's AMLA: P scaled by a rounded power-of-two factor, O corrected by an
    /// integer added to its f32 bits.
    Amla,
    /// The generic online-softmax rescale `O * exp(m_old - m_new)` (not what the MLA kernel
    /// does: a fault model).
    Classic,
    /// Fault model: AMLA with the integer correction of O one softmax step late (step i adds
    /// step i-1's correction; the second step adds none), the row sum on time.
    AmlaLagged,
    /// Fault model: AMLA with the running max replaced by each step's own maximum; when it
    /// falls, neither O (no integer correction) nor the row sum is rescaled, so a later step
    /// below an early maximum is weighted up against the earlier ones.
    AmlaStepMaxNotCarried,
}

impl MlaRescale {
    /// Whether P carries the AMLA factor and O is corrected through its bits.
    pub fn is_amla(self) -> bool {
        self != MlaRescale::Classic
    }
}

/// The order of the 576 products of a score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// The kernel's load order: `[c_kv 0..256, rope 0..32, rope 32..64, c_kv 256..512]`.
    KernelPermuted,
    /// Latent then rope, in index order (a fault model).
    Natural,
}

/// The numerics of the MLA decode kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct MlaKernel {
    pub key_order: KeyOrder,
    /// Products per chunk of the score's K axis (96).
    pub k_chunk: usize,
    /// Keys per softmax step (512).
    pub step: usize,
    pub rescale: MlaRescale,
    /// Rounding of the AMLA factor to the KV dtype.
    pub factor_rounding: Rounding,
    /// Rounding of P to the KV dtype before P V.
    pub p_rounding: Rounding,
    /// Rounding of the output cast.
    pub output_rounding: Rounding,
    /// Whether elements with |O| > 1e10 are zeroed before the division (AMLA only).
    pub zero_huge: bool,
    /// Whether the LSE adds the row max (`ln(l) + m`); false is a fault model (`ln(l)`).
    pub lse_with_max: bool,
}

impl MlaKernel {
    /// The A2 MLA kernel for output dtype `dtype` (bf16 or f16).
    pub fn ascend(dtype: DType) -> MlaKernel {
        MlaKernel {
            key_order: KeyOrder::KernelPermuted,
            k_chunk: 96,
            step: 512,
            rescale: MlaRescale::Amla,
            factor_rounding: Rounding::RNA,
            p_rounding: Rounding::RNA,
            output_rounding: if dtype == DType::F16 {
                Rounding::RNA
            } else {
                Rounding::RNE
            },
            zero_huge: true,
            lse_with_max: true,
        }
    }

    /// The K-axis index order of a score.
    fn order(&self) -> Vec<usize> {
        match self.key_order {
            KeyOrder::Natural => (0..KEY).collect(),
            KeyOrder::KernelPermuted => (0..256)
                .chain(LATENT..LATENT + ROPE)
                .chain(256..LATENT)
                .collect(),
        }
    }
}

/// One batch entry's problem: query rows (`heads x 576`, latent then rope), the valid keys
/// (`lk x 576`) and values (`lk x 512`), all exact f32 values of the KV dtype.
pub struct MlaBatch<'a> {
    pub query: &'a [f32],
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub lk: usize,
}

/// Rows per parallel task (independent of the thread count).
const TASK_ROWS: usize = 16;

/// Rounds to `dtype` (bf16 or f16) with `rounding`, back to f32.
#[inline(always)]
pub fn to_dtype(dtype: DType, x: f32, rounding: Rounding) -> f32 {
    match dtype {
        DType::F16 => f16::quantize_f32_f16(x, rounding),
        _ => bf16::quantize_f32_bf16(x, rounding),
    }
}

/// Round to an integral value, ties away from zero (Ascend `CAST_ROUND` of f32 to f32 or
/// int32); exact for |x| < 2^31.
#[inline(always)]
fn round_away(x: f32) -> f32 {
    if x.is_nan() || x.abs() >= 2147483648.0 {
        return x;
    }
    let t = x as i64 as f32; // toward zero, exact for |x| < 2^31
    let frac = x - t; // exact
    if frac >= 0.5 {
        t + 1.0
    } else if frac <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

/// The kernel's constants: `LN2` and `RECIP_OF_LN2 = 1 / LN2`, both f32 (the second the f32
/// quotient of the first).
const LN2: f32 = std::f32::consts::LN_2;
fn recip_of_ln2() -> f32 {
    1.0f32 / LN2
}

/// The AMLA factor of a softmax step whose running max is `m`: `(n, f, fr)` with `n =
/// round_away(m * -1/ln2)`, `f = exp((m / ln2 + n) ln2)` (f32 steps) and `fr` the factor cast
/// to `dtype` with the kernel's `factor_rounding`.
#[inline(always)]
pub fn amla_factor(kernel: &MlaKernel, dtype: DType, m: f32) -> (f32, f32, f32) {
    let inv_ln2 = recip_of_ln2();
    let n = round_away(m * -inv_ln2);
    let f = math::exp_f32(((m * inv_ln2) + n) * LN2);
    (n, f, to_dtype(dtype, f, kernel.factor_rounding))
}

/// What multiplies `exp(s - m)` before the P cast in a softmax step whose running max is `m`:
/// the AMLA factor's cast, or 1 under the classic rescale.
pub fn p_factor(kernel: &MlaKernel, dtype: DType, m: f32) -> f32 {
    if kernel.rescale.is_amla() {
        amla_factor(kernel, dtype, m).2
    } else {
        1.0
    }
}

/// What the P cast rounds for a key of scaled score `s` in a softmax step whose running max is
/// `m` and whose [`p_factor`] is `factor` (f32 steps, as the kernel takes them; a factor of 1
/// leaves `exp(s - m)` as it is).
#[inline(always)]
pub fn p_before_cast(factor: f32, s: f32, m: f32) -> f32 {
    math::exp_f32(s - m) * factor
}

/// Scores of `rows` query rows (each `KEY` wide, transposed to `[KEY][rows]` in `qt`) with
/// key `k`, in `order`, chunks of `chunk`: written to `out[..rows]`.
#[inline(always)]
fn scores(qt: &[f32], rows: usize, k: &[f32], order: &[usize], chunk: usize, out: &mut [f32]) {
    let mut acc = [0.0f32; TASK_ROWS];
    for (c, idx) in order.chunks(chunk).enumerate() {
        let mut cs = [0.0f32; TASK_ROWS];
        for &d in idx {
            let kd = k[d];
            let q = &qt[d * TASK_ROWS..d * TASK_ROWS + TASK_ROWS];
            for r in 0..TASK_ROWS {
                cs[r] += q[r] * kd;
            }
        }
        for r in 0..TASK_ROWS {
            acc[r] = if c == 0 { cs[r] } else { acc[r] + cs[r] };
        }
    }
    out[..rows].copy_from_slice(&acc[..rows]);
}

/// MLA decode of one batch entry's rows `h0..h1` with `kernel`; returns per row the output
/// (`LATENT` f32 values rounded to `dtype`) and the LSE.
fn rows(
    kernel: &MlaKernel,
    dtype: DType,
    scale: f32,
    p: &MlaBatch,
    h0: usize,
    h1: usize,
) -> Vec<(Vec<f32>, f32)> {
    let nr = h1 - h0;
    let order = kernel.order();
    let mut qt = vec![0.0f32; KEY * TASK_ROWS];
    for r in 0..nr {
        let q = &p.query[(h0 + r) * KEY..(h0 + r + 1) * KEY];
        for d in 0..KEY {
            qt[d * TASK_ROWS + r] = q[d];
        }
    }
    let lk = p.lk;
    // Scaled scores, row-major [nr][lk].
    let mut s = vec![0.0f32; nr * lk];
    let mut col = [0.0f32; TASK_ROWS];
    for j in 0..lk {
        scores(
            &qt,
            nr,
            &p.keys[j * KEY..(j + 1) * KEY],
            &order,
            kernel.k_chunk,
            &mut col,
        );
        for r in 0..nr {
            s[r * lk + j] = col[r] * scale;
        }
    }
    let mut res = Vec::with_capacity(nr);
    let mut pv = vec![0.0f32; LATENT];
    for r in 0..nr {
        let srow = &mut s[r * lk..(r + 1) * lk];
        let mut o = vec![0.0f32; LATENT];
        let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
        let (mut n_prev, mut cof_prev, mut fr_last) = (0.0f32, 1.0f32, 1.0f32);
        let mut first = true;
        // The lagged fault model's correction held back one step.
        let mut lag = 0i32;
        let mut j0 = 0;
        while j0 < lk {
            let j1 = (j0 + kernel.step).min(lk);
            let step = &mut srow[j0..j1];
            let mut step_max = f32::NEG_INFINITY;
            for &x in step.iter() {
                if x > step_max {
                    step_max = x;
                }
            }
            // The fault model that lets the running max fall to a step's own maximum.
            let (m_new, falls) = if kernel.rescale == MlaRescale::AmlaStepMaxNotCarried && !first {
                (step_max, step_max < m)
            } else {
                (if step_max > m { step_max } else { m }, false)
            };
            for x in step.iter_mut() {
                *x = math::exp_f32(*x - m_new);
            }
            let rowsum = lane_sum(step);
            l = if first {
                rowsum
            } else if falls {
                l + rowsum
            } else {
                l * math::exp_f32(m - m_new) + rowsum
            };
            if kernel.rescale.is_amla() {
                let (n, f, fr) = amla_factor(kernel, dtype, m_new);
                for x in step.iter_mut() {
                    *x = to_dtype(dtype, *x * fr, kernel.p_rounding);
                }
                let cof = f / fr;
                if !first {
                    let eps = (cof_prev / cof - 1.0) * 1.5;
                    let dn = (n - n_prev).max(-30.0);
                    let add = round_away((dn + (eps + 0.000001)) * 8388608.0) as i32;
                    let add = match kernel.rescale {
                        MlaRescale::AmlaLagged => std::mem::replace(&mut lag, add),
                        MlaRescale::AmlaStepMaxNotCarried if falls => 0,
                        _ => add,
                    };
                    for x in o.iter_mut() {
                        *x = f32::from_bits((x.to_bits() as i32).wrapping_add(add) as u32);
                    }
                }
                n_prev = n;
                cof_prev = cof;
                fr_last = fr;
            } else {
                for x in step.iter_mut() {
                    *x = to_dtype(dtype, *x, kernel.p_rounding);
                }
                if !first {
                    let alpha = math::exp_f32(m - m_new);
                    o.iter_mut().for_each(|x| *x *= alpha);
                }
            }
            // P V of the step in f32, keys in order (assumed), then added to O.
            pv.fill(0.0);
            for (t, &pj) in step.iter().enumerate() {
                let v = &p.values[(j0 + t) * LATENT..(j0 + t + 1) * LATENT];
                for (a, &vd) in pv.iter_mut().zip(v) {
                    *a += pj * vd;
                }
            }
            for (x, &a) in o.iter_mut().zip(&pv) {
                *x += a;
            }
            m = m_new;
            first = false;
            j0 = j1;
        }
        let denom = if kernel.rescale.is_amla() {
            if kernel.zero_huge {
                for x in o.iter_mut() {
                    // Kept when |O| <= 1e10 (a NaN compares false and becomes 0 too).
                    if x.is_nan() || x.abs() > 1.0e10 {
                        *x = 0.0;
                    }
                }
            }
            l * fr_last
        } else {
            l
        };
        for x in o.iter_mut() {
            *x = to_dtype(dtype, *x / denom, kernel.output_rounding);
        }
        let lse = if kernel.lse_with_max {
            math::ln_f32(l) + m
        } else {
            math::ln_f32(l)
        };
        res.push((o, lse));
    }
    res
}

/// MLA decode of every batch entry: `batches[b]` holds entry b's rows for all `g.heads`
/// heads. Returns `attention_out` (in `g`'s output layout, `value_dim` = [`LATENT`] wide,
/// values of the output dtype) and the f32 LSE (`g`'s LSE layout).
pub fn mla_decode(
    g: &Geometry,
    kernel: &MlaKernel,
    batches: &[MlaBatch],
    threads: Threads,
) -> Result<(Vec<f32>, Vec<f32>), AttentionError> {
    if g.head_dim != KEY || g.value_dim != LATENT {
        return Err(AttentionError::param(
            "head_dim",
            format!(
                "MLA takes keys {KEY} wide and values {LATENT} wide, not {} and {}",
                g.head_dim, g.value_dim
            ),
        ));
    }
    if g.kv_heads != 1 || g.q_seq != 1 || batches.len() != g.batch {
        return Err(AttentionError::param(
            "num_key_value_heads",
            "MLA decode takes one KV head, one query row and one problem per batch entry",
        ));
    }
    if kernel.k_chunk == 0 || kernel.step == 0 {
        return Err(AttentionError::param(
            "recipe",
            "chunk and step must be positive",
        ));
    }
    for (b, p) in batches.iter().enumerate() {
        if p.query.len() != g.heads * KEY
            || p.keys.len() != p.lk * KEY
            || p.values.len() != p.lk * LATENT
            || p.lk == 0
        {
            return Err(AttentionError::param(
                format!("actual_seq_lengths_kv[{b}]"),
                "the batch entry's rows do not match its length (or it has no key)",
            ));
        }
    }
    let chunks = g.heads.div_ceil(TASK_ROWS);
    let results = map_tasks(g.batch * chunks, threads, |t| {
        let (b, c) = (t / chunks, t % chunks);
        let h0 = c * TASK_ROWS;
        let h1 = (h0 + TASK_ROWS).min(g.heads);
        rows(kernel, g.dtype, g.scale, &batches[b], h0, h1)
    });
    let mut out = vec![0.0f32; g.out_len()];
    let mut lse = vec![0.0f32; g.lse_len()];
    for (t, group) in results.iter().enumerate() {
        let (b, c) = (t / chunks, t % chunks);
        for (r, (o, x)) in group.iter().enumerate() {
            let h = c * TASK_ROWS + r;
            let off = g.out_offset(b, 0, h);
            out[off..off + LATENT].copy_from_slice(o);
            lse[g.lse_index(b, 0, h)] = *x;
        }
    }
    Ok((out, lse))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_away_rounds_ties_away_from_zero() {
        assert_eq!(round_away(2.5), 3.0);
        assert_eq!(round_away(-2.5), -3.0);
        assert_eq!(round_away(2.4999998), 2.0);
        assert_eq!(round_away(-0.5), -1.0);
        assert_eq!(round_away(0.0), 0.0);
    }

    #[test]
    fn kernel_order_is_a_permutation_with_the_rope_in_the_middle() {
        let o = MlaKernel::ascend(DType::Bf16).order();
        let mut sorted = o.clone();
        sorted.sort();
        assert_eq!(sorted, (0..KEY).collect::<Vec<_>>());
        assert_eq!(o[255], 255);
        assert_eq!(o[256], LATENT);
        assert_eq!(o[319], LATENT + 63);
        assert_eq!(o[320], 256);
    }
}
