"""Medic's agent for SageMaker HyperPod clusters orchestrated by Amazon EKS (a Deployment in the cluster).

The counterpart of the Slurm agent (medic_agent.main): the same queue, ledger claim, local state and result
items, but its one command, `restart_job`, is carried out through typed Kubernetes API calls (kube.py), never
a command line. Leader election through a coordination.k8s.io Lease (lease.py) makes it safe to scale.
"""
