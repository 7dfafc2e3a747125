"""Training heads for a target on MLX by self-distillation: the target's answers (distill), then the fit."""
