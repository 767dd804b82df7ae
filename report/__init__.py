"""Per-card GPU allocation report for a live gpulab lab (`make report`)."""
