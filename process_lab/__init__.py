"""The lab as local processes: a tenant's control plane, GPU nodes, admission and HAMi without Docker.

Per tenant: a real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) run by
`kwokctl --runtime binary` with the programs `make tools` builds; the tenant's GPU nodes as KWOK nodes
carrying the cards of the catalog (HAMi's register annotation and node capacity, as in the Docker lab);
the same admission policies, namespaces, quotas and inventory as the Docker lab (from the components'
own object builders); and, when a `hami-scheduler` binary is at hand, HAMi's scheduler extender and
webhook as a local process wired into the tenant's kube-scheduler, with the device plugin's bind-time
part played by `device_plugin.BindTimeRole`.

What needs containers (images, kubeadm join, Calico, MetalLB, Kamaji) is not here: see docs/process-lab.md.
"""
