//! The FP4 families' computation: the oracle and a recipe (edited or not) run on a case's
//! packed codes and scales (the dequantisation, and W4A16's matmul on the dequantised weights).

use super::*;

impl Fp4Family {
    /// [`OpFamily::run`], with the recipe changed by `edit` first (`None` when the edit
    /// changes nothing).
    pub(super) fn run_edited(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: Option<fn(&mut Fp4DequantRecipe) -> bool>,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        let op = self.op();
        let c = self.case(params)?;
        let (specs, outs) = self.specs(&c);
        let get = |name: &str| -> Result<&Tensor, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(op, format!("no input `{name}`")))?;
            input(op, inputs, spec)
        };
        let weight = &get("weight")?.data;
        let scale_name = if c.format == Format::Nv && self.0 != Kind::W4a16 {
            "block_scale"
        } else {
            "scale"
        };
        let scales = &get(scale_name)?.data;
        let global = if c.format == Format::Nv {
            get("global_scale")?
                .to_f32_vec()
                .map_err(|e| failed(op, e))?[0]
        } else {
            1.0
        };
        let out_spec = &outs[0];
        if recipe == ORACLE {
            let codes = packing::unpack(weight, c.n * c.k, &c.layout).map_err(|e| failed(op, e))?;
            let w = self.exact_weights(&c, &codes, scales, global as f64);
            let values = if self.0 == Kind::W4a16 {
                // x is BF16, so exact in f32; w holds the exact weights `[n, k]`.
                let x = get("x")?.to_f32_vec().map_err(|e| failed(op, e))?;
                crate::gemm::matmul_sequential_f64(
                    &x,
                    &w,
                    crate::gemm::BLayout::NByK,
                    c.m,
                    c.n,
                    c.k,
                    threads,
                )
            } else {
                w
            };
            return Ok(Some(TensorMap::from([(
                out_spec.name.clone(),
                Tensor::of_f64(out_spec.shape.clone(), &values),
            )])));
        }
        let mut r = self.recipe(recipe, &c)?;
        if let Some(edit) = edit
            && !edit(&mut r)
        {
            return Ok(None);
        }
        let bits = match self.0 {
            Kind::Mx => dequant::mxfp4::dequantize(weight, scales, c.n, c.k, &r, threads),
            Kind::Nv => dequant::nvfp4::dequantize(weight, scales, global, c.n, c.k, &r, threads),
            Kind::W4a16 => {
                let x = get("x")?.bits16().map_err(|e| failed(op, e))?;
                let scales = match c.format {
                    Format::Mx => Fp4Scales::Mx { scales },
                    Format::Nv => Fp4Scales::Nv {
                        block_scales: scales,
                        global_scale: global,
                    },
                };
                let w = Fp4Weights {
                    packed: weight,
                    scales,
                    n: c.n,
                    k: c.k,
                };
                w4a16::matmul(&x, c.m, &w, &r, threads)
            }
        }
        .map_err(|e| failed(op, e))?;
        Ok(Some(TensorMap::from([(
            out_spec.name.clone(),
            Tensor::from_bits16(c.out_type, out_spec.shape.clone(), &bits),
        )])))
    }
}
