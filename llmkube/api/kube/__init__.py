"""Kubernetes core/v1 schemas embedded in the CRDs (hack/gen-kube-schemas.py writes them)."""
