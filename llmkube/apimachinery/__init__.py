"""Kubernetes' API value types, as k8s.io/apimachinery defines them: resource quantities.

The bottom of the layers: the planner (which writes quantities the way the API server stores them)
and the kube machinery (which compares what it wants with what the server holds) both read
quantities with this one parser. It imports nothing of ours.
"""
