//! AVX-512 forms of the two tile products of [`super::kernel`], chosen at run time on x86_64
//! CPUs with AVX-512F. They compute exactly the portable code's bits:
//! - a [`crate::dot::dot_f32`] accumulator of 16 lanes (lane `d % 16`) is one zmm register; a
//!   4 x 4 block of dot products keeps 16 of them and reduces them together by a transposing
//!   tree whose every addition pairs the same two partial sums as
//!   [`crate::dot::combine_lanes`] (`l[i] + l[i + 8]`, then `+ 4`, `+ 2`, `+ 1`; IEEE addition
//!   is commutative, so which operand comes first in a pair does not matter);
//! - P V accumulates each output element over keys in increasing order, lanes being output
//!   columns, so the vector width reorders nothing.
//!
//! Separate multiply and add everywhere (no FMA), as in the portable code.
//!
//! Every function here is a safe `#[target_feature(enable = "avx512f")]` function: calling one
//! from code compiled without AVX-512F is `unsafe`, and the caller's `SAFETY` comment names
//! the run-time detection ([`crate::cpu::avx512`]). Inside, `unsafe` remains only on the raw
//! loads and stores, each in bounds by an `assert!` made once before the loop.

use super::rows::Rows;
use std::arch::x86_64::*;
use std::ops::Range;

/// Reduces one 16-lane accumulator with the [`crate::dot::combine_lanes`] tree.
#[target_feature(enable = "avx512f")]
#[inline]
fn combine1(a: __m512) -> f32 {
    let lo = _mm512_castps512_ps256(a);
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a)));
    let t = _mm256_add_ps(lo, hi); // l[i] + l[i + 8]
    let u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps::<1>(t)); // + 4
    let w = _mm_add_ps(u, _mm_movehl_ps(u, u)); // + 2
    _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps::<1>(w, w))) // + 1
}

/// Reduces 16 accumulators at once. `acc[c * 4 + r]` is the accumulator of (row r, key c);
/// the result's 128-bit quarter r holds rows r's four dot products, keys 0..4 in order.
#[target_feature(enable = "avx512f")]
#[inline]
fn combine16(acc: &[__m512; 16]) -> __m512 {
    // Step 1, lanes i and i + 8: s[k] = [acc[2k] lanes 0-7 + 8-15 | acc[2k+1] likewise].
    let mut s = [_mm512_setzero_ps(); 8];
    for k in 0..8 {
        let (a, b) = (acc[2 * k], acc[2 * k + 1]);
        let lo = _mm512_shuffle_f32x4::<0x44>(a, b); // a.q0 a.q1 b.q0 b.q1
        let hi = _mm512_shuffle_f32x4::<0xEE>(a, b); // a.q2 a.q3 b.q2 b.q3
        s[k] = _mm512_add_ps(lo, hi);
    }
    // Step 2, lanes i and i + 4 of each 8-lane half: u[n] quarters = acc 4n .. 4n + 3.
    let mut u = [_mm512_setzero_ps(); 4];
    for n in 0..4 {
        let (a, b) = (s[2 * n], s[2 * n + 1]);
        let lo = _mm512_shuffle_f32x4::<0x88>(a, b); // a.q0 a.q2 b.q0 b.q2
        let hi = _mm512_shuffle_f32x4::<0xDD>(a, b); // a.q1 a.q3 b.q1 b.q3
        u[n] = _mm512_add_ps(lo, hi);
    }
    // Step 3, lanes i and i + 2 of each quarter: w[m] quarter q = [acc(8m + q) 2 lanes,
    // acc(8m + 4 + q) 2 lanes].
    let mut w = [_mm512_setzero_ps(); 2];
    for m in 0..2 {
        let (a, b) = (_mm512_castps_pd(u[2 * m]), _mm512_castps_pd(u[2 * m + 1]));
        let lo = _mm512_unpacklo_pd(a, b);
        let hi = _mm512_unpackhi_pd(a, b);
        // lo quarter = [a u0 u1, b u0 u1], hi = [a u2 u3, b u2 u3]; the sum is f32.
        w[m] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
    }
    // Step 4, lanes 0 and 1 of each pair: quarter q = [acc q, acc 4 + q, acc 8 + q, acc 12 + q].
    let lo = _mm512_shuffle_ps::<0x88>(w[0], w[1]); // w0[0] w0[2] w1[0] w1[2]
    let hi = _mm512_shuffle_ps::<0xDD>(w[0], w[1]); // w0[1] w0[3] w1[1] w1[3]
    _mm512_add_ps(lo, hi)
}

/// One dot product (`dim` a multiple of 16, both rows at least `dim` long: checked).
#[target_feature(enable = "avx512f")]
pub fn dot(q: &[f32], k: &[f32], dim: usize) -> f32 {
    assert!(q.len() >= dim && k.len() >= dim && dim.is_multiple_of(16));
    let mut acc = _mm512_setzero_ps();
    for d in (0..dim).step_by(16) {
        // SAFETY: d + 16 <= dim (d < dim, both multiples of 16) and dim <= q.len(), k.len()
        // (asserted above): both 16-float loads lie inside the slices.
        let (x, y) = unsafe {
            (
                _mm512_loadu_ps(q.as_ptr().add(d)),
                _mm512_loadu_ps(k.as_ptr().add(d)),
            )
        };
        acc = _mm512_add_ps(acc, _mm512_mul_ps(x, y));
    }
    combine1(acc)
}

/// The 16 dot products of 4 query rows with 4 keys; quarter r of the result holds row r.
#[target_feature(enable = "avx512f")]
fn dots_4x4(q: [&[f32]; 4], k: [&[f32]; 4], dim: usize) -> __m512 {
    assert!(dim.is_multiple_of(16) && q.iter().chain(k.iter()).all(|x| x.len() >= dim));
    let mut acc = [_mm512_setzero_ps(); 16];
    let qp = q.map(|x| x.as_ptr());
    let kp = k.map(|x| x.as_ptr());
    for d in (0..dim).step_by(16) {
        // SAFETY: d + 16 <= dim (d < dim, both multiples of 16) and every key row is at least
        // dim long (asserted above).
        let kv = unsafe {
            [
                _mm512_loadu_ps(kp[0].add(d)),
                _mm512_loadu_ps(kp[1].add(d)),
                _mm512_loadu_ps(kp[2].add(d)),
                _mm512_loadu_ps(kp[3].add(d)),
            ]
        };
        for r in 0..4 {
            // SAFETY: as for the keys: d + 16 <= dim <= q[r].len() (asserted above).
            let x = unsafe { _mm512_loadu_ps(qp[r].add(d)) };
            for c in 0..4 {
                acc[c * 4 + r] = _mm512_add_ps(acc[c * 4 + r], _mm512_mul_ps(x, kv[c]));
            }
        }
    }
    combine16(&acc)
}

/// `out[r * ld + (j - keys.start)] = q[r] . k[j]` in the 16-lane order, for `j in keys`
/// (`k.dim()` a multiple of 16: the caller checks, and [`dot`] asserts it).
#[target_feature(enable = "avx512f")]
pub fn qk_lanes16(q: &[&[f32]], k: &Rows, keys: Range<usize>, out: &mut [f32], ld: usize) {
    let dim = k.dim();
    let s0 = keys.start;
    if keys.is_empty() || q.is_empty() {
        return;
    }
    // Every store below lands inside `out`.
    assert!((q.len() - 1) * ld + (keys.end - s0) <= out.len() && keys.end - s0 <= ld);
    // Blocks of 32 keys (16 KiB at D = 128) stay in L1 while every query row passes over them.
    let mut kb = keys.start;
    while kb < keys.end {
        let ke = (kb + 32).min(keys.end);
        let mut r0 = 0;
        while r0 + 4 <= q.len() {
            let qs = [q[r0], q[r0 + 1], q[r0 + 2], q[r0 + 3]];
            let mut j = kb;
            while j + 4 <= ke {
                let res = dots_4x4(
                    qs,
                    [k.row(j), k.row(j + 1), k.row(j + 2), k.row(j + 3)],
                    dim,
                );
                // The pointer is taken afresh after the indexed writes into `out` below.
                let op = out.as_mut_ptr();
                // SAFETY: row r0 + r <= q.len() - 1 and keys j..j + 4 <= keys.end (loop
                // bounds), so each 4-float store ends at most at (q.len() - 1) * ld + keys.end
                // - s0 <= out.len() (asserted above); the rows do not overlap (keys.end - s0 <=
                // ld, asserted).
                unsafe {
                    let at = |r: usize| op.add((r0 + r) * ld + j - s0);
                    _mm_storeu_ps(at(0), _mm512_extractf32x4_ps::<0>(res));
                    _mm_storeu_ps(at(1), _mm512_extractf32x4_ps::<1>(res));
                    _mm_storeu_ps(at(2), _mm512_extractf32x4_ps::<2>(res));
                    _mm_storeu_ps(at(3), _mm512_extractf32x4_ps::<3>(res));
                }
                j += 4;
            }
            for (r, qr) in qs.iter().enumerate() {
                for jj in j..ke {
                    out[(r0 + r) * ld + jj - s0] = dot(qr, k.row(jj), dim);
                }
            }
            r0 += 4;
        }
        for (r, qr) in q.iter().enumerate().skip(r0) {
            for j in kb..ke {
                out[r * ld + j - s0] = dot(qr, k.row(j), dim);
            }
        }
        kb = ke;
    }
}

/// Columns `c..c + 16 * W` of P V for the `R` rows starting at `r0`, keys in increasing order,
/// into `out` (row stride `dim`). Every access is checked by the asserts at the top.
#[target_feature(enable = "avx512f")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn pv_block<const R: usize, const W: usize>(
    p: &[f32],
    ld: usize,
    r0: usize,
    v: &Rows,
    keys: Range<usize>,
    c: usize,
    out: &mut [f32],
    dim: usize,
) {
    let s0 = keys.start;
    let (data, base, stride) = v.raw();
    // Bounds, once: value rows `keys` hold columns c..c + 16W; P rows r0..r0 + R hold the
    // keys' columns; the output rows hold the columns.
    assert!(keys.end <= v.len() && c + 16 * W <= v.dim() && !keys.is_empty());
    assert!(base + (keys.end - 1) * stride + v.dim() <= data.len());
    assert!((r0 + R - 1) * ld + (keys.end - s0) <= p.len());
    assert!((r0 + R - 1) * dim + c + 16 * W <= out.len());
    let mut acc = [[_mm512_setzero_ps(); W]; R];
    // SAFETY: r0 * ld <= (r0 + R - 1) * ld < p.len() (third assert, keys non-empty).
    let pp = unsafe { p.as_ptr().add(r0 * ld) };
    for j in keys {
        // SAFETY: j < keys.end and c + 16 * W <= v.dim(), so columns c..c + 16 * W of value
        // row j end at most at base + (keys.end - 1) * stride + v.dim() <= data.len() (second
        // assert): the row start and its W 16-float loads are inside `data`.
        let x: [__m512; W] = unsafe {
            let vj = data.as_ptr().add(base + j * stride + c);
            std::array::from_fn(|t| _mm512_loadu_ps(vj.add(16 * t)))
        };
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: (r0 + r) * ld + j - s0 < (r0 + R - 1) * ld + keys.end - s0 <= p.len()
            // (r < R, j < keys.end; third assert).
            let pr = _mm512_set1_ps(unsafe { *pp.add(r * ld + j - s0) });
            for t in 0..W {
                row[t] = _mm512_add_ps(row[t], _mm512_mul_ps(pr, x[t]));
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (t, a) in row.iter().enumerate() {
            // SAFETY: the store ends at (r0 + r) * dim + c + 16 * (t + 1) <= (r0 + R - 1) *
            // dim + c + 16 * W <= out.len() (r < R, t < W; fourth assert).
            unsafe { _mm512_storeu_ps(out.as_mut_ptr().add((r0 + r) * dim + c + 16 * t), *a) };
        }
    }
}

/// `out[r * dim + d] = sum_{j in keys} p[r * ld + (j - keys.start)] * v[j][d]` in increasing
/// j (`v.dim()` a multiple of 16: the caller checks; [`pv_block`] asserts its bounds).
#[target_feature(enable = "avx512f")]
pub fn pv(p: &[f32], ld: usize, rows: usize, v: &Rows, keys: Range<usize>, out: &mut [f32]) {
    let dim = v.dim();
    if keys.is_empty() {
        out[..rows * dim].fill(0.0);
        return;
    }
    // Column slices of 64 (4 zmm) with 4 rows: 16 accumulators, 4 loads and 4 broadcasts
    // per 16 multiplies and 16 additions. The V slice (keys x 64 columns) stays in L1 while
    // every row block passes over it.
    let mut c = 0;
    while c < dim {
        let w = (dim - c) / 16;
        let mut r = 0;
        if w >= 4 {
            while r + 4 <= rows {
                pv_block::<4, 4>(p, ld, r, v, keys.clone(), c, out, dim);
                r += 4;
            }
            while r < rows {
                pv_block::<1, 4>(p, ld, r, v, keys.clone(), c, out, dim);
                r += 1;
            }
            c += 64;
        } else {
            while r + 4 <= rows {
                pv_block::<4, 1>(p, ld, r, v, keys.clone(), c, out, dim);
                r += 4;
            }
            while r < rows {
                pv_block::<1, 1>(p, ld, r, v, keys.clone(), c, out, dim);
                r += 1;
            }
            c += 16;
        }
    }
}
