"""Real-workload failure simulator: runs a small training job under torchrun with a fault injected."""
