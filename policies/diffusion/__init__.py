"""Diffusion Policy (Chi et al. 2023) in plain torch: a conditional 1D temporal U-Net over
action chunks, DDPM training, DDIM sampling, ONNX export of the fixed-step loop."""
