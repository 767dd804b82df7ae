"""HAMi's scheduling semantics as plain Python: what HAMi would do with a GPU pod on a given state.

The card rules (hami.cards: fit, reasons, score and card policy, the namespace quota on a card) and the
node rules (hami.nodes: node score, node policy, the filter across nodes) of one HAMi release, written
from its source and checked against its own unit-test vectors (hami/tests). Nothing here imports Pulumi,
gpulab's policy pack or its components: the policy pack, the offline checker and the process-mode
differential (process_lab/differential.py, which judges it against the real HAMi) build on it.
"""

# The HAMi release these semantics follow: tag v2.8.3, commit 8f039ad22bfc14970e2ea557f24c411c34203079
# (github.com/Project-HAMi/HAMi); the lab deploys its chart 2.8.3 (model/versions.py).
HAMI_VERSION = "v2.8.3"
