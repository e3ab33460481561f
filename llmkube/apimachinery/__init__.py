"""Kubernetes' API value types and utilities, as k8s.io/apimachinery defines them: resource
quantities, and the proxy a request goes through (`proxy`: HTTPS_PROXY/NO_PROXY read as Go reads
them, as k8s.io/apimachinery/pkg/util/net does for client-go).

The bottom of the layers: the planner (which writes quantities the way the API server stores them)
and the kube machinery (which compares what it wants with what the server holds) both read
quantities with this one parser. It imports nothing of ours.
"""
