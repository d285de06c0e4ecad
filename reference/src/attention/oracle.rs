//! The ground truth: exact attention in f64, no online blocking, no intermediate rounding.
//!
//! Per row: `s_j = scale * (q . k_j)` for allowed keys (products of bf16/f16/f32 values are
//! exact in f64; the dot sums in f64 with 8 lane accumulators and a fixed tree), `m = max s`,
//! `e_j = exp(s_j - m)` (pure-Rust libm `exp`), `l = sum e_j` in key order, `out = (sum_j e_j
//! v_j) / l`, `lse = ln(l) + m`. The scale is the f32 value the kernels receive
//! ([`Geometry::scale`]). A row without allowed keys gives output 0 and LSE +inf; padded rows
//! (beyond `actual_seq_lengths`) give 0 and +inf too. The result is f64; callers round it ONCE
//! to the output dtype.

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

/// AVX2 form of [`dots64`] (`dim` a multiple of 8): lanes 0-3 and 4-7 of each accumulator
/// in two registers, separate multiply and add, the same combine tree.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dots64_avx2(q: [&[f64]; 2], k: [&[f64]; 2], dim: usize) -> [[f64; 2]; 2] {
    use std::arch::x86_64::*;
    assert!(q.iter().chain(k.iter()).all(|x| x.len() >= dim));
    let z = _mm256_setzero_pd();
    let mut acc = [[[z; 2]; 2]; 2];
    for d in (0..dim).step_by(8) {
        let kv = [
            [
                _mm256_loadu_pd(k[0].as_ptr().add(d)),
                _mm256_loadu_pd(k[0].as_ptr().add(d + 4)),
            ],
            [
                _mm256_loadu_pd(k[1].as_ptr().add(d)),
                _mm256_loadu_pd(k[1].as_ptr().add(d + 4)),
            ],
        ];
        for r in 0..2 {
            let x = [
                _mm256_loadu_pd(q[r].as_ptr().add(d)),
                _mm256_loadu_pd(q[r].as_ptr().add(d + 4)),
            ];
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

/// [`dots64`], through the AVX2 form when the CPU has it (same bits).
#[inline(always)]
fn dots64_any(q: [&[f64]; 2], k: [&[f64]; 2], dim: usize) -> [[f64; 2]; 2] {
    #[cfg(target_arch = "x86_64")]
    {
        if dim.is_multiple_of(8) && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
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

#[inline(always)]
fn axpy64(acc: &mut [f64], a: f64, x: &[f64]) {
    for (y, &v) in acc.iter_mut().zip(x) {
        *y += a * v;
    }
}

/// One chunk of rows of one head, K and V as dense f64 `[lk, dim]`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn chunk_generic(
    q: &[&[f64]],
    k: &[f64],
    v: &[f64],
    dim: usize,
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
        scores64(q, k, dim, lo, hi, &mut s);
    }
    rows_softmax(
        &mut s, nk, lo, v, dim, mask, r0, scale, &intervals, out, lse,
    );
    SCORES.with(|cell| cell.replace(s));
}

thread_local! {
    static SCORES: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
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
    out: &mut [f64],
    lse: &mut [f64],
) {
    let nr = intervals.len();
    for r in 0..nr {
        let i = r0 + r;
        let (a, z) = intervals[r];
        let orow = &mut out[r * dim..(r + 1) * dim];
        orow.fill(0.0);
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
        // e_j = exp(s_j - m) for the row's keys (the slice exp is libm's exp bit for bit).
        let e = &mut s[r * nk + a - lo..r * nk + z - lo];
        for x in e.iter_mut() {
            *x -= m;
        }
        super::vexp::exp_f64_slice(e);
        let mut l = 0.0f64;
        for j in a..z {
            if allowed(j) {
                let ej = e[j - a];
                l += ej;
                axpy64(orow, ej, &v[j * dim..(j + 1) * dim]);
            }
        }
        for x in orow.iter_mut() {
            *x /= l;
        }
        lse[r] = math::ln_f64(l) + m;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn chunk_avx2(
    q: &[&[f64]],
    k: &[f64],
    v: &[f64],
    dim: usize,
    mask: &BatchMask,
    r0: usize,
    scale: f64,
    out: &mut [f64],
    lse: &mut [f64],
) {
    chunk_generic(q, k, v, dim, mask, r0, scale, out, lse)
}

#[allow(clippy::too_many_arguments)]
fn chunk(
    q: &[&[f64]],
    k: &[f64],
    v: &[f64],
    dim: usize,
    mask: &BatchMask,
    r0: usize,
    scale: f64,
    out: &mut [f64],
    lse: &mut [f64],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { chunk_avx2(q, k, v, dim, mask, r0, scale, out, lse) };
        }
    }
    chunk_generic(q, k, v, dim, mask, r0, scale, out, lse)
}

/// Rows per oracle task.
const ORACLE_ROWS: usize = 32;

/// Exact attention of the whole problem (see the module docs).
pub fn oracle(
    g: &Geometry,
    inputs: &AttentionInputs,
    threads: Threads,
) -> Result<OracleOutput, AttentionError> {
    g.check_inputs(
        inputs.query.len(),
        inputs.key.len(),
        inputs.value.len(),
        inputs.atten_mask.map(|m| m.len()),
    )?;
    let dim = g.head_dim;
    // Dense f64 K and V per (b, kv head), converted exactly once.
    let kv_dense: Vec<(Vec<f64>, Vec<f64>)> = map_tasks(g.batch * g.kv_heads, threads, |t| {
        let (b, kvh) = (t / g.kv_heads, t % g.kv_heads);
        let mut k = Vec::with_capacity(g.lk[b] * dim);
        let mut v = Vec::with_capacity(g.lk[b] * dim);
        for j in 0..g.lk[b] {
            let o = g.kv_offset(b, j, kvh);
            k.extend(inputs.key[o..o + dim].iter().map(|&x| x as f64));
            v.extend(inputs.value[o..o + dim].iter().map(|&x| x as f64));
        }
        (k, v)
    });
    let mut tasks = Vec::new();
    for b in 0..g.batch {
        for h in 0..g.heads {
            let mut r0 = 0;
            while r0 < g.lq[b] {
                let r1 = (r0 + ORACLE_ROWS).min(g.lq[b]);
                tasks.push((b, h, r0, r1));
                r0 = r1;
            }
        }
    }
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
        let mut out = vec![0.0f64; (r1 - r0) * dim];
        let mut lse = vec![0.0f64; r1 - r0];
        chunk(&qr, k, v, dim, &mask, r0, scale, &mut out, &mut lse);
        (out, lse)
    });
    let mut out = vec![0.0f64; g.out_len()];
    let mut lse = vec![f64::INFINITY; g.lse_len()];
    for (&(b, h, r0, r1), (o, l)) in tasks.iter().zip(&results) {
        for (r, i) in (r0..r1).enumerate() {
            let off = g.out_offset(b, i, h);
            out[off..off + dim].copy_from_slice(&o[r * dim..(r + 1) * dim]);
            lse[g.lse_index(b, i, h)] = l[r];
        }
    }
    Ok(OracleOutput { out, lse })
}
