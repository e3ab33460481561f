"""GPUQuota: which quotas cover a service (`scope`), whether a quota is valid (`validation`), how many
replicas a service may hold under the quotas covering it (`decision`), what the leader has admitted
and who waits (`ledger`), and the quota's status (`status`). Pure: numbers and names in, values out;
what a replica costs comes from the InferenceService planner (plan/inferenceservice/quota_cost.py)."""
