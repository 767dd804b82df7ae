"""gpulab's ComponentResources: one module per component, plus shell.py, which runs scripts/.

They build on the model (model/) and never import the policy pack (policies/), nor it them.
"""
