//! What a verdict reports beyond pass/fail: the worst elements and the error heatmap.

use super::*;

#[test]
fn worst_elements_are_located_by_logical_index() {
    let shape = [1, 2, 4, 3];
    let s = spec(ElemType::F32, &shape, &["b", "n", "s", "d"]);
    let e = Tensor::from_f32(shape.to_vec(), &[1.0; 24]);
    let mut v = vec![1.0f32; 24];
    v[(4 + 3) * 3 + 2] = 1.5; // b=0 n=1 s=3 d=2
    v[5] = 1.25; // b=0 n=0 s=1 d=2
    let a = Tensor::from_f32(shape.to_vec(), &v);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 0 }),
        &Comparison::new(&s, &a, &e),
    );
    assert_eq!(m.worst.len(), 2, "exact elements are not listed");
    assert_eq!(m.worst[0].index, "b=0 n=1 s=3 d=2");
    assert_eq!((m.worst[0].actual, m.worst[0].expected), (1.5, 1.0));
    assert_eq!(m.worst[0].abs_err, 0.5);
    assert_eq!(m.worst[1].index, "b=0 n=0 s=1 d=2");
}

#[test]
fn heatmap_records_the_max_error_per_query_position_and_head_bucket() {
    let shape = [1, 130, 2, 4];
    let n: usize = shape.iter().product();
    let s = spec(ElemType::F32, &shape, &["b", "s", "n", "d"]);
    let e = Tensor::from_f32(shape.to_vec(), &vec![0.0; n]);
    let mut v = vec![0.0f32; n];
    let at = |s: usize, h: usize, d: usize| (s * 2 + h) * 4 + d;
    v[at(5, 1, 3)] = 0.5;
    v[at(4, 1, 0)] = 0.125; // same bucket (s 3..6), smaller
    v[at(129, 0, 2)] = -0.25;
    let a = Tensor::from_f32(shape.to_vec(), &v);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 0 }),
        &Comparison::new(&s, &a, &e),
    );
    let h = m.heatmap.expect("axes s and n give a heatmap");
    assert_eq!((h.row_axis.as_str(), h.col_axis.as_str()), ("s", "n"));
    assert_eq!((h.row_bucket, h.rows, h.col_bucket, h.cols), (3, 44, 1, 2));
    let mut want = vec![0.0; 44 * 2];
    want[2 + 1] = 0.5; // row 1 (s 3..6), column 1
    want[43 * 2] = 0.25;
    assert_eq!(h.values, want);
    let no_axes = spec(ElemType::F32, &shape, &[]);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 0 }),
        &Comparison::new(&no_axes, &a, &e),
    );
    assert!(m.heatmap.is_none());
}
