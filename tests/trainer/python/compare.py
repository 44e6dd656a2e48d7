"""Checks one kolo dump (written by tests/trainer/tools/model_dump) against PyTorch: builds the
same model with plain torch.nn in float32, loads kolo's weights, runs kolo's inputs and compares
the loss and the gradient of EVERY parameter.

    /usr/bin/python3 tests/trainer/python/compare.py <dump dir>

Errors are relative: |loss_kolo - loss_torch| / |loss_torch| for the loss and, per tensor,
||g_kolo - g_torch||_2 / ||g_torch||_2 for the gradients. fp16/bf16 dumps hold kolo's
low-precision weights; torch runs them upcast to fp32, so the errors measure kolo's reduced-
precision activations and gradients only. Exit status 0 when every check passes.
"""
import json
import os
import sys

try:
    import torch
except ImportError as e:  # the test must not pass silently without its reference
    sys.exit(f"compare.py: FAILED: cannot import torch ({e}); run with /usr/bin/python3 "
             f"(Debian's python3-torch)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kolo_torch  # noqa: E402

# (loss tolerance, per-tensor gradient tolerance), relative, by kolo storage dtype. Measured
# on these dumps (largest tensor): fp16 loss 2e-5 / grads 2.7e-3; bf16 loss 1.7e-4 / grads
# 8.0e-2 (the MLP's first layer; torch's own bf16 run of the same model is off by the same
# 8.0e-2, printed below as "torch <dtype>").
TOLERANCES = {
    # Same math in the same precision; only the order of the fp32 sums differs.
    "float32": (1e-4, 1e-4),
    # fp16 rounds every stored activation and gradient to 11 bits (4.9e-4 relative); about
    # 20 roundings per layer compound: 1e-2 is ~4x the measured worst tensor.
    "float16": (1e-3, 1e-2),
    # bf16 keeps 8 bits (3.9e-3 per rounding), 8x coarser than fp16: 0.15 is ~2x the measured
    # worst tensor, which torch's own bf16 reproduces.
    "bfloat16": (1e-2, 1.5e-1),
}


def run_torch(cfg, weights, inputs, dtype=torch.float32):
    if cfg["model"] == "bert":
        model = kolo_torch.Bert(cfg["config"]).to(dtype)
        kolo_torch.load_weights(model, weights, dtype)
        loss, _, _ = model(inputs["input_ids"], inputs["token_type_ids"],
                           inputs["attention_mask"], inputs.get("mlm_labels"),
                           inputs.get("labels"))
    else:
        model = kolo_torch.Mlp(cfg["config"]["sizes"]).to(dtype)
        kolo_torch.load_weights(model, weights, dtype)
        loss = model(inputs["inputs"].to(dtype), inputs["labels"])
    loss.backward()
    return model, loss.item()


def report_torch_low_precision(cfg, weights, inputs, ref):
    """Context for the tolerances: torch's own error when it runs in kolo's storage dtype."""
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(cfg["dtype"])
    if dtype is None:
        return
    try:
        model, loss = run_torch(cfg, weights, inputs, dtype)
    except RuntimeError as e:  # torch 1.13 lacks some fp16 CPU kernels
        print(f"torch {cfg['dtype']}: not available on CPU ({str(e).splitlines()[0]})")
        return
    errs = [((p.grad.float() - ref[n].grad).norm() / ref[n].grad.norm()).item()
            for n, p in model.named_parameters() if not n.endswith("key.bias")]
    print(f"torch {cfg['dtype']}: loss {loss:.8f}, largest gradient rel error {max(errs):.2e}")


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    d = argv[1]
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    torch.manual_seed(0)
    weights, _ = kolo_torch.read_safetensors(os.path.join(d, "weights.safetensors"))
    inputs, _ = kolo_torch.read_safetensors(os.path.join(d, "inputs.safetensors"))
    grads, _ = kolo_torch.read_safetensors(os.path.join(d, "grads.safetensors"))
    model, loss_t = run_torch(cfg, weights, inputs)
    loss_k = cfg["loss"]
    loss_tol, grad_tol = TOLERANCES[cfg["dtype"]]
    loss_tol = cfg.get("loss_tolerance", loss_tol)  # a dump may ask for a tighter bound

    failures = []
    loss_err = abs(loss_k - loss_t) / abs(loss_t)
    print(f"{cfg['name']}: loss kolo {loss_k:.8f} torch {loss_t:.8f} rel {loss_err:.2e} "
          f"(tol {loss_tol:g})")
    if not loss_err <= loss_tol:
        failures.append(f"loss rel error {loss_err:.3e} > {loss_tol:g}")
    params = dict(model.named_parameters())
    if set(params) != set(grads):
        failures.append(f"gradient names differ: torch only {sorted(set(params) - set(grads))}, "
                        f"kolo only {sorted(set(grads) - set(params))}")
    worst = []
    for name, p in params.items():
        if name not in grads:
            continue
        g_t = p.grad if p.grad is not None else torch.zeros_like(p)
        g_k = grads[name].float()
        denom = g_t.norm().item()
        if name.endswith("attention.self.key.bias"):
            # Zero in exact arithmetic (the softmax ignores the constant q.b_k each query row
            # gets), so both sides hold rounding noise: measure it against the query bias's
            # gradient of the same layer instead.
            denom = params[name.replace(".key.", ".query.")].grad.norm().item()
        err = (g_k - g_t).norm().item() / max(denom, 1e-30)
        worst.append((err, name, denom))
        if not err <= grad_tol:
            failures.append(f"grad {name}: rel error {err:.3e} > {grad_tol:g} (|g| {denom:.3e})")
    report_torch_low_precision(cfg, weights, inputs, params)
    worst.sort(reverse=True)
    print(f"{len(worst)} gradients, tolerance {grad_tol:g}; largest errors:")
    for err, name, denom in worst[:5]:
        print(f"  {err:.2e}  {name}  (|g_torch| {denom:.3e})")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
