"""The Docker lab's components: kind's management cluster with Kamaji, tenant control planes, node-container and SSH
workers, HAMi's chart with the mock or real GPU node, and the images pulled once on the host."""
