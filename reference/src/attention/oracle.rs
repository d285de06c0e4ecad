//! The ground truth: exact attention in f64, no online blocking, no intermediate rounding.
//!
//! Per row: `s_j = scale * (q . k_j)` for allowed keys (products of bf16/f16/f32 values are
//! exact in f64; the dot sums in f64 with 8 lane accumulators and a fixed tree), `m = max s`,
//! `e_j = exp(s_j - m)` (pure-Rust libm `exp`), `l = sum e_j` in key order, `out = (sum_j e_j
//! v_j) / l`, `lse = ln(l) + m`. The scale is the f32 value the kernels receive
//! ([`Geometry::scale`]). A row without allowed keys gives output 0 and LSE +inf; padded rows
//! (beyond `actual_seq_lengths`) give 0 and +inf too. The result is f64; callers round it ONCE
//! to the output dtype. Key rows and value rows may differ in width ([`Geometry::value_dim`],
//! the MLA path: scores over 576-wide keys, values 512 wide).

use super::error::AttentionError;
use super::flash::AttentionInputs;
use super::mask::BatchMask;
use super::params::Geometry;
use crate::math;
use crate::parallel::{map_tasks, Threads};

/// Oracle outputs in the output layout, f64.
#[derive(Clone, Debug, PartialEq)]
pub struct OracleOutput {
    pub out: Vec<f64>,
    /// Natural-log LSE (always computed), in the LSE layout.
    pub lse: Vec<f64>,
}

const L64: usize = 8;

#[inline(always)]
fn combine8(a: [f64; L64]) -> f64 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

/// f64 dot products of 2 rows with 2 keys, 8 lanes each.
#[inline(always)]
fn dots64(q: [&[f64]; 2], k: [&[f64]; 2]) -> [[f64; 2]; 2] {
    let n = q[0].len();
    let full = n / L64 * L64;
    let mut acc = [[[0.0f64; L64]; 2]; 2];
    let mut d0 = 0;
    while d0 < full {
        for r in 0..2 {
            for c in 0..2 {
                for l in 0..L64 {
                    acc[r][c][l] += q[r][d0 + l] * k[c][d0 + l];
                }
            }
        }
        d0 += L64;
    }
    for d in full..n {
        for r in 0..2 {
            for c in 0..2 {
                acc[r][c][d - full] += q[r][d] * k[c][d];
            }
        }
    }
    [
        [combine8(acc[0][0]), combine8(acc[0][1])],
        [combine8(acc[1][0]), combine8(acc[1][1])],
    ]
}

/// AVX2 form of [`dots64`] (`dim` a multiple of 8, every row at least `dim` long: checked):
/// lanes 0-3 and 4-7 of each accumulator in two registers, separate multiply and add, the
/// same combine tree.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dots64_avx2(q: [&[f64]; 2], k: [&[f64]; 2], dim: usize) -> [[f64; 2]; 2] {
    use std::arch::x86_64::*;
    assert!(dim.is_multiple_of(8) && q.iter().chain(k.iter()).all(|x| x.len() >= dim));
    let z = _mm256_setzero_pd();
    let mut acc = [[[z; 2]; 2]; 2];
    for d in (0..dim).step_by(8) {
        // SAFETY: d + 8 <= dim (d < dim, both multiples of 8) and both key rows are at least
        // dim long (asserted above): the 4-double loads at d and d + 4 are inside.
        let kv = unsafe {
            [
                [
                    _mm256_loadu_pd(k[0].as_ptr().add(d)),
                    _mm256_loadu_pd(k[0].as_ptr().add(d + 4)),
                ],
                [
                    _mm256_loadu_pd(k[1].as_ptr().add(d)),
                    _mm256_loadu_pd(k[1].as_ptr().add(d + 4)),
                ],
            ]
        };
        for r in 0..2 {
            // SAFETY: as for the keys: d + 8 <= dim <= q[r].len() (asserted above).
            let x = unsafe {
                [
                    _mm256_loadu_pd(q[r].as_ptr().add(d)),
                    _mm256_loadu_pd(q[r].as_ptr().add(d + 4)),
                ]
            };
            for c in 0..2 {
                for h in 0..2 {
                    acc[r][c][h] = _mm256_add_pd(acc[r][c][h], _mm256_mul_pd(x[h], kv[c][h]));
                }
            }
        }
    }
    let mut res = [[0.0f64; 2]; 2];
    for r in 0..2 {
        for c in 0..2 {
            // combine8: t = lanes 0-3 + lanes 4-7; (t0 + t2) + (t1 + t3).
            let t = _mm256_add_pd(acc[r][c][0], acc[r][c][1]);
            let u = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd::<1>(t));
            res[r][c] = _mm_cvtsd_f64(_mm_add_sd(u, _mm_unpackhi_pd(u, u)));
        }
    }
    res
}

/// AVX-512 form of [`dots64`] (`dim` a multiple of 8, every row at least `dim` long:
/// checked): one register per accumulator; the combine adds lanes i and i + 4 (the 256-bit
/// halves), then (t0 + t2), (t1 + t3), then the two: the pairs of [`combine8`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn dots64_avx512(q: [&[f64]; 2], k: [&[f64]; 2], dim: usize) -> [[f64; 2]; 2] {
    use std::arch::x86_64::*;
    assert!(dim.is_multiple_of(8) && q.iter().chain(k.iter()).all(|x| x.len() >= dim));
    let z = _mm512_setzero_pd();
    let mut acc = [[z; 2]; 2];
    for d in (0..dim).step_by(8) {
        // SAFETY: d + 8 <= dim (d < dim, both multiples of 8) and both key rows are at least
        // dim long (asserted above): the 8-double loads are inside.
        let kv = unsafe {
            [
                _mm512_loadu_pd(k[0].as_ptr().add(d)),
                _mm512_loadu_pd(k[1].as_ptr().add(d)),
            ]
        };
        for r in 0..2 {
            // SAFETY: as for the keys: d + 8 <= dim <= q[r].len() (asserted above).
            let x = unsafe { _mm512_loadu_pd(q[r].as_ptr().add(d)) };
            for c in 0..2 {
                acc[r][c] = _mm512_add_pd(acc[r][c], _mm512_mul_pd(x, kv[c]));
            }
        }
    }
    let mut res = [[0.0f64; 2]; 2];
    for r in 0..2 {
        for c in 0..2 {
            let a = acc[r][c];
            let t = _mm256_add_pd(_mm512_castpd512_pd256(a), _mm512_extractf64x4_pd::<1>(a));
            let u = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd::<1>(t));
            res[r][c] = _mm_cvtsd_f64(_mm_add_sd(u, _mm_unpackhi_pd(u, u)));
        }
    }
    res
}

/// [`dots64`], through the AVX-512 or AVX2 form when the CPU has it (same bits).
#[inline(always)]
fn dots64_any(q: [&[f64]; 2], k: [&[f64]; 2], dim: usize) -> [[f64; 2]; 2] {
    #[cfg(target_arch = "x86_64")]
    {
        if dim.is_multiple_of(8) && super::kernel::use_avx512() {
            // SAFETY: the function's only requirement is AVX-512F, which `use_avx512`
            // (`crate::cpu::avx512`) detected at run time just above.
            return unsafe { dots64_avx512(q, k, dim) };
        }
        if dim.is_multiple_of(8) && crate::cpu::avx2() {
            // SAFETY: the function's only requirement is AVX2, which `cpu::avx2` detected at
            // run time just above.
            return unsafe { dots64_avx2(q, k, dim) };
        }
    }
    dots64(q, k)
}

/// Scores of rows `q` (pairs; an odd last row is paired with itself) against keys `lo..hi`.
#[inline(always)]
fn scores64(q: &[&[f64]], k: &[f64], dim: usize, lo: usize, hi: usize, out: &mut [f64]) {
    let nk = hi - lo;
    let mut r = 0;
    while r < q.len() {
        let r2 = (r + 1).min(q.len() - 1);
        let mut j = lo;
        while j < hi {
            let j2 = (j + 1).min(hi - 1);
            let res = dots64_any(
                [q[r], q[r2]],
                [&k[j * dim..(j + 1) * dim], &k[j2 * dim..(j2 + 1) * dim]],
                dim,
            );
            out[r * nk + j - lo] = res[0][0];
            out[r2 * nk + j2 - lo] = res[1][1];
            out[r * nk + j2 - lo] = res[0][1];
            out[r2 * nk + j - lo] = res[1][0];
            j += 2;
        }
        r += 2;
    }
}

/// `out[d0..d0 + C] = sum over (e, j) in weights, in order, of e * v[j][d0..d0 + C]`, the `C`
/// accumulators kept in registers across all keys.
#[inline(always)]
fn weighted_block<const C: usize>(
    out: &mut [f64],
    weights: &[(f64, usize)],
    v: &[f64],
    dim: usize,
    d0: usize,
) {
    let mut acc: [f64; C] = std::array::from_fn(|c| out[d0 + c]);
    for &(e, j) in weights {
        let row = &v[j * dim + d0..j * dim + d0 + C];
        for c in 0..C {
            acc[c] += e * row[c];
        }
    }
    out[d0..d0 + C].copy_from_slice(&acc);
}

/// `out[d] += e * v[j][d]` for each (e, j) in weights, in order: each output element is
/// accumulated sequentially in the order of `weights`, from its current value. Column blocks of 128 (16
/// independent AVX-512 chains) or 32, so the additions are not bound by their latency.
#[inline(always)]
fn weighted_sum64(out: &mut [f64], weights: &[(f64, usize)], v: &[f64], dim: usize) {
    let mut d0 = 0;
    while d0 + 128 <= dim {
        weighted_block::<128>(out, weights, v, dim, d0);
        d0 += 128;
    }
    while d0 + 32 <= dim {
        weighted_block::<32>(out, weights, v, dim, d0);
        d0 += 32;
    }
    for d in d0..dim {
        let mut acc = out[d];
        for &(e, j) in weights {
            acc += e * v[j * dim + d];
        }
        out[d] = acc;
    }
}

/// For the 4 rows `r..r + 4` of the chunk and every key `j` in `keys` (increasing), all of
/// them allowed for all 4 rows: `out[row][d] += e[row][j] * v[j][d]`, continuing from the
/// current values, `e[row][j] = s[row * nk + j - lo]`. The same sequential sums as
/// [`weighted_sum64`] per row, with each value row loaded once for the 4 rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn weighted_rows4(
    out: &mut [f64],
    r: usize,
    s: &[f64],
    nk: usize,
    lo: usize,
    keys: std::ops::Range<usize>,
    v: &[f64],
    dim: usize,
) {
    const C: usize = 32;
    let mut d0 = 0;
    while d0 + C <= dim {
        let mut acc: [[f64; C]; 4] =
            std::array::from_fn(|q| std::array::from_fn(|c| out[(r + q) * dim + d0 + c]));
        for j in keys.clone() {
            let row = &v[j * dim + d0..j * dim + d0 + C];
            for (q, a) in acc.iter_mut().enumerate() {
                let e = s[(r + q) * nk + j - lo];
                for c in 0..C {
                    a[c] += e * row[c];
                }
            }
        }
        for (q, a) in acc.iter().enumerate() {
            out[(r + q) * dim + d0..(r + q) * dim + d0 + C].copy_from_slice(a);
        }
        d0 += C;
    }
    for q in 0..4 {
        for d in d0..dim {
            let mut acc = out[(r + q) * dim + d];
            for j in keys.clone() {
                acc += s[(r + q) * nk + j - lo] * v[j * dim + d];
            }
            out[(r + q) * dim + d] = acc;
        }
    }
}

/// One chunk of rows of one head, K and V as dense f64 `[lk, key width]` and `[lk, value
/// width]` (`dims`: key width, value width).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn chunk_generic(
    q: &[&[f64]],
    k: &[f64],
    v: &[f64],
    dims: (usize, usize),
    mask: &BatchMask,
    r0: usize,
    scale: f64,
    out: &mut [f64],
    lse: &mut [f64],
) {
    let nr = q.len();
    let intervals: Vec<(usize, usize)> = (r0..r0 + nr).map(|i| mask.interval(i)).collect();
    let lo = intervals.iter().map(|x| x.0).min().unwrap_or(0);
    let hi = intervals.iter().map(|x| x.1).max().unwrap_or(0).max(lo);
    let nk = hi - lo;
    // The score buffer is reused per thread (every element used is written first): a fresh
    // half-megabyte allocation per task goes to mmap and serialises the threads on page
    // faults.
    let mut s = SCORES.with(|cell| cell.take());
    s.clear();
    s.resize(nr * nk, 0.0);
    if nk > 0 {
        scores64(q, k, dims.0, lo, hi, &mut s);
    }
    let mut weights = WEIGHTS.with(|cell| cell.take());
    rows_softmax(
        &mut s,
        nk,
        lo,
        v,
        dims.1,
        mask,
        r0,
        scale,
        &intervals,
        &mut weights,
        out,
        lse,
    );
    SCORES.with(|cell| cell.replace(s));
    WEIGHTS.with(|cell| cell.replace(weights));
}

thread_local! {
    static SCORES: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
    static WEIGHTS: std::cell::RefCell<Vec<(f64, usize)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Softmax and P V of the rows of one chunk from their scores `s` (`nr x nk`, keys from `lo`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn rows_softmax(
    s: &mut [f64],
    nk: usize,
    lo: usize,
    v: &[f64],
    dim: usize,
    mask: &BatchMask,
    r0: usize,
    scale: f64,
    intervals: &[(usize, usize)],
    weights: &mut Vec<(f64, usize)>,
    out: &mut [f64],
    lse: &mut [f64],
) {
    let nr = intervals.len();
    out[..nr * dim].fill(0.0);
    // Pass 1, per row: scores, max, e_j = exp(s_j - m) in place, l = sum of e_j in key order.
    let mut ml = vec![(0.0f64, 0.0f64); nr];
    let mut live = vec![false; nr];
    for r in 0..nr {
        let i = r0 + r;
        let (a, z) = intervals[r];
        let allowed = |j: usize| j >= a && j < z && mask.allowed(i, j);
        let mut m = f64::NEG_INFINITY;
        for j in a..z {
            if allowed(j) {
                let x = scale * s[r * nk + j - lo];
                s[r * nk + j - lo] = x;
                if x > m || m == f64::NEG_INFINITY {
                    m = x;
                }
            }
        }
        if m == f64::NEG_INFINITY {
            lse[r] = f64::INFINITY;
            continue;
        }
        // The slice exp is libm's exp bit for bit.
        let e = &mut s[r * nk + a - lo..r * nk + z - lo];
        for x in e.iter_mut() {
            *x -= m;
        }
        super::vexp::exp_f64_slice(e);
        let mut l = 0.0f64;
        for j in a..z {
            if allowed(j) {
                l += e[j - a];
            }
        }
        ml[r] = (m, l);
        live[r] = true;
    }
    // Pass 2, P V: each output element sums e_j v_j[d] over its row's allowed keys in
    // increasing j, from 0. Without an explicit mask a row's keys are its interval, so 4 rows
    // run their common keys together (each value row loaded once), their own keys before and
    // after it alone: the same sums in the same order.
    let explicit = mask.has_explicit();
    let row_keys = |r: usize, keys: std::ops::Range<usize>, weights: &mut Vec<(f64, usize)>| {
        weights.clear();
        for j in keys {
            if mask.allowed(r0 + r, j) {
                weights.push((s[r * nk + j - lo], j));
            }
        }
    };
    let mut r = 0;
    while r < nr {
        if !explicit && r + 4 <= nr && live[r..r + 4].iter().all(|&x| x) {
            let iv = &intervals[r..r + 4];
            let common_lo = iv.iter().map(|x| x.0).max().unwrap_or(0);
            let common_hi = iv.iter().map(|x| x.1).min().unwrap_or(0);
            if common_lo < common_hi {
                for (q, &(a, _)) in iv.iter().enumerate() {
                    row_keys(r + q, a..common_lo, weights);
                    weighted_sum64(&mut out[(r + q) * dim..(r + q + 1) * dim], weights, v, dim);
                }
                weighted_rows4(out, r, s, nk, lo, common_lo..common_hi, v, dim);
                for (q, &(_, z)) in iv.iter().enumerate() {
                    row_keys(r + q, common_hi..z, weights);
                    weighted_sum64(&mut out[(r + q) * dim..(r + q + 1) * dim], weights, v, dim);
                }
                r += 4;
                continue;
            }
        }
        if live[r] {
            let (a, z) = intervals[r];
            row_keys(r, a..z, weights);
            weighted_sum64(&mut out[r * dim..(r + 1) * dim], weights, v, dim);
        }
        r += 1;
    }
    // Pass 3: normalise, LSE.
    for r in 0..nr {
        if live[r] {
            let (m, l) = ml[r];
            for x in out[r * dim..(r + 1) * dim].iter_mut() {
                *x /= l;
            }
            lse[r] = math::ln_f64(l) + m;
        }
    }
}

/// [`chunk_generic`] compiled for AVX2 (same bits: no FMA contraction, same order).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
fn chunk_avx2(
    q: &[&[f64]],
    k: &[f64],
    v: &[f64],
    dims: (usize, usize),
    mask: &BatchMask,
    r0: usize,
    scale: f64,
    out: &mut [f64],
    lse: &mut [f64],
) {
    chunk_generic(q, k, v, dims, mask, r0, scale, out, lse)
}

/// [`chunk_generic`] compiled for AVX-512F (same bits: no FMA contraction, same order).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
fn chunk_avx512(
    q: &[&[f64]],
    k: &[f64],
    v: &[f64],
    dims: (usize, usize),
    mask: &BatchMask,
    r0: usize,
    scale: f64,
    out: &mut [f64],
    lse: &mut [f64],
) {
    chunk_generic(q, k, v, dims, mask, r0, scale, out, lse)
}

#[allow(clippy::too_many_arguments)]
fn chunk(
    q: &[&[f64]],
    k: &[f64],
    v: &[f64],
    dims: (usize, usize),
    mask: &BatchMask,
    r0: usize,
    scale: f64,
    out: &mut [f64],
    lse: &mut [f64],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if super::kernel::use_avx512() {
            // SAFETY: the function's only requirement is AVX-512F, which `use_avx512`
            // (`crate::cpu::avx512`) detected at run time just above.
            return unsafe { chunk_avx512(q, k, v, dims, mask, r0, scale, out, lse) };
        }
        if crate::cpu::avx2() {
            // SAFETY: the function's only requirement is AVX2, which `cpu::avx2` detected at
            // run time just above.
            return unsafe { chunk_avx2(q, k, v, dims, mask, r0, scale, out, lse) };
        }
    }
    chunk_generic(q, k, v, dims, mask, r0, scale, out, lse)
}

/// Rows per oracle task.
const ORACLE_ROWS: usize = 32;

/// Exact attention of the whole problem (see the module docs).
pub fn oracle(
    g: &Geometry,
    inputs: &AttentionInputs,
    threads: Threads,
) -> Result<OracleOutput, AttentionError> {
    inputs.check_sizes(g)?;
    // Key rows are `head_dim` wide, value and output rows `value_dim` (equal except MLA).
    let (dim, vdim) = (g.head_dim, g.value_dim);
    // Dense f64 K and V per (b, kv head), converted exactly once.
    let kv_dense: Vec<(Vec<f64>, Vec<f64>)> = map_tasks(g.batch * g.kv_heads, threads, |t| {
        let (b, kvh) = (t / g.kv_heads, t % g.kv_heads);
        let mut k = Vec::with_capacity(g.lk[b] * dim);
        let mut v = Vec::with_capacity(g.lk[b] * vdim);
        for j in 0..g.lk[b] {
            let o = g.kv_offset(b, j, kvh);
            k.extend(inputs.key[o..o + dim].iter().map(|&x| x as f64));
            let o = g.v_offset(b, j, kvh);
            v.extend(inputs.value[o..o + vdim].iter().map(|&x| x as f64));
        }
        (k, v)
    });
    let tasks = g.row_tasks(ORACLE_ROWS);
    let scale = g.scale as f64;
    let results = map_tasks(tasks.len(), threads, |t| {
        let (b, h, r0, r1) = tasks[t];
        let q: Vec<Vec<f64>> = (r0..r1)
            .map(|i| {
                let o = g.q_offset(b, i, h);
                inputs.query[o..o + dim].iter().map(|&x| x as f64).collect()
            })
            .collect();
        let qr: Vec<&[f64]> = q.iter().map(|x| x.as_slice()).collect();
        let (k, v) = &kv_dense[b * g.kv_heads + g.kv_head(h)];
        let mask = BatchMask::new(g, b, inputs.atten_mask);
        let mut out = vec![0.0f64; (r1 - r0) * vdim];
        let mut lse = vec![0.0f64; r1 - r0];
        chunk(&qr, k, v, (dim, vdim), &mask, r0, scale, &mut out, &mut lse);
        (out, lse)
    });
    let mut out = vec![0.0f64; g.out_len()];
    let mut lse = vec![f64::INFINITY; g.lse_len()];
    for (&(b, h, r0, r1), (o, l)) in tasks.iter().zip(&results) {
        for (r, i) in (r0..r1).enumerate() {
            let off = g.out_offset(b, i, h);
            out[off..off + vdim].copy_from_slice(&o[r * vdim..(r + 1) * vdim]);
            lse[g.lse_index(b, i, h)] = l[r];
        }
    }
    Ok(OracleOutput { out, lse })
}
