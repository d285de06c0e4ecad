use super::*;

#[test]
fn the_write_and_the_dequantisation_invert_each_other_on_exact_values() {
    let r = C8Recipe::preset("ascend_ifa_c8").unwrap();
    // s = 1/32, o = -1.5: x = (y + o) * s for y = 10 quantises back to 10.
    let (s, o) = (0.03125f32, -1.5f32);
    let x = (10.0 + o) * s;
    assert_eq!(quantise(DType::Bf16, 0, &r, x, s, o), 10);
    assert_eq!(dequantise_one(DType::Bf16, &r, 10.0, s, o), x);
    // Saturation, and the wrap without it.
    assert_eq!(quantise(DType::Bf16, 0, &r, 150.0 * s, s, 0.0), 127);
    let wrap = C8Recipe {
        saturate: false,
        ..r.clone()
    };
    assert_eq!(quantise(DType::Bf16, 0, &wrap, 150.0 * s, s, 0.0), -106);
}
