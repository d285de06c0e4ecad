//! The error heatmap over (query position `s`, head `n`): geometry, a per-element coordinate
//! walker that needs no division per element, and the bucketed grid.

use crate::results::Heatmap;

/// At most this many buckets per heatmap side.
pub const HEATMAP_MAX_SIDE: usize = 64;

/// Where the two heatmap axes sit in a row-major tensor and how they are bucketed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HeatGeometry {
    pub row_axis: String,
    pub col_axis: String,
    /// Elements between consecutive positions of the row / column axis.
    pub row_stride: usize,
    pub col_stride: usize,
    pub row_len: usize,
    pub col_len: usize,
    /// Logical positions per bucket.
    pub row_bucket: usize,
    pub col_bucket: usize,
    pub rows: usize,
    pub cols: usize,
}

fn bucketing(len: usize) -> (usize, usize) {
    let bucket = len.div_ceil(HEATMAP_MAX_SIDE).max(1);
    (bucket, len.div_ceil(bucket))
}

impl HeatGeometry {
    /// The geometry for a tensor whose axes include `s` (rows) and `n` (columns); None
    /// otherwise, or when the axis names do not match the rank, or the tensor is empty.
    pub fn for_axes(shape: &[usize], axes: &[String]) -> Option<HeatGeometry> {
        if axes.len() != shape.len() || shape.contains(&0) {
            return None;
        }
        let r = axes.iter().position(|a| a == "s")?;
        let c = axes.iter().position(|a| a == "n")?;
        let stride = |k: usize| shape[k + 1..].iter().product::<usize>();
        let (row_bucket, rows) = bucketing(shape[r]);
        let (col_bucket, cols) = bucketing(shape[c]);
        Some(HeatGeometry {
            row_axis: axes[r].clone(),
            col_axis: axes[c].clone(),
            row_stride: stride(r),
            col_stride: stride(c),
            row_len: shape[r],
            col_len: shape[c],
            row_bucket,
            col_bucket,
            rows,
            cols,
        })
    }

    pub fn cells(&self) -> usize {
        self.rows * self.cols
    }

    /// Packs a finished grid.
    pub fn into_heatmap(self, values: Vec<f64>) -> Heatmap {
        Heatmap {
            row_axis: self.row_axis,
            col_axis: self.col_axis,
            row_bucket: self.row_bucket,
            col_bucket: self.col_bucket,
            rows: self.rows,
            cols: self.cols,
            values,
        }
    }
}

/// Accumulates the heatmap of consecutive flat indices starting at `first`.
///
/// The cell only changes at multiples of the smaller of the two axis strides, so the walker
/// keeps the running maximum of the current run in a register and only recomputes the cell
/// (by division) at run boundaries.
#[derive(Clone, Debug)]
pub(crate) struct HeatAccumulator {
    values: Vec<f64>,
    /// Flat index where the current run starts.
    pos: usize,
    /// Elements left in the current run (same cell).
    left: usize,
    cell: usize,
    run_max: f64,
    row_stride: usize,
    col_stride: usize,
    row_len: usize,
    col_len: usize,
    row_bucket: usize,
    col_bucket: usize,
    cols: usize,
}

impl HeatAccumulator {
    pub fn new(g: &HeatGeometry, first: usize) -> HeatAccumulator {
        let mut h = HeatAccumulator {
            values: vec![0.0; g.cells()],
            pos: first,
            left: 0,
            cell: 0,
            run_max: 0.0,
            row_stride: g.row_stride,
            col_stride: g.col_stride,
            row_len: g.row_len,
            col_len: g.col_len,
            row_bucket: g.row_bucket,
            col_bucket: g.col_bucket,
            cols: g.cols,
        };
        h.locate();
        h
    }

    /// The cell of flat index `pos` and the length of its run.
    fn locate(&mut self) {
        let p = self.pos;
        let row = (p / self.row_stride) % self.row_len;
        let col = (p / self.col_stride) % self.col_len;
        self.cell = (row / self.row_bucket) * self.cols + col / self.col_bucket;
        self.left =
            (self.row_stride - p % self.row_stride).min(self.col_stride - p % self.col_stride);
    }

    /// The cell of the current run (where the next element falls).
    #[cfg(test)]
    pub fn cell(&self) -> usize {
        self.cell
    }

    /// Records the next element's error (0 for elements without one).
    #[inline(always)]
    pub fn add(&mut self, err: f64) {
        if err > self.run_max {
            self.run_max = err;
        }
        self.left -= 1;
        if self.left == 0 {
            self.next_run();
        }
    }

    /// Records the errors of the next `errs.len()` elements (the same as calling [`add`] for
    /// each in turn, for errors that are not NaN): one maximum per run segment.
    ///
    /// [`add`]: HeatAccumulator::add
    #[inline(always)]
    pub fn add_slice(&mut self, errs: &[f64]) {
        let mut rest = errs;
        while !rest.is_empty() {
            let k = rest.len().min(self.left);
            let (seg, tail) = rest.split_at(k);
            let m = max_of(seg);
            if m > self.run_max {
                self.run_max = m;
            }
            self.left -= k;
            if self.left == 0 {
                self.next_run();
            }
            rest = tail;
        }
    }

    #[inline(never)]
    fn next_run(&mut self) {
        self.flush();
        self.pos += self.run_len_done();
        self.locate();
    }

    /// Length of the run just finished (recomputed from the position).
    fn run_len_done(&self) -> usize {
        let p = self.pos;
        (self.row_stride - p % self.row_stride).min(self.col_stride - p % self.col_stride)
    }

    fn flush(&mut self) {
        let v = &mut self.values[self.cell];
        if self.run_max > *v {
            *v = self.run_max;
        }
        self.run_max = 0.0;
    }

    /// The grid, row-major.
    pub fn finish(mut self) -> Vec<f64> {
        self.flush();
        self.values
    }
}

/// The largest of `xs` and 0 (for values that are not NaN): 8 running maxima, so the loop
/// does not wait on one compare chain (the maximum does not depend on the grouping).
#[inline(always)]
fn max_of(xs: &[f64]) -> f64 {
    const W: usize = 8;
    let mut m = [0.0f64; W];
    let mut groups = xs.chunks_exact(W);
    for g in &mut groups {
        for k in 0..W {
            if g[k] > m[k] {
                m[k] = g[k];
            }
        }
    }
    let mut best = 0.0f64;
    for &x in m.iter().chain(groups.remainder()) {
        if x > best {
            best = x;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn geometry_buckets_long_axes_to_at_most_64() {
        let g = HeatGeometry::for_axes(&[2, 1000, 40, 128], &names(&["b", "s", "n", "d"])).unwrap();
        assert_eq!((g.row_axis.as_str(), g.col_axis.as_str()), ("s", "n"));
        assert_eq!((g.row_stride, g.col_stride), (40 * 128, 128));
        assert_eq!((g.row_bucket, g.rows), (16, 63));
        assert_eq!((g.col_bucket, g.cols), (1, 40));
        let g = HeatGeometry::for_axes(&[64, 65], &names(&["s", "n"])).unwrap();
        assert_eq!((g.row_bucket, g.rows, g.col_bucket, g.cols), (1, 64, 2, 33));
        assert!(HeatGeometry::for_axes(&[4, 4], &names(&["s", "d"])).is_none());
        assert!(HeatGeometry::for_axes(&[4, 4], &names(&["s"])).is_none());
        assert!(HeatGeometry::for_axes(&[0, 4], &names(&["s", "n"])).is_none());
    }

    #[test]
    fn accumulator_matches_division_from_any_start() {
        let shape = [3, 5, 130, 7];
        let axes = names(&["b", "n", "s", "d"]);
        let g = HeatGeometry::for_axes(&shape, &axes).unwrap();
        let total: usize = shape.iter().product();
        for start in [0, 1, 6, 7, 911, total - 3] {
            let mut h = HeatAccumulator::new(&g, start);
            let mut want = vec![0.0; g.cells()];
            for flat in start..total {
                let s = (flat / g.row_stride) % g.row_len;
                let n = (flat / g.col_stride) % g.col_len;
                let expect = (s / g.row_bucket) * g.cols + n / g.col_bucket;
                assert_eq!(h.cell(), expect, "flat {flat} from {start}");
                let err = ((flat * 7919) % 1000) as f64;
                if err > want[expect] {
                    want[expect] = err;
                }
                h.add(err);
            }
            assert_eq!(h.finish(), want, "from {start}");
        }
    }

    #[test]
    fn add_slice_is_add_for_each_element_whatever_the_slice_lengths() {
        let shape = [2, 9, 3, 5];
        let axes = names(&["b", "s", "n", "d"]);
        let g = HeatGeometry::for_axes(&shape, &axes).unwrap();
        let total: usize = shape.iter().product();
        let errs: Vec<f64> = (0..total)
            .map(|i| match i % 11 {
                0 => 0.0,
                3 => f64::MAX,
                _ => ((i * 7919) % 1013) as f64 * 1e-3,
            })
            .collect();
        for start in [0, 4, 17] {
            let mut one = HeatAccumulator::new(&g, start);
            errs[start..].iter().for_each(|&e| one.add(e));
            let want = one.finish();
            for len in [1, 2, 7, 8, 15, 64, 200] {
                let mut h = HeatAccumulator::new(&g, start);
                for part in errs[start..].chunks(len) {
                    h.add_slice(part);
                }
                assert_eq!(h.finish(), want, "from {start}, slices of {len}");
            }
        }
    }
}
