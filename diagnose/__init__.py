"""`make diagnose`: why the lab is not ready, across the management cluster and every tenant.

collect.py runs every call bounded (runner.py) and keeps what it gets in memory; analyze.py (objects,
known causes), cluster_findings.py and host_findings.py turn that into findings (pure functions);
redact.py makes everything safe to write; __main__.py writes the archive under reports/ and prints
the summary.
"""
