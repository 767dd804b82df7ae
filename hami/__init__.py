"""HAMi's scheduling semantics as plain Python: what HAMi would do with a GPU pod on a given state.

The card rules (hami.cards: fit, reasons, score and card policy, the namespace quota on a card), the node rules
(hami.nodes: one node's card walk; hami.cluster: node score, node policy, the filter across nodes) and the
webhook's refusals at create (hami.webhook: the namespace quota; under v2.10.0 also a bad gpumem-percentage, a
privileged container, spec.nodeName) of the HAMi releases gpulab follows, v2.8.3 and v2.10.0, each
written from its source and checked against its own unit-test vectors (hami/tests); what differs between them is
one `Rules` record per release (hami.releases), which the engine takes (v2.8.3's when none is given). HAMi's
annotations have one reader each (hami.annotations), a placed pod's cards are counted as its release counts them
(hami.usage), and every reason name gpulab reports is defined once (hami.reasons). Nothing here
imports Pulumi, gpulab's policy pack or its components: the policy pack, the offline checker and the process-mode
differential (process_lab/differential.py, which judges it against the real HAMi) build on it.
"""

# The HAMi release these semantics follow when no rules are given: tag v2.8.3, commit
# 8f039ad22bfc14970e2ea557f24c411c34203079 (github.com/Project-HAMi/HAMi); the lab deploys its chart 2.8.3
# (model/versions.py). hami/releases.py also has v2.10.0's (tag v2.10.0, commit 4707fb02c91c).
HAMI_VERSION = "v2.8.3"
