"""gpulab's CrossGuard policy pack and its offline manifest checker (`python -m policies check`)."""
