"""Entry point of the policy pack, and of the offline checker.

`pulumi preview --policy-pack policies` runs this file to start the analyzer.
`python -m policies check --tenant NAME FILE...` runs the same rules on plain manifests.
"""

import sys
from pathlib import Path

# The pack imports gpulab's config models; make the project root importable however this is started.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if sys.argv[1:2] == ["check"]:
    from policies.checker import main

    sys.exit(main(sys.argv[2:]))

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.rules import ALL_POLICIES

PolicyPack(name="gpulab-gpu-policies", policies=ALL_POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
